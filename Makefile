# The README's two commands: `make demo` and `make test`. Each installs what it needs
# first, and only that: one venv, with a stamp per set of extras installed into it.
#
#   make demo    the package (no extras) + Java and ZooKeeper
#   make test    + the dev and docs extras; + the bench extras and redis-server, because
#                the suite smoke-runs `make bench` (tests/integration/test_bench_smoke.py)
#   make bench   + the bench extras, redis-server, and Curator with a JDK (the Java row)
#   make docs    + the docs extras; builds the site with --strict into site/
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint docs bench clean

# Java + ZooKeeper (the library, tests, demo); redis-server for the benchmarks' Redis row
# (Debian starts it as a daemon, so only the commands that need it install it). Both are
# installed with apt-get only when missing.
SYSTEM_DEPS := scripts/ensure-system-deps.sh

setup: $(STAMP)-dev $(STAMP)-docs $(STAMP)-bench

$(BIN)/python:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || $(SYSTEM_DEPS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP)-demo: pyproject.toml | $(BIN)/python
	@$(SYSTEM_DEPS)
	$(BIN)/pip install -q -e .
	@touch $@

$(STAMP)-dev: pyproject.toml | $(BIN)/python
	@$(SYSTEM_DEPS)
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

$(STAMP)-docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[docs]'
	@touch $@

$(STAMP)-bench: pyproject.toml | $(BIN)/python
	@$(SYSTEM_DEPS) redis-server
	@scripts/ensure-curator.sh
	$(BIN)/pip install -q -e '.[bench]'
	@touch $@

demo: $(STAMP)-demo
	$(BIN)/zklocks demo

lint: $(STAMP)-dev
	$(BIN)/ruff check .
	$(BIN)/mypy --strict src
	$(BIN)/lint-imports

test: lint docs $(STAMP)-bench
	$(BIN)/pytest

# Material prints an end-of-life notice about MkDocs itself on every build, not about our
# pages; NO_MKDOCS_2_WARNING silences only that. --strict fails on any warning.
docs: $(STAMP)-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)-bench
	$(BIN)/python -m benchmarks.run --out benchmarks/results

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis
