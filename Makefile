# fluxmat developer entry points. Each target creates .venv if it is missing.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

.PHONY: test test-fast test-all bench lint demo docs clean

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

# unit tests only: no servers, browser, Spark or job (see tests/conftest.py), and a quarter of
# the random examples (FLUXMAT_TEST_PROFILE=fast, tests/support/profile.py); `make test` runs all
test-fast: $(STAMP)
	FLUXMAT_TEST_PROFILE=fast $(VPY) -m pytest -m "not integration"

test-all: $(STAMP)
	FLUXMAT_FULL_CORPUS=1 $(VPY) -m pytest -m "slow or not slow"

bench: $(BSTAMP)
	$(VPY) -m tests.benchmarks.run

lint: $(STAMP)
	$(VPY) -m ruff check fluxmat engine connectors stream ops tests setup.py

demo: $(STAMP)
	$(VENV)/bin/fluxmat demo

# the documentation site in site/ (`$(VENV)/bin/mkdocs serve` to read it while editing)
docs: $(STAMP)
	$(VPY) -m fluxmat.ops.cli_reference
	$(VPY) -m mkdocs build --strict -d site

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info site
