"""Helpers shared by test folders."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableSequence, Sequence
from typing import Any, TypeVar

import pytest
from kazoo.exceptions import NoNodeError
from nemesis.proxy import Proxy

from zklocks._core.lease import Lease
from zklocks._core.ops import Wake
from zklocks._protocol.errors import ZooKeeperError
from zklocks._vocabulary import SessionFacts, Watcher, WatchEvent
from zklocks.server import ZooKeeperEnsemble, ZooKeeperServer

T = TypeVar("T")


@contextlib.contextmanager
def ctrl_c_restored() -> Iterator[None]:
    """Inside the block, SIGINT raises ``KeyboardInterrupt`` here, and a child started
    here starts with SIGINT at its default (a Python child then raises it too), whatever
    this run was started with.

    ``nohup make test &``, a script's ``&`` and some CI runners start the run with SIGINT
    ignored: Python then installs no handler, and children inherit the ``SIG_IGN``
    across exec (a handler is reset to the default by exec; "ignored" is kept). A test
    that sends SIGINT sets up the disposition it relies on with this. Main thread only.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


_IGNORING = """\
import os, signal, sys
for number in sys.argv[1].split(","):
    signal.signal(int(number), signal.SIG_IGN)
os.execv(sys.argv[2], sys.argv[2:])
"""


def ignoring(*signals: int) -> list[str]:
    """An argv prefix that starts the rest with ``signals`` ignored, as ``nohup``
    (SIGHUP), a script's ``&`` (SIGINT, SIGQUIT) or some CI runners start a command."""
    return [sys.executable, "-c", _IGNORING, ",".join(str(int(sig)) for sig in signals)]


def session_credentials(client: Any) -> tuple[int, bytes]:
    """The (session id, password) of a started ``zklocks.Client``."""
    session = client._session
    assert session is not None, "client not started"
    credentials: tuple[int, bytes] = session.credentials()
    return credentials


@contextlib.contextmanager
def frozen(client: Any) -> Iterator[None]:
    """Hold the client's connection thread still (a stalled client) inside the block."""
    loop = client._session._loop
    gate, holding = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        gate.wait(60)

    loop.call_soon_threadsafe(hold)
    assert holding.wait(10), "the client's loop did not stop"
    try:
        yield
    finally:
        gate.set()


def expire_session(client: Any, hosts: str) -> None:
    """Make the server end ``client``'s session now, as an expiry would.

    The classic trick: a second connection presents the session's id and password,
    then closes the session. The client is frozen meanwhile: it would otherwise
    reconnect within milliseconds when the server moves its session to the twin, take
    the session back, and the server would refuse the twin's close.
    """
    with frozen(client):
        close_session(hosts, *session_credentials(client))


def close_session(hosts: str, session_id: int, password: bytes) -> None:
    """Attach to a session from a raw socket and close it (one write, both frames)."""
    host, port = hosts.split(",")[0].split("/")[0].rsplit(":", 1)
    connect = struct.pack(">iqiqi", 0, 0, 10_000, session_id, len(password)) + password
    connect += b"\x00"  # readOnly = false
    close = struct.pack(">ii", 1, -11)  # xid 1, closeSession
    frames = b"".join(struct.pack(">i", len(body)) + body for body in (connect, close))
    with socket.create_connection((host, int(port)), timeout=10) as twin:
        twin.sendall(frames)
        received = b""
        while len(received) < 4 + 36 + 4 + 16:  # connect reply, then the close reply
            chunk = twin.recv(4096)
            if not chunk:
                break
            received += chunk
    _proto, timeout, granted_id = struct.unpack(">iiq", received[4:20])
    assert granted_id == session_id and timeout > 0, "the server did not re-attach the session"


# Set by the root conftest when a test's call phase failed.
CALL_FAILED = pytest.StashKey[bool]()


def show_member_logs_if_failed(request: pytest.FixtureRequest, ensemble: ZooKeeperEnsemble) -> None:
    """Print the members' warnings into the failed test's report (its teardown output):
    an ensemble's temporary directory, logs included, is gone once the fixture ends, and a
    failure seen once in CI is otherwise impossible to read afterwards."""
    if not request.node.stash.get(CALL_FAILED, False) or ensemble.data_dir is None:
        return
    for member in ensemble.members:
        log = ensemble.data_dir / f"member-{member.myid}" / "zookeeper.log"
        with contextlib.suppress(OSError):
            notable = [
                line
                for line in log.read_text(errors="replace").splitlines()
                if " WARN " in line or " ERROR " in line or "LEADING" in line
            ]
            print(f"--- member {member.myid} ({member.hosts}): last warnings of {log}")
            print("\n".join(notable[-40:]))


def watches_of(server: ZooKeeperServer, session_id: int) -> list[str]:
    """The paths the server watches for one session (the ``wchc`` four-letter word)."""
    watched: list[str] = []
    current = None
    for line in server.four_letter("wchc").splitlines():
        if line.startswith("0x"):
            current = int(line, 16)
        elif line.strip() and current == session_id:
            watched.append(line.strip())
    return watched


def wait_for_watch(
    server: ZooKeeperServer, session_id: int, path: str, limit: float = 10.0
) -> None:
    """Return once the server holds a watch of ``session_id`` on ``path``: a lease's watch
    on its own node goes out from the client's loop after ``acquire`` returned, so a test
    that counts the session's requests waits for it first."""
    deadline = time.monotonic() + limit
    while path not in watches_of(server, session_id):
        assert time.monotonic() < deadline, f"no watch on {path} after {limit} s"
        time.sleep(0.01)


def run(work: Awaitable[T], timeout: float = 60.0) -> T:
    """Run ``work`` on a new event loop and return its value; past ``timeout`` seconds the
    test fails, showing where the work was stuck, instead of hanging or raising a bare
    ``TimeoutError`` that could pass for one of the library's own."""

    async def bounded() -> T:
        task = asyncio.ensure_future(work)
        finished, _ = await asyncio.wait({task}, timeout=timeout)
        if finished:
            return task.result()
        where = io.StringIO()
        task.print_stack(file=where)
        task.cancel()  # let it clean up, for a while
        await asyncio.wait({task}, timeout=10.0)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the failure below is the news
        pytest.fail(f"not finished within {timeout} s; it was waiting at:\n{where.getvalue()}")

    return asyncio.run(bounded())


def run_scenario(scenario: Callable[[], Awaitable[None]], timeout: float = 60.0) -> None:
    """``run(scenario(), timeout)``: for the tests that define ``async def scenario()``."""
    run(scenario(), timeout)


def wait_for_children(
    kazoo: Any, path: str, count: int, *, timeout: float = 15.0, at_least: bool = False
) -> list[str]:
    """The children of ``path``, in sequence order, once there are ``count`` of them (or
    more, ``at_least``), woken by kazoo watches: a child watch on the path, or a creation
    watch while it does not exist. A missing path has no children. Fails past ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        changed = threading.Event()

        def wake(_event: Any, changed: threading.Event = changed) -> None:
            changed.set()

        try:
            names: list[str] = kazoo.get_children(path, watch=wake)
        except NoNodeError:
            names = []
            if kazoo.exists(path, watch=wake) is not None:
                continue  # created since: list it
        if len(names) == count or (at_least and len(names) > count):
            return sorted(names, key=_sequence_order)
        remaining = deadline - time.monotonic()
        assert remaining > 0 and changed.wait(remaining), (
            f"{path} has children {names}, not {'at least ' if at_least else ''}{count}, "
            f"after {timeout} s"
        )


def _sequence_order(name: str) -> tuple[int, str]:
    """A sequential node's place in its queue (its counter, as an integer; others first)."""
    suffix = name.rsplit("-", 1)[-1]
    return (int(suffix) if suffix.isdigit() else -1, name)


# Every lock kind behind one factory, so a case can run for each. ``Client`` and
# ``AsyncClient`` spell the same calls, so one table serves both; options (``max_hold=``)
# go through to the lock's maker.
KINDS: dict[str, Callable[..., Any]] = {
    "fair": lambda client, path, **options: client.lock(path, **options),
    "unfair": lambda client, path, **options: client.lock(path, fair=False, **options),
    "write": lambda client, path, **options: client.read_write_lock(path, **options).write,
    "read": lambda client, path, **options: client.read_write_lock(path, **options).read,
    "semaphore": lambda client, path, **options: client.semaphore(path, permits=1, **options),
    "election": lambda client, path, **options: client.election(path, **options),
}
EXCLUSIVE = ["fair", "unfair", "write", "semaphore", "election"]
QUEUED_EXCLUSIVE = ["fair", "write", "semaphore", "election"]


def blocker_kind(kind: str) -> str:
    """A kind that excludes ``kind`` (readers are excluded by a writer)."""
    return "write" if kind == "read" else kind


# -- a tapped session: how a test hears a lock flow wait and wake --------------------------


@dataclasses.dataclass
class SessionTap:
    """What the sessions made by ``tapped_factory`` report, for the listeners a test adds.

    ``watching(caller)``: a flow's watches are set and every watched node exists, so it
    waits now. ``fired(caller, event)``: one of those watches fired. ``caller`` is the
    name of the thread (sync) or task (asyncio) that set the watches. Only lock flows
    set watches through ``call`` (a lease watches its node with ``watch_node``), so a
    deletion heard here is a waiter's wake-up.
    """

    watching: list[Callable[[str], None]] = dataclasses.field(default_factory=list)
    fired: list[Callable[[str, WatchEvent], None]] = dataclasses.field(default_factory=list)

    def _watcher(self, caller: str, watcher: Watcher) -> Watcher:
        def heard(event: WatchEvent) -> None:
            for listener in self.fired:
                listener(caller, event)
            watcher(event)

        return heard

    def _set(self, caller: str, replies: Sequence[Any]) -> None:
        if replies and all(_found(reply) for reply in replies):
            for listener in self.watching:
                listener(caller)


def _found(reply: Any) -> bool:
    """Did a watch-setting request find its node (so that its watch is set)?"""
    return reply is not None and not isinstance(reply, ZooKeeperError | Wake)


class TappedSession:
    """A session (ours or the simulator's) whose watched calls ``tap`` hears; everything
    else is the session's own."""

    def __init__(self, session: Any, tap: SessionTap) -> None:
        self._session = session
        self._tap = tap

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def call(
        self, requests: Sequence[Any], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Any]:
        if watcher is None:
            replies: list[Any] = self._session.call(requests, deadline)
            return replies
        caller = threading.current_thread().name
        replies = self._session.call(requests, deadline, self._tap._watcher(caller, watcher))
        self._tap._set(caller, replies)
        return replies


class AsyncTappedSession(TappedSession):
    """``TappedSession`` for ``AsyncClient``: the caller is the awaiting task."""

    async def call(  # type: ignore[override]
        self, requests: Sequence[Any], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Any]:
        if watcher is None:
            replies: list[Any] = await self._session.call(requests, deadline)
            return replies
        task = asyncio.current_task()
        caller = "" if task is None else task.get_name()
        replies = await self._session.call(requests, deadline, self._tap._watcher(caller, watcher))
        self._tap._set(caller, replies)
        return replies


def tapped_factory(
    factory: Callable[..., Any], tap: SessionTap, session_class: type[TappedSession]
) -> Callable[..., Any]:
    """A ``session_factory=`` for a client whose sessions are ``factory``'s, tapped."""

    def make(*args: Any, **kwargs: Any) -> Any:
        return session_class(factory(*args, **kwargs), tap)

    return make


def native_sessions() -> Callable[..., Any]:
    """``Client``'s own session factory (no security options), to tap."""
    from zklocks._sync.native_carrier import NativeSyncCarrier

    return NativeSyncCarrier


def native_async_sessions() -> Callable[..., Any]:
    """``AsyncClient``'s own session factory (no security options), to tap."""
    from zklocks._asyncio.native_carrier import native_factory

    return native_factory()


class ManualClock:
    """A session clock the test moves by hand (``clock.now = ...``); starts at 100.0."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lease_on(clock: ManualClock | None = None, node: str = "/locks/a/lock-0000000001") -> Lease:
    """A sync lease with no connection behind it: its session was last answered at 100.0,
    with a 10 s timeout, on ``clock``."""
    facts = SessionFacts(
        clock=clock or ManualClock(),
        session_timeout=lambda: 10.0,
        last_answered_sent=lambda: 100.0,
        connected=lambda: True,
    )
    return Lease(node, 7, facts, owner=0x55)


VERSION_WARNING = "has known transaction-loss bugs"
"""The library's warning of the test servers' own release (Debian 12's 3.8.0 has known
transaction-loss bugs): CLI tests that expect a quiet stderr leave that line out."""


def versions_read(hosts: str) -> None:
    """The members' versions read as the first client would, here at a fixture's start:
    the library's once-per-member warning of the test servers' release (3.8.0 has known
    transaction-loss bugs) is then logged there, not inside a test's output or caplog."""
    from zklocks._frontend import server_check

    server_check.check(hosts, None, strict=False)


def without_version_warning(stderr: str) -> str:
    """``stderr`` without the known-issues warning's line (the servers' version is not
    what these tests look at; tests/integration/test_server_versions.py is)."""
    return "".join(line for line in stderr.splitlines(True) if VERSION_WARNING not in line)


def stderr_line_matching(stream: Any, pattern: str) -> re.Match[str] | None:
    """The first line of ``stream`` that matches ``pattern`` (the library's warnings may
    come first), None at its end."""
    for line in iter(stream.readline, ""):
        found = re.search(pattern, line)
        if found:
            return found
    return None


class HostsInOrder:
    """Stands in for ``random`` in the connection (``monkeypatch.setattr(connection,
    "random", HostsInOrder)``): hosts are tried as listed, so a test picks the member a
    client is on."""

    @staticmethod
    def shuffle(items: MutableSequence[Any]) -> None:
        pass

    uniform = staticmethod(random.uniform)


def connection_of(client: Any) -> Any:
    """The transport ``Connection`` under a started ``Client`` or ``AsyncClient``."""
    session = client._session
    return getattr(session, "_connection", None) or session.connection


P = TypeVar("P", bound=Proxy)


@contextlib.contextmanager
def threaded_proxy(
    port: int,
    make: Callable[[str, int], P] = Proxy,  # type: ignore[assignment]
) -> Iterator[tuple[P, asyncio.AbstractEventLoop]]:
    """A proxy (``make``: ``nemesis.proxy.Proxy`` or a test's subclass) to the server on
    ``port``, on a loop of its own thread, for a sync client (stall, hold or reset it
    on that loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = make("127.0.0.1", port)
    asyncio.run_coroutine_threadsafe(proxy.__aenter__(), loop).result(10)
    try:
        yield proxy, loop
    finally:
        asyncio.run_coroutine_threadsafe(proxy.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@contextlib.contextmanager
def loop_blocked(session: Any, wait: float = 20.0) -> Iterator[None]:
    """A native sync carrier's loop thread is busy (nothing of the loop's runs) inside
    the block: what completes meanwhile was done by the calling threads."""
    busy, release = threading.Event(), threading.Event()

    def occupy() -> None:
        busy.set()
        release.wait(wait)

    session._loop.call_soon_threadsafe(occupy)
    assert busy.wait(wait)
    try:
        yield
    finally:
        release.set()


def native_sync_carrier(client: Any) -> Any:
    """The native carrier under a started sync ``Client`` (its transport's tests)."""
    from zklocks._sync.native_carrier import NativeSyncCarrier

    session = client._session
    assert isinstance(session, NativeSyncCarrier)
    return session


def until(predicate: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it is true (for a state no event announces); fail after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


class Heard:
    """Thread-safe list of what a watcher or state listener was told, to wait on."""

    def __init__(self, wait: float = 10.0) -> None:
        self.seen: list[Any] = []
        self._wait = wait
        self._cond = threading.Condition()

    def __call__(self, item: Any) -> None:
        with self._cond:
            self.seen.append(item)
            self._cond.notify_all()

    def wait_for(self, test: Callable[[list[Any]], bool]) -> list[Any]:
        with self._cond:
            assert self._cond.wait_for(lambda: test(self.seen), self._wait), self.seen
            return list(self.seen)
