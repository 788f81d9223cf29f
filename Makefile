# The README's two commands: `make demo` and `make test`. Both set everything up first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench bench-smoke clean

setup: $(VENV)/.installed
	@scripts/ensure-system-deps.sh

$(VENV)/.installed: pyproject.toml
	@scripts/ensure-system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

demo: setup
	$(BIN)/zklocks demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy --strict src

test: lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
