# The README's two commands: `make demo` and `make test`. Both set everything up first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

# System packages: Java + ZooKeeper (the library, tests, demo) and redis-server (the
# benchmarks' Redis row and their CI smoke); installed with apt-get only when missing.
SYSTEM_EXTRAS := redis-server

setup: $(VENV)/.installed
	@scripts/ensure-system-deps.sh $(SYSTEM_EXTRAS)

$(VENV)/.installed: pyproject.toml
	@scripts/ensure-system-deps.sh $(SYSTEM_EXTRAS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench]'
	@touch $@

demo: setup
	$(BIN)/zklocks demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy --strict src

test: lint
	$(BIN)/pytest

bench: setup
	$(BIN)/python -m benchmarks.run --out benchmarks/results

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
