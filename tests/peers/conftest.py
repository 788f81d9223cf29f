"""Real peers on one path with zklocks: Apache Curator (a JVM worker per ``curator()``)
and kazoo's recipes (in threads of this process).

Curator comes from Debian's ``libcurator-recipes-java`` with a JDK; the session fixture
installs them when missing (``scripts/ensure-curator.sh``, what ``make bench`` uses too)
and compiles the worker once into ``~/.cache/zklocks/curator-worker``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

import pytest
from interop.curator import harness

import zklocks
from zklocks.server import ZooKeeperServer

_paths = count(1)


@pytest.fixture(scope="session")
def curator_worker_classes() -> Path:
    """Curator and a JDK installed, the worker compiled: once per run."""
    harness.ensure_installed()
    return harness.compiled()


@pytest.fixture
def curator(
    zk_server: ZooKeeperServer, curator_worker_classes: Path
) -> Iterator[Callable[[], harness.CuratorWorker]]:
    """Starts connected Curator workers (one JVM, one session each); all closed after."""
    started: list[harness.CuratorWorker] = []

    def start(hosts: str | None = None) -> harness.CuratorWorker:
        worker = harness.CuratorWorker()
        started.append(worker)
        worker.timeout = 120.0
        worker.connect(hosts or zk_server.hosts, session_timeout=20.0)
        return worker

    yield start
    for worker in started:
        worker.close()


@pytest.fixture
def path(request: pytest.FixtureRequest) -> str:
    return f"/interop/{request.node.name.replace('[', '-').rstrip(']')}-{next(_paths)}"


@pytest.fixture
def client(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts) as c:
        yield c
