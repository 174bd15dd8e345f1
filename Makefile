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

# Write bytecode caches even where PYTHONDONTWRITEBYTECODE is set: pytest keeps the
# assertion-rewritten test modules there, and without them every worker of every run
# rewrites and compiles all of them again (about 10 s of CPU per worker; docs/testing.md).
unexport PYTHONDONTWRITEBYTECODE

# pytest-xdist workers for the parallel lanes (`make test WORKERS=1` for one)
WORKERS ?= auto
IWORKERS ?= 2

# Every test, in three lanes (each runs even when one before failed; the target fails if any did):
# the unit tests on every core, then the integration tests two modules at a time (IWORKERS=0 runs
# them one at a time: docs/testing.md), then the
# timing-sensitive integration tests (`alone`) one at a time. tests.support.warm first fills
# numba's cache once, so that the workers do not all compile the arrays core at the same time.
test: $(STAMP)
	$(VPY) -m tests.support.warm
	status=0; \
	$(VPY) -m pytest -m "not integration" -n $(WORKERS) || status=1; \
	$(VPY) -m pytest -m "integration and not alone" -n $(IWORKERS) --dist loadfile || status=1; \
	$(VPY) -m pytest -m "integration and alone" || status=1; \
	exit $$status

# the quick unit tests only: no servers, browser, Spark or job (`integration`), none of the unit
# tests over ~2 s (`heavy`, tests/conftest.py), and a tenth of the random examples
# (FLUXMAT_TEST_PROFILE=fast, tests/support/profile.py); `make test` runs all of them
test-fast: $(STAMP)
	$(VPY) -m tests.support.warm
	FLUXMAT_TEST_PROFILE=fast $(VPY) -m pytest -m "not integration and not heavy" -n $(WORKERS)

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
