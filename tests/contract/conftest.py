"""The contract suite's fixtures: every lock kind behind one factory, and a wake-up probe."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from contract_support import WakeProbe

import zklocks
from helpers import close_session, expire_session
from zklocks._core.ops import Wait
from zklocks._sync import driver
from zklocks._vocabulary import WatchKind
from zklocks.server import ZooKeeperServer

_paths = itertools.count()


@pytest.fixture
def lock_path(request: pytest.FixtureRequest) -> str:
    return f"/contract/{request.node.name.replace('[', '-').rstrip(']')}-{next(_paths)}"


@pytest.fixture
def hosts(zk_server: ZooKeeperServer) -> str:
    """The real server, for cases that need other processes."""
    return zk_server.hosts


class Backend:
    """Where a contract case runs: the real ZooKeeper, or the simulator's model of it."""

    name = "zookeeper"

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts

    def client(self, **options: Any) -> zklocks.Client:
        """A client, not started."""
        return zklocks.Client(self.hosts, **options)

    def expire(self, client: zklocks.Client) -> None:
        expire_session(client, self.hosts)

    def inspector(self) -> Any:
        """An independent view of the server's nodes (kazoo for the real one)."""
        from kazoo.client import KazooClient

        kz = KazooClient(hosts=self.hosts)
        kz.start(timeout=15)
        return kz

    def close_inspector(self, inspector: Any) -> None:
        inspector.stop()
        inspector.close()


class SimBackend(Backend):
    name = "sim"

    def __init__(self) -> None:
        from zklocks.sim import SimServer

        super().__init__("sim:contract")
        self.server = SimServer()

    def client(self, **options: Any) -> zklocks.Client:
        from zklocks.sim import session_factory

        return zklocks.Client(self.hosts, session_factory=session_factory(self.server), **options)

    def expire(self, client: zklocks.Client) -> None:
        session = client._session
        assert session is not None
        assert self.server.expire_session(session.session_id())

    def inspector(self) -> Any:
        return self.server.inspector()

    def close_inspector(self, inspector: Any) -> None:
        inspector.stop()


class AsyncBackend:
    """Where an asyncio contract case runs: the real ZooKeeper, or the simulator's model."""

    name = "zookeeper"

    def __init__(self, hosts: str) -> None:
        from zklocks._asyncio.session import AsyncSession

        self.hosts = hosts
        self.session_class: type = AsyncSession  # what a case patches to count round trips

    def client(self, **options: Any) -> zklocks.AsyncClient:
        """A client, not started."""
        return zklocks.AsyncClient(self.hosts, **options)

    def expire(self, client: zklocks.AsyncClient) -> None:
        """End the client's session from outside (blocking: its loop stands still)."""
        session: Any = client._session_or_raise()
        close_session(self.hosts, *session.credentials())


class AsyncSimBackend(AsyncBackend):
    name = "sim"

    def __init__(self) -> None:
        from zklocks.sim import AsyncSimSession, SimServer

        self.hosts = "sim:contract"
        self.server = SimServer()
        self.session_class = AsyncSimSession

    def client(self, **options: Any) -> zklocks.AsyncClient:
        from zklocks.sim import async_session_factory

        factory = async_session_factory(self.server)
        return zklocks.AsyncClient(self.hosts, session_factory=factory, **options)

    def expire(self, client: zklocks.AsyncClient) -> None:
        assert self.server.expire_session(client._session_or_raise().session_id())


@pytest.fixture(params=["zookeeper", "sim"])
def async_backend(request: pytest.FixtureRequest) -> AsyncBackend:
    """The async contract runs on both, as the sync one does."""
    if request.param == "sim":
        return AsyncSimBackend()
    return AsyncBackend(request.getfixturevalue("zk_server").hosts)


@pytest.fixture(params=["zookeeper", "sim"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "sim":
        return SimBackend()
    return Backend(request.getfixturevalue("zk_server").hosts)


@pytest.fixture
def client(backend: Backend) -> Iterator[zklocks.Client]:
    with backend.client() as c:
        yield c


@pytest.fixture
def make_client(backend: Backend) -> Iterator[Callable[..., zklocks.Client]]:
    made: list[zklocks.Client] = []

    def make(**options: Any) -> zklocks.Client:
        c = backend.client(**options).start()
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


@pytest.fixture
def inspector(backend: Backend) -> Iterator[Any]:
    """An independent look at the server's state."""
    view = backend.inspector()
    yield view
    backend.close_inspector(view)


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> WakeProbe:
    """Wraps the sync driver's ``execute``: a ``Wait`` is a waiter blocked on its watches;
    one that ends with a deletion event is a wake-up."""
    found = WakeProbe()
    original = driver.execute

    def counted(op: Any, session: Any, inbox: Any) -> Any:
        if not isinstance(op, Wait):
            return original(op, session, inbox)
        name = threading.current_thread().name
        found.waiting_event(name).set()
        reply = original(op, session, inbox)
        if isinstance(reply, tuple) and any(e.kind is WatchKind.DELETED for e in reply):
            with found.mutex:
                found.wakeups[name] = found.wakeups.get(name, 0) + 1
        return reply

    monkeypatch.setattr(driver, "execute", counted)
    return found
