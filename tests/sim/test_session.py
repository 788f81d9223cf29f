"""``SimServer`` / ``SimSession``: the model as a live, thread-safe server, and the sync
``Client`` running on it through ``session_factory``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

import zklocks
from zklocks._core import flow as _flow
from zklocks._core import nodes as _nodes
from zklocks._core.kinds import LOCK
from zklocks._core.ops import TIMED_OUT
from zklocks._protocol.errors import ClientClosedError, NoNodeError
from zklocks._protocol.records import Create, Created, Exists, GetChildren, Stat
from zklocks._sync import driver
from zklocks._vocabulary import SessionState, WatchEvent, WatchKind
from zklocks.sim.session import SimServer, SimSession, session_factory

MakeClient = Callable[..., zklocks.Client]
WAIT = 10.0  # generous bound for an event that must come; never a sleep


@pytest.fixture
def server() -> SimServer:
    return SimServer()


@pytest.fixture
def sessions(server: SimServer) -> Iterator[list[SimSession]]:
    made: list[SimSession] = []
    yield made
    for session in made:
        session.close()


def open_session(server: SimServer, made: list[SimSession], timeout: float = 10.0) -> SimSession:
    session = server.session(session_timeout=timeout)
    made.append(session)
    return session


class Events:
    """Collects watch events or states and lets a test wait for the next one."""

    def __init__(self) -> None:
        self.seen: list[object] = []
        self._cond = threading.Condition()

    def __call__(self, item: object) -> None:
        with self._cond:
            self.seen.append(item)
            self._cond.notify_all()

    def wait_for(self, count: int) -> list[object]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.seen) >= count, WAIT), self.seen
            return list(self.seen)


def spec(path: str, *, blocking: bool = True, deadline: float | None = None) -> _flow.AcquireSpec:
    return _flow.AcquireSpec(
        path=path,
        kind=LOCK,
        data=b"{}",
        attempt=_nodes.new_attempt(),
        blocking=blocking,
        deadline=deadline,
    )


def test_calls_pipeline_requests_and_answer_like_a_server(
    server: SimServer, sessions: list[SimSession]
) -> None:
    session = open_session(server, sessions)
    replies = session.call(
        [
            Create("/p", ephemeral=False, container=True),
            Create("/p/n-", ephemeral=True, sequential=True),
            GetChildren("/p"),
            GetChildren("/missing"),
        ],
        None,
    )
    assert isinstance(replies[0], Created) and replies[0].stat.ephemeral_owner == 0
    assert isinstance(replies[1], Created) and replies[1].path == "/p/n-0000000000"
    assert replies[1].stat.ephemeral_owner == session.session_id()
    assert replies[2] == ["n-0000000000"]
    assert isinstance(replies[3], NoNodeError)


def test_the_sync_driver_runs_lock_flows_on_it(
    server: SimServer, sessions: list[SimSession]
) -> None:
    first, second = open_session(server, sessions), open_session(server, sessions)
    held = driver.run(_flow.acquire(spec("/locks/a")), first)
    assert isinstance(held, _flow.Acquired)
    assert driver.run(_flow.acquire(spec("/locks/a", blocking=False)), second) is None
    waiting: list[object] = []
    waiter = threading.Thread(
        target=lambda: waiting.append(driver.run(_flow.acquire(spec("/locks/a")), second))
    )
    waiter.start()
    assert driver.run(_flow.release(held.node, held.token), first) is True
    waiter.join(WAIT)
    assert not waiter.is_alive()
    (granted,) = waiting
    assert isinstance(granted, _flow.Acquired) and granted.token > held.token
    assert server.children("/locks/a") == [granted.node.rsplit("/", 1)[1]]


def test_a_watcher_hears_deletion_and_watch_node_reports_missing_nodes(
    server: SimServer, sessions: list[SimSession]
) -> None:
    owner, watcher = open_session(server, sessions), open_session(server, sessions)
    owner.call([Create("/n", ephemeral=True)], None)
    events = Events()
    (stat,) = watcher.call([Exists("/n")], None, events)
    assert isinstance(stat, Stat)
    watcher.watch_node("/missing", events)
    owner.call([Create("/n", ephemeral=True)], None)  # NodeExists: no event
    owner.close()
    seen = events.wait_for(2)
    assert set(map(repr, seen)) == {
        repr(WatchEvent(WatchKind.DELETED, "/missing")),
        repr(WatchEvent(WatchKind.DELETED, "/n")),
    }


def test_expiry_removes_ephemerals_tells_watchers_and_starts_a_new_session(
    server: SimServer, sessions: list[SimSession]
) -> None:
    session = open_session(server, sessions)
    states, events = Events(), Events()
    session.add_state_listener(states)
    session.call([Create("/e", ephemeral=True)], None)
    session.call([Exists("/elsewhere")], None, events)
    old = session.session_id()
    assert server.expire_session(old)
    assert server.node("/e") is None
    assert events.wait_for(1) == [WatchEvent(WatchKind.SESSION_LOST, "/elsewhere")]
    assert states.wait_for(2) == [SessionState.LOST, SessionState.CONNECTED]
    assert session.session_id() != old
    (created,) = session.call([Create("/e", ephemeral=True)], None)
    assert isinstance(created, Created)
    assert created.stat.ephemeral_owner == session.session_id()
    assert not server.expire_session(old)  # already gone


def test_a_cut_off_session_times_out_calls_and_expires_on_time(
    server: SimServer, sessions: list[SimSession]
) -> None:
    cut, other = open_session(server, sessions, timeout=0.3), open_session(server, sessions)
    states, events = Events(), Events()
    cut.add_state_listener(states)
    cut.call([Create("/e", ephemeral=True)], None)
    other.call([Exists("/e")], None, events)
    server.disconnect(cut.session_id())
    assert states.wait_for(1) == [SessionState.SUSPENDED]
    assert not cut.facts.connected()
    assert cut.call([GetChildren("/")], server.clock() + 0.01) == [TIMED_OUT]
    # nobody calls the server: its reaper expires the session a timeout after the cut
    assert events.wait_for(1) == [WatchEvent(WatchKind.DELETED, "/e")]
    sent = cut.facts.last_answered_sent()
    assert sent is not None and server.clock() >= sent + 0.3
    server.reconnect(cut.session_id())
    assert states.wait_for(3)[1:] == [SessionState.LOST, SessionState.CONNECTED]


def test_a_session_back_in_time_keeps_its_nodes(
    server: SimServer, sessions: list[SimSession]
) -> None:
    session = open_session(server, sessions, timeout=30)
    states = Events()
    session.add_state_listener(states)
    session.call([Create("/e", ephemeral=True)], None)
    server.disconnect(session.session_id())
    server.reconnect(session.session_id())
    assert states.wait_for(2) == [SessionState.SUSPENDED, SessionState.CONNECTED]
    assert server.node("/e") is not None


def test_close_ends_the_session(server: SimServer, sessions: list[SimSession]) -> None:
    session = open_session(server, sessions)
    events = Events()
    session.call([Create("/e", ephemeral=True)], None)
    session.call([Exists("/e")], None, events)
    session.close()
    assert session.closed
    assert server.node("/e") is None
    assert events.wait_for(1) == [WatchEvent(WatchKind.CLOSED, "/e")]
    (reply,) = session.call([GetChildren("/")], None)
    assert isinstance(reply, ClientClosedError)


def test_the_inspector_speaks_kazoo(server: SimServer) -> None:
    inspector = server.inspector()
    assert inspector.create("/a/b/c-", b"x", sequence=True, makepath=True) == "/a/b/c-0000000000"
    assert inspector.get_children("/a/b") == ["c-0000000000"]
    data, stat = inspector.get("/a/b/c-0000000000")
    assert data == b"x" and stat.ephemeral_owner == 0
    inspector.delete("/a/b/c-0000000000")
    assert inspector.exists("/a/b/c-0000000000") is None
    with pytest.raises(NoNodeError):
        inspector.delete("/a/b/c-0000000000")
    inspector.stop()


# -- the sync Client on the simulator -------------------------------------------------------


@pytest.fixture
def make_client(server: SimServer) -> Iterator[MakeClient]:
    made: list[zklocks.Client] = []

    def make(**options: float) -> zklocks.Client:
        client = zklocks.Client("sim", session_factory=session_factory(server), **options)
        made.append(client.start())
        return client

    yield make
    for client in made:
        client.stop()


def test_client_locks_and_releases_on_the_simulator(
    server: SimServer, make_client: MakeClient
) -> None:
    a, b = make_client(), make_client()
    lock_a, lock_b = a.lock("/locks/c"), b.lock("/locks/c")
    with lock_a as lease:
        assert server.children("/locks/c") == [lease.node.rsplit("/", 1)[1]]
        assert lock_b.try_acquire() is None
        assert server.children("/locks/c") == [lease.node.rsplit("/", 1)[1]]  # no orphan
    second = lock_b.acquire(timeout=WAIT)
    assert second.token > lease.token
    lock_b.release()
    assert server.children("/locks/c") == []


def test_client_lease_is_lost_when_the_session_expires(
    server: SimServer, make_client: MakeClient
) -> None:
    client = make_client()
    lock = client.lock("/locks/e")
    lease = lock.acquire()
    server.expire_session(client._session_or_raise().session_id())
    assert lease.wait_lost(WAIT)
    assert lease.lost_reason == "the ZooKeeper session expired"
    other = make_client().lock("/locks/e").acquire(timeout=WAIT)
    assert other.token > lease.token
    lock.release()  # deletes nothing of the new holder's
    assert not other.lost


def test_client_lease_is_lost_by_the_clock_while_cut_off(
    server: SimServer, make_client: MakeClient
) -> None:
    client = make_client(session_timeout=0.3)
    lease = client.lock("/locks/f").acquire()
    server.disconnect(client._session_or_raise().session_id())
    assert lease.wait_lost(WAIT)  # the client's own timer, from when it was cut off
    assert "no answer from ZooKeeper" in (lease.lost_reason or "")


def test_client_semaphore_on_the_simulator(server: SimServer, make_client: MakeClient) -> None:
    clients = [make_client() for _ in range(3)]
    sems = [c.semaphore("/locks/s", permits=2) for c in clients]
    first, second = sems[0].acquire(), sems[1].acquire()
    assert sems[2].try_acquire() is None
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(sems[2].acquire(timeout=WAIT)))
    waiter.start()
    sems[1].release()
    waiter.join(WAIT)
    assert not waiter.is_alive() and len(got) == 1
    assert len(server.children("/locks/s")) == 2
    assert first.token < second.token
