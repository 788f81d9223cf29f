# The README's two commands: `make demo` and `make test`. Each installs what it needs
# first, and only that: one venv, with a stamp per set of extras installed into it.
#
#   make demo    the package (no extras) + Java and ZooKeeper
#   make test    + the dev and docs extras; + the bench extras and redis-server, because
#                the suite smoke-runs `make bench` (tests/integration/test_bench_smoke.py);
#                + PostgreSQL and redis-server for the fencing tests, which start
#                throwaway servers of their own (tests/fence_servers.py); + chromium,
#                which opens the built docs site from file:// (test_docs_site.py)
#                + Debian's prometheus for its promtool: the alert rules' test
#                (contrib/prometheus; only promtool is used, though Debian starts
#                the Prometheus server it ships)
#                + MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user, and libkrb5-dev
#                with gcc to build the `kerberos` package): the GSSAPI tests' own KDC
#   make bench   + the bench extras, redis-server, and Curator with a JDK (the Java row)
#   make docs    + the docs extras; builds the site with --strict into site/
#   make dist    + the dev extras (build): the sdist and the wheel into dist/
#   make nemesis + the bench extras (matplotlib): a long nemesis run by hand, not in CI
#
#   make fresh-test   the README's two commands on a fresh Debian 12 (DIST=bookworm, the
#                default) or 13 (DIST=trixie), as a new user runs them: a debootstrap
#                chroot (from the mirror apt uses here), a clean clone of the
#                repository, `make demo` then `make test` with SIGINT ignored (as
#                under `nohup make test &` or some CI runners). Needs root; 20+ minutes;
#                not part of CI. Options in scripts/fresh-test.sh (PYTEST_ADDOPTS='-k X'
#                runs only some tests, FRESH_WORKTREE=1 includes uncommitted changes).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint docs dist bench bench-tracing nemesis clean fresh-test soak test-subset test-trixie

# Java + ZooKeeper (the library, tests, demo); redis-server for the benchmarks' Redis row
# and, with PostgreSQL, for the fencing tests (Debian starts both as daemons, so only the
# commands that need them install them; the tests start servers of their own). All are
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
	@$(SYSTEM_DEPS) kerberos
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
	$(BIN)/mypy --strict nemesis
	$(BIN)/lint-imports

test: lint docs $(STAMP)-bench
	@$(SYSTEM_DEPS) postgresql redis-server prometheus chromium
	$(BIN)/pytest

# Material prints an end-of-life notice about MkDocs itself on every build, not about our
# pages; NO_MKDOCS_2_WARNING silences only that. --strict fails on any warning.
docs: $(STAMP)-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# SCENARIOS picks some (comma-separated, as --only): e.g. make bench SCENARIOS=ensemble
# (3 members, delayed links; not in the default list) or SCENARIOS=all
bench: $(STAMP)-bench
	$(BIN)/python -m benchmarks.run --out benchmarks/results $(if $(SCENARIOS),--only $(SCENARIOS))

# What the OpenTelemetry hooks cost with no tracer provider: alternating rounds, one run
bench-tracing: $(STAMP)-bench
	$(BIN)/pip install -q -e '.[bench,otel]'
	$(BIN)/python -m benchmarks.tracing_ab

DIST ?= bookworm

fresh-test:
	DIST=$(DIST) scripts/fresh-test.sh

# Some tests only (TESTS: pytest paths), with what they need: ZooKeeper and Java; the
# Curator jars and a JDK come with tests/peers' own fixture.
TESTS ?= tests/unit
test-subset: $(STAMP)-dev
	@$(SYSTEM_DEPS)
	$(BIN)/pytest $(TESTS)

# CI's Debian 13 leg: Python 3.13 and ZooKeeper 3.9, from Debian's packages, in a fresh
# debootstrap chroot of its own (scripts/fresh-test.sh, DIST=trixie; the base system is
# downloaded once into TRIXIE_DIR and kept) on a clean clone. Not the whole suite: the
# unit tests, the lock contract, the interop peers, and the integration files closest to
# the server and the interpreter (wire, TLS, transactions, locks, elections, the carriers,
# lock-delay's release multi, the docs' samples of server output). Needs root.
TRIXIE_DIR ?= /var/tmp/zklocks-ci-trixie
# tests/contract last: its modules import from its conftest.py, and pytest loads the
# conftest.py of every path given before it imports a test module (the last one wins).
# The alert rules' tests need Debian's prometheus (promtool) and nothing of Python's or
# ZooKeeper's version: they run in `make test` only.
TRIXIE_TESTS ?= tests/unit --ignore=tests/unit/test_contrib_monitoring.py tests/peers \
	$(addprefix tests/integration/test_,$(addsuffix .py,connection connection_tls \
	transactions lock_family election election_async ensemble_tls cli_security \
	hostile_input api_polish deadlines carrier_contract lock_delay lock_delay_newcomer)) \
	docs/cli.md \
	tests/contract
test-trixie:
	DIST=trixie FRESH_DIR=$(TRIXIE_DIR) \
		FRESH_RUN='make test-subset TESTS="$(TRIXIE_TESTS)"' scripts/fresh-test.sh

# The soaks pytest deselects by default (marker `soak`): the churn soak, and healthy
# leases held on a healthy ensemble for ZKLOCKS_SOAK_MINUTES (default 10) that must
# never be marked lost (tests/integration/test_ensemble_lease_health.py).
soak: $(STAMP)-dev
	$(BIN)/pytest -m soak

# A long run on a real ensemble behind proxies, faults all along (nemesis/, see
# docs/architecture.md): exit 1 if the checker found a violation; report, timeline and
# history in NEMESIS_OUT. Not part of `make test` (tests/nemesis runs a short one).
# e.g. make nemesis NEMESIS_WORKLOAD=rwlock NEMESIS_MINUTES=60 NEMESIS_TIMING=tight
# guarded-set starts its own PostgreSQL and redis-server (installed by `make test`); its
# control, on the same seed: python -m nemesis run ... --seed N --plant unguarded
# NEMESIS_LOCK_DELAY=SECONDS: every lock has that lock_delay, and the checker judges it
NEMESIS_MINUTES ?= 20
NEMESIS_MEMBERS ?= 5
NEMESIS_WORKLOAD ?= guarded-set
NEMESIS_TIMING ?= sample
NEMESIS_OUT ?= nemesis/results
NEMESIS_SEED ?=
NEMESIS_LOCK_DELAY ?=

nemesis: $(STAMP)-dev $(STAMP)-bench
	$(BIN)/python -m nemesis run --minutes $(NEMESIS_MINUTES) --members $(NEMESIS_MEMBERS) \
		--workload $(NEMESIS_WORKLOAD) --timing $(NEMESIS_TIMING) --out $(NEMESIS_OUT) \
		$(if $(NEMESIS_SEED),--seed $(NEMESIS_SEED)) \
		$(if $(NEMESIS_LOCK_DELAY),--lock-delay $(NEMESIS_LOCK_DELAY))

# The sdist and the wheel (python -m build, in an isolated build environment with
# hatchling from the package index) into dist/, which git ignores.
dist: $(STAMP)-dev
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

clean:
	rm -rf $(VENV) site dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
