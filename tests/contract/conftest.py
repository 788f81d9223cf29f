"""The contract suite's fixtures: every lock kind behind one factory, and a wake-up probe."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from contract_support import WakeProbe

import zklocks
from zklocks._ops import Gone
from zklocks._sync import driver
from zklocks.server import ZooKeeperServer

_paths = itertools.count()


@pytest.fixture
def lock_path(request: pytest.FixtureRequest) -> str:
    return f"/contract/{request.node.name.replace('[', '-').rstrip(']')}-{next(_paths)}"


@pytest.fixture
def hosts(zk_server: ZooKeeperServer) -> str:
    return zk_server.hosts


@pytest.fixture
def client(hosts: str) -> Iterator[zklocks.Client]:
    with zklocks.Client(hosts) as c:
        yield c


@pytest.fixture
def make_client(hosts: str) -> Iterator[Callable[..., zklocks.Client]]:
    made: list[zklocks.Client] = []

    def make(**options: Any) -> zklocks.Client:
        c = zklocks.Client(hosts, **options).start()
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


@pytest.fixture
def inspector(hosts: str) -> Iterator[Any]:
    """An independent kazoo client to look at the server's state."""
    from kazoo.client import KazooClient

    kz = KazooClient(hosts=hosts)
    kz.start(timeout=15)
    yield kz
    kz.stop()
    kz.close()


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> WakeProbe:
    found = WakeProbe()
    original = driver.await_deletion

    def counted(op: Any, session: Any) -> Any:
        name = threading.current_thread().name
        found.waiting_event(name).set()
        reply = original(op, session)
        if isinstance(reply, Gone):
            with found.mutex:
                found.wakeups[name] = found.wakeups.get(name, 0) + 1
        return reply

    monkeypatch.setattr(driver, "await_deletion", counted)
    return found
