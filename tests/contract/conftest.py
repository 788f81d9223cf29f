"""The contract suite's fixtures: where a case runs (a backend), its clients, and a
wake-up probe.

Every client's session is tapped (``helpers.TappedSession``, passed in as its
``session_factory``), so a probe hears the watches a flow sets and the deletions that
wake it, on ZooKeeper and on the simulator alike, without patching the drivers."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from contract_support import WakeProbe

import zklocks
from helpers import (
    AsyncTappedSession,
    SessionTap,
    TappedSession,
    close_session,
    expire_session,
    native_async_sessions,
    native_sessions,
    tapped_factory,
)
from zklocks._vocabulary import WatchEvent, WatchKind
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
        self.tap = SessionTap()  # hears every session of this backend's clients

    def sessions(self) -> Callable[..., Any]:
        """The session factory the clients run on, before the tap."""
        return native_sessions()

    def client(self, **options: Any) -> zklocks.Client:
        """A client, not started."""
        factory = tapped_factory(self.sessions(), self.tap, TappedSession)
        return zklocks.Client(self.hosts, session_factory=factory, **options)

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

    def sessions(self) -> Callable[..., Any]:
        from zklocks.sim import session_factory

        return session_factory(self.server)

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
        self.hosts = hosts
        self.tap = SessionTap()
        # what wraps each session: a case that steps into every round trip sets its own
        self.session_class: type[AsyncTappedSession] = AsyncTappedSession

    def sessions(self) -> Callable[..., Any]:
        """The session factory the clients run on, before the tap."""
        return native_async_sessions()

    def client(self, **options: Any) -> zklocks.AsyncClient:
        """A client, not started."""
        factory = tapped_factory(self.sessions(), self.tap, self.session_class)
        return zklocks.AsyncClient(self.hosts, session_factory=factory, **options)

    def expire(self, client: zklocks.AsyncClient) -> None:
        """End the client's session from outside (blocking: its loop stands still)."""
        session: Any = client._session_or_raise()
        close_session(self.hosts, *session.credentials())


class AsyncSimBackend(AsyncBackend):
    name = "sim"

    def __init__(self) -> None:
        from zklocks.sim import SimServer

        super().__init__("sim:contract")
        self.server = SimServer()

    def sessions(self) -> Callable[..., Any]:
        from zklocks.sim import async_session_factory

        return async_session_factory(self.server)

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
def probe(backend: Backend) -> WakeProbe:
    """Hears the backend's sessions: a thread whose watches are set on nodes that exist
    is a waiter blocked on them; a deletion they fire is its wake-up."""
    found = WakeProbe()

    def watching(thread: str) -> None:
        found.waiting_event(thread).set()

    def fired(thread: str, event: WatchEvent) -> None:
        if event.kind is WatchKind.DELETED:
            with found.mutex:
                found.wakeups[thread] = found.wakeups.get(thread, 0) + 1

    backend.tap.watching.append(watching)
    backend.tap.fired.append(fired)
    return found
