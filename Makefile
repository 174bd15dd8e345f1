# fluxmat developer entry points. Each target creates .venv if it is missing.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

.PHONY: test test-all bench lint demo clean

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

test: $(STAMP)
	$(VPY) -m pytest

test-all: $(STAMP)
	FLUXMAT_FULL_CORPUS=1 $(VPY) -m pytest -m "slow or not slow"

bench: $(STAMP)
	$(VPY) -m tests.benchmarks.run

lint: $(STAMP)
	$(VPY) -m ruff check engine connectors stream ops tests

demo: $(STAMP)
	$(VENV)/bin/fluxmat demo

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info
