# fluxmat developer entry points. Each target creates .venv if it is missing.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

.PHONY: test test-all bench lint demo clean

BSTAMP  := $(VENV)/.installed-bench

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# the benchmark peers (DuckDB, Pathway, owlrl, matplotlib, ...) only for `make bench`
$(BSTAMP): $(STAMP)
	$(VPY) -m pip install -q -e '.[test,bench]'
	touch $(BSTAMP)

test: $(STAMP)
	$(VPY) -m pytest

test-all: $(STAMP)
	FLUXMAT_FULL_CORPUS=1 $(VPY) -m pytest -m "slow or not slow"

bench: $(BSTAMP)
	$(VPY) -m tests.benchmarks.run

lint: $(STAMP)
	$(VPY) -m ruff check fluxmat engine connectors stream ops tests setup.py

demo: $(STAMP)
	$(VENV)/bin/fluxmat demo

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info
