"""The simulator answers as the real ZooKeeper does, on a table of small cases.

Each case runs against both sides and returns a transcript (values that do not depend on
which server answered: names, error classes, event kinds, and relations such as "czxid
grew" instead of raw zxids); the transcripts must be equal, so the model cannot drift
from the thing it models.

* ``CASES`` — raw ZooKeeper semantics: kazoo on the real server vs. ``zklocks.sim.Model``.
* ``SESSION_CASES`` — the ``SyncCarrier`` interface the drivers use: the native
  transport on the real server vs. ``SimSession``, including session expiry.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest
from kazoo.client import KazooClient

import zklocks
from helpers import Heard, expire_session
from zklocks._protocol.errors import ClientClosedError, ZooKeeperError, error_for_code
from zklocks._protocol.records import Create, Created, Exists, GetChildren
from zklocks._vocabulary import SessionState, WatchEvent
from zklocks.server import ZooKeeperServer
from zklocks.sim.model import ClientWatches, Model
from zklocks.sim.session import SimServer, session_factory

WAIT = 10.0
CONTAINER = 4  # CreateMode.CONTAINER's flag


# -- one interface over both servers -------------------------------------------------------


class Handle(Protocol):
    """One session, as the raw cases use it. Errors come back as their class name."""

    id: int

    def create(self, path: str, data: bytes = b"", **mode: bool) -> Any: ...
    def delete(self, path: str) -> Any: ...
    def exists(self, path: str, watch: bool = False) -> Any: ...
    def get_data(self, path: str, watch: bool = False) -> Any: ...
    def get_children(self, path: str, watch: bool = False) -> Any: ...
    def set_data(self, path: str, data: bytes) -> Any: ...
    def events(self, count: int) -> list[tuple[str, str, str]]: ...
    def close(self) -> None: ...


Stat = dict[str, int]


class RealHandle:
    def __init__(self, hosts: str) -> None:
        self.kz = KazooClient(hosts=hosts, timeout=10)
        self.kz.start(timeout=15)
        self.id = int(self.kz.client_id[0])
        self._events: list[tuple[str, str, str]] = []
        self._cond = threading.Condition()

    def _watcher(self, watch: bool, tag: str) -> Callable[[Any], None] | None:
        """A fresh watcher per registration (kazoo calls a watcher once per table)."""
        if not watch:
            return None

        def fired(event: Any) -> None:
            with self._cond:
                self._events.append((event.type, event.path, tag))
                self._cond.notify_all()

        return fired

    def _do(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            code = getattr(exc, "code", None)
            if isinstance(code, int):
                return type(error_for_code(code)).__name__
            raise

    def create(self, path: str, data: bytes = b"", **mode: bool) -> Any:
        if mode.get("container"):
            from kazoo.protocol.serialization import Create2
            from kazoo.security import OPEN_ACL_UNSAFE

            def make() -> Any:
                result = self.kz.handler.async_result()
                self.kz._call(Create2(path, data, OPEN_ACL_UNSAFE, CONTAINER), result)
                created, stat = result.get()
                return created, _stat(stat)

            return self._do(make)
        created = self._do(
            lambda: self.kz.create(
                path,
                data,
                ephemeral=mode.get("ephemeral", False),
                sequence=mode.get("sequential", False),
                include_data=True,
            )
        )
        return created if isinstance(created, str) else (created[0], _stat(created[1]))

    def delete(self, path: str) -> Any:
        done = self._do(lambda: self.kz.delete(path))
        return None if done is True else done

    def exists(self, path: str, watch: bool = False) -> Any:
        stat = self._do(lambda: self.kz.exists(path, watch=self._watcher(watch, "exists")))
        return None if stat is None else _stat(stat)

    def get_data(self, path: str, watch: bool = False) -> Any:
        got = self._do(lambda: self.kz.get(path, watch=self._watcher(watch, "data")))
        return got if isinstance(got, str) else (got[0], _stat(got[1]))

    def get_children(self, path: str, watch: bool = False) -> Any:
        got = self._do(lambda: self.kz.get_children(path, watch=self._watcher(watch, "child")))
        return got if isinstance(got, str) else sorted(got)

    def set_data(self, path: str, data: bytes) -> Any:
        stat = self._do(lambda: self.kz.set(path, data))
        return stat if isinstance(stat, str) else _stat(stat)

    def events(self, count: int) -> list[tuple[str, str, str]]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self._events) >= count, WAIT), self._events
            return list(self._events)

    def close(self) -> None:
        self.kz.stop()
        self.kz.close()


def _stat(stat: Any) -> Stat:
    return {
        "czxid": stat.czxid,
        "mzxid": stat.mzxid,
        "version": stat.version,
        "cversion": stat.cversion,
        "owner": stat.ephemeralOwner,
        "children": stat.numChildren,
    }


class ModelWorld:
    """The pure model with its notifications routed to handles at once."""

    def __init__(self) -> None:
        self.model = Model()
        self.handles: dict[int, ModelHandle] = {}

    def route(self) -> None:
        for note in self.model.take_outbox():
            handle = self.handles.get(note.session_id)
            if handle is not None:
                handle.watches.deliver(note)


class ModelHandle:
    def __init__(self, world: ModelWorld) -> None:
        self.world = world
        self.model = world.model
        self.id = self.model.open_session(10.0).id
        self.watches = ClientWatches()
        self._events: list[tuple[str, str, str]] = []
        world.handles[self.id] = self

    def _watcher(self, tag: str) -> Callable[[WatchEvent], None]:
        def fired(event: WatchEvent) -> None:
            self._events.append((event.kind.name, event.path, tag))

        return fired

    def _done(self, reply: Any) -> Any:
        self.world.route()
        return type(reply).__name__ if isinstance(reply, ZooKeeperError) else reply

    def create(self, path: str, data: bytes = b"", **mode: bool) -> Any:
        reply = self._done(self.model.create(self.id, path, data, **mode))
        return reply if isinstance(reply, str) else (reply.path, self._stat(reply.path))

    def _stat(self, path: str) -> Stat:
        full = self.model.nodes[path].full_stat()
        return {
            "czxid": full.czxid,
            "mzxid": full.mzxid,
            "version": full.version,
            "cversion": full.cversion,
            "owner": full.ephemeral_owner,
            "children": full.num_children,
        }

    def delete(self, path: str) -> Any:
        return self._done(self.model.delete(self.id, path))

    def exists(self, path: str, watch: bool = False) -> Any:
        reply = self._done(self.model.exists(self.id, path, watch=watch))
        if reply is None or isinstance(reply, str):
            if reply is None and watch:
                self.watches.add_data(path, self._watcher("exists"))
            return reply
        if watch:
            self.watches.add_data(path, self._watcher("exists"))
        return self._stat(path)

    def get_data(self, path: str, watch: bool = False) -> Any:
        reply = self._done(self.model.get_data(self.id, path, watch=watch))
        if isinstance(reply, str):
            return reply
        if watch:
            self.watches.add_data(path, self._watcher("data"))
        return reply.data, self._stat(path)

    def get_children(self, path: str, watch: bool = False) -> Any:
        reply = self._done(self.model.get_children(self.id, path, watch=watch))
        if isinstance(reply, str):
            return reply
        if watch:
            self.watches.add_child(path, self._watcher("child"))
        return sorted(reply)

    def set_data(self, path: str, data: bytes) -> Any:
        reply = self._done(self.model.set_data(self.id, path, data))
        return reply if isinstance(reply, str) else self._stat(path)

    def events(self, count: int) -> list[tuple[str, str, str]]:
        assert len(self._events) >= count, self._events
        return list(self._events)

    def close(self) -> None:
        self.model.close_session(self.id)
        self.world.route()


# -- the cases -----------------------------------------------------------------------------

Open = Callable[[], Handle]
Case = Callable[[Open, str], list[Any]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def names(created: Any) -> Any:
    return created if isinstance(created, str) else created[0]


@case
def sequential_names_count_every_child_created(open_: Open, base: str) -> list[Any]:
    a = open_()
    out = [names(a.create(f"{base}/n-", sequential=True))]
    out.append(names(a.create(f"{base}/n-", ephemeral=True, sequential=True)))
    out.append(names(a.create(f"{base}/plain")))
    out.append(a.delete(f"{base}/plain"))
    out.append(names(a.create(f"{base}/n-", sequential=True)))
    out.append(a.get_children(base))
    stat = a.exists(base)
    out.append((stat["cversion"], stat["children"]))
    return out


@case
def reported_cversion_counts_creates_and_deletes(open_: Open, base: str) -> list[Any]:
    a = open_()
    out = []
    for step in range(3):
        out.append(names(a.create(f"{base}/n-", sequential=True)))
        out.append(a.delete(out[-1].replace("<base>", base)))
        stat = a.exists(base)
        out.append((step, stat["cversion"], stat["children"]))
    a.create(f"{base}/keep")
    stat = a.exists(base)
    return [*out, (stat["cversion"], stat["children"])]


@case
def errors_as_the_server_returns_them(open_: Open, base: str) -> list[Any]:
    a = open_()
    a.create(f"{base}/e", ephemeral=True)
    a.create(f"{base}/full")
    a.create(f"{base}/full/child")
    return [
        a.create(f"{base}/missing/child"),
        a.delete(f"{base}/nope"),
        a.create(f"{base}/full"),
        a.delete(f"{base}/full"),
        a.create(f"{base}/e/child"),
        a.create(f"{base}/e/child-", sequential=True),
        a.create(f"{base}/e"),  # exists is checked before the ephemeral parent
        a.get_data(f"{base}/nope"),
        a.get_children(f"{base}/nope"),
        a.exists(f"{base}/nope"),
        a.set_data(f"{base}/nope", b"x"),
    ]


@case
def stats_and_owners(open_: Open, base: str) -> list[Any]:
    a = open_()
    _, first = a.create(f"{base}/a", b"1")
    _, second = a.create(f"{base}/b", ephemeral=True)
    _, container = a.create(f"{base}/c", container=True)
    changed = a.set_data(f"{base}/a", b"22")
    data, read = a.get_data(f"{base}/a")
    return [
        first["czxid"] < second["czxid"] < container["czxid"],
        first["mzxid"] == first["czxid"],
        (first["owner"], second["owner"] == a.id, container["owner"]),
        (changed["version"], changed["mzxid"] > first["czxid"], data, read == changed),
        names(a.create(f"{base}/c/child", ephemeral=True)),  # containers take children
    ]


@case
def exists_watch_on_a_missing_node_fires_on_create(open_: Open, base: str) -> list[Any]:
    a, b = open_(), open_()
    out = [a.exists(f"{base}/x", watch=True)]
    b.create(f"{base}/x")
    return [*out, a.events(1)]


@case
def deletion_fires_data_exists_and_child_watches_once(open_: Open, base: str) -> list[Any]:
    a, b = open_(), open_()
    b.create(f"{base}/x")
    b.create(f"{base}/y")
    a.get_data(f"{base}/x", watch=True)
    a.get_children(f"{base}/x", watch=True)
    a.exists(f"{base}/y", watch=True)
    a.get_children(base, watch=True)
    b.delete(f"{base}/x")
    b.delete(f"{base}/y")
    return a.events(4)  # x: one event, to its data and its child watcher


@case
def child_watches_fire_on_child_create_and_delete(open_: Open, base: str) -> list[Any]:
    a, b = open_(), open_()
    a.get_children(base, watch=True)
    b.create(f"{base}/kid", ephemeral=True)
    a.events(1)
    a.get_children(base, watch=True)
    b.delete(f"{base}/kid")
    return a.events(2)


@case
def watches_are_one_shot(open_: Open, base: str) -> list[Any]:
    a, b = open_(), open_()
    b.create(f"{base}/x")
    a.get_data(f"{base}/x", watch=True)
    b.set_data(f"{base}/x", b"1")
    b.set_data(f"{base}/x", b"2")  # no watch left: no event
    # a barrier: events reach a session in order, so once this one is in, a second
    # CHANGED would have been too
    a.exists(f"{base}/barrier", watch=True)
    b.create(f"{base}/barrier")
    return a.events(2)


@case
def ephemerals_go_with_their_closed_session(open_: Open, base: str) -> list[Any]:
    a, b = open_(), open_()
    a.create(f"{base}/e", ephemeral=True)
    a.create(f"{base}/s-", ephemeral=True, sequential=True)
    b.exists(f"{base}/e", watch=True)
    a.close()
    return [b.events(1), b.exists(f"{base}/e"), b.get_children(base)]


# -- running the raw cases on both sides --------------------------------------------------


_paths = itertools.count()


def run_real(hosts: str, fn: Case) -> list[Any]:
    handles: list[RealHandle] = []

    def open_() -> Handle:
        handles.append(RealHandle(hosts))
        return handles[-1]

    base = f"/conformance/{uuid.uuid4().hex}-{next(_paths)}"
    try:
        setup = open_()
        setup.kz.ensure_path(base)
        return _normalise(fn(open_, base), base)
    finally:
        for handle in handles:
            handle.close()


def run_model(fn: Case) -> list[Any]:
    world = ModelWorld()

    def open_() -> Handle:
        return ModelHandle(world)

    base = "/conformance/case"
    setup = ModelHandle(world)
    setup.create("/conformance")
    setup.create(base)
    return _normalise(fn(open_, base), base)


def _normalise(value: Any, base: str) -> Any:
    if isinstance(value, str):
        return value.replace(base, "<base>")
    if isinstance(value, list | tuple):
        return type(value)(_normalise(v, base) for v in value)
    return value


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_model_answers_as_zookeeper_does(name: str, zk_server: ZooKeeperServer) -> None:
    real = run_real(zk_server.hosts, CASES[name])
    model = run_model(CASES[name])
    assert model == real


def test_the_table_checks_what_it_claims() -> None:
    """The model's own answers, spelled out (so equality above is not equality of junk)."""
    assert run_model(CASES["sequential_names_count_every_child_created"]) == [
        "<base>/n-0000000000",
        "<base>/n-0000000001",
        "<base>/plain",
        None,
        "<base>/n-0000000003",  # the delete did not move the sequence counter
        ["n-0000000000", "n-0000000001", "n-0000000003"],
        (5, 3),  # but the reported cversion counts it: 2 * 4 creates - 3 children
    ]
    assert run_model(CASES["errors_as_the_server_returns_them"]) == [
        "NoNodeError",
        "NoNodeError",
        "NodeExistsError",
        "NotEmptyError",
        "NoChildrenForEphemeralsError",
        "NoChildrenForEphemeralsError",
        "NodeExistsError",
        "NoNodeError",
        "NoNodeError",
        None,
        "NoNodeError",
    ]
    assert run_model(CASES["watches_are_one_shot"]) == [
        ("CHANGED", "<base>/x", "data"),
        ("CREATED", "<base>/barrier", "exists"),
    ]
    assert run_model(CASES["deletion_fires_data_exists_and_child_watches_once"]) == [
        ("DELETED", "<base>/x", "data"),
        ("DELETED", "<base>/x", "child"),
        ("CHILD", "<base>", "child"),
        ("DELETED", "<base>/y", "exists"),
    ]
    stats = run_model(CASES["stats_and_owners"])
    assert stats[:3] == [True, True, (0, True, 0)]


# -- the SyncCarrier interface: native transport vs SimSession ------------------------------


class Side(Protocol):
    def client(self) -> zklocks.Client: ...
    def expire(self, client: zklocks.Client) -> None: ...


SessionCase = Callable[[Side, str], list[Any]]
SESSION_CASES: dict[str, SessionCase] = {}


def session_case(fn: SessionCase) -> SessionCase:
    SESSION_CASES[fn.__name__] = fn
    return fn


def _session(client: zklocks.Client) -> Any:
    return client._session_or_raise()


@session_case
def pipelined_create_and_listing(side: Side, base: str) -> list[Any]:
    session = _session(side.client())
    created, listing = session.call(
        [Create(f"{base}/lock-", b"d", ephemeral=True, sequential=True), GetChildren(base)],
        None,
    )
    assert isinstance(created, Created)
    return [created.path, created.stat.ephemeral_owner == session.session_id(), listing]


@session_case
def watch_node_and_exists_watchers_hear_deletion(side: Side, base: str) -> list[Any]:
    owner, watcher = _session(side.client()), _session(side.client())
    owner.call([Create(f"{base}/n", ephemeral=True)], None)
    events = Heard()
    watcher.watch_node(f"{base}/missing", events)
    (stat,) = watcher.call([Exists(f"{base}/n")], None, events)
    out = [stat is not None]
    owner.call([Create(f"{base}/other", ephemeral=True)], None)  # no event for others
    owner.close()
    seen = events.wait_for(lambda seen: len(seen) >= 2)
    return [*out, sorted((e.kind.name, e.path) for e in seen)]


@session_case
def expiry_removes_nodes_and_reports_lost(side: Side, base: str) -> list[Any]:
    client, other = side.client(), side.client()
    session, watcher = _session(client), _session(other)
    states, events = Heard(), Heard()
    session.add_state_listener(states)
    old = session.session_id()
    session.call([Create(f"{base}/e", ephemeral=True)], None)
    session.call([Exists(f"{base}/elsewhere")], None, events)
    gone = Heard()
    watcher.call([Exists(f"{base}/e")], None, gone)
    side.expire(client)
    deleted = gone.wait_for(lambda seen: len(seen) >= 1)
    states.wait_for(lambda seen: SessionState.LOST in seen)
    lost = events.wait_for(lambda seen: len(seen) >= 1)
    return [
        [(e.kind.name, e.path) for e in deleted],
        [(e.kind.name, e.path) for e in lost],
        watcher.call([Exists(f"{base}/e")], None),
        SessionState.LOST in states.seen,
        session.session_id() != old,
    ]


@session_case
def a_closed_session_refuses_calls(side: Side, base: str) -> list[Any]:
    session = _session(side.client())
    session.close()
    (reply,) = session.call([GetChildren(base)], None)
    return [isinstance(reply, ClientClosedError), session.closed]


class RealSide:
    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.made: list[zklocks.Client] = []

    def client(self) -> zklocks.Client:
        self.made.append(zklocks.Client(self.hosts).start())
        return self.made[-1]

    def expire(self, client: zklocks.Client) -> None:
        expire_session(client, self.hosts)


class SimSide:
    def __init__(self) -> None:
        self.server = SimServer()
        self.made: list[zklocks.Client] = []

    def client(self) -> zklocks.Client:
        factory = session_factory(self.server)
        self.made.append(zklocks.Client("sim", session_factory=factory).start())
        return self.made[-1]

    def expire(self, client: zklocks.Client) -> None:
        assert self.server.expire_session(_session(client).session_id())


@pytest.fixture
def sides(zk_server: ZooKeeperServer) -> Iterator[tuple[RealSide, SimSide]]:
    real, sim = RealSide(zk_server.hosts), SimSide()
    yield real, sim
    for client in real.made + sim.made:
        client.stop()


@pytest.mark.parametrize("name", sorted(SESSION_CASES))
def test_sim_sessions_answer_as_native_sessions_do(
    name: str, sides: tuple[RealSide, SimSide]
) -> None:
    real_side, sim_side = sides
    base = f"/conformance/{uuid.uuid4().hex}"
    setup = real_side.client()
    _session(setup).call(
        [Create("/conformance", ephemeral=False), Create(base, ephemeral=False)], None
    )
    sim_setup = sim_side.client()
    _session(sim_setup).call(
        [Create("/conformance", ephemeral=False), Create(base, ephemeral=False)], None
    )
    real = _normalise(SESSION_CASES[name](real_side, base), base)
    sim = _normalise(SESSION_CASES[name](sim_side, base), base)
    assert sim == real
    assert real  # a transcript, not nothing
