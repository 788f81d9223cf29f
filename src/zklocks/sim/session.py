"""The model as a live server for threads: ``SimServer`` and a ``SyncCarrier`` over it.

So the sync ``zklocks.Client`` can run its whole contract without a JVM::

    server = SimServer()
    client = Client("sim", session_factory=session_factory(server))

One lock guards the model; time is real (``time.monotonic``). Every session is
connected and pinging unless a test cuts it off with ``server.disconnect(session_id)``;
the server then expires it a session timeout after it last heard from it (a reaper
thread runs while any session is cut off), and ``server.reconnect(session_id)`` brings it
back — or, past that instant, tells it the session expired. ``expire_session`` expires
one at once (what closing it from a second client does on a real server).

Like kazoo, each session delivers watch events and state changes on its own event
thread, and after an expiry fires SESSION_LOST to every watcher, reports LOST and carries
on in a fresh session.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from zklocks._core.carrying import never_sent, watch_answer
from zklocks._core.ops import Reply, Request
from zklocks._core.threads import background_thread
from zklocks._frontend.lockmaker import SessionFactory
from zklocks._frontend.options import ClientOptions
from zklocks._protocol.errors import (
    ClientClosedError,
    NodeExistsError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import Created, Exists, GetChildren, GetData, NodeData, Stat
from zklocks._vocabulary import (
    DEFAULT_SESSION_TIMEOUT,
    SessionFacts,
    SessionListener,
    SessionState,
    Watcher,
    WatchEvent,
    WatchKind,
)
from zklocks.sim.model import ClientWatches, Model

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as the server holds it (for test assertions)."""

    path: str
    data: bytes
    stat: Stat


class SimServer:
    """One in-memory ZooKeeper shared by any number of ``SimSession``s (thread-safe)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.model = Model(epoch_ms=int(time.time() * 1000 - clock() * 1000))
        self.model.now = clock()
        self.lock = threading.RLock()
        self._owners: dict[int, SimSession] = {}
        self._reaper: threading.Thread | None = None
        self._changed = threading.Condition(self.lock)

    def __repr__(self) -> str:
        return f"<SimServer {len(self.model.sessions)} sessions, {len(self.model.nodes)} nodes>"

    # -- helpers for tests ------------------------------------------------------------

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now; its ephemeral nodes go, its client is told (LOST)."""
        with self.lock:
            self.refresh()
            if not self.model.expire(session_id):
                return False
            owner = self._owner_of(session_id)
            if owner is not None and owner.connected:
                owner._expired()  # the server closes its connection; it learns at once
            self._dispatch()
            return True

    def disconnect(self, session_id: int) -> None:
        """Cut a session off: no pings, calls wait (SUSPENDED); it expires on time."""
        with self.lock:
            self.refresh()
            owner = self._owner_of(session_id)
            if owner is not None:
                owner._suspend()
            self._start_reaper()

    def reconnect(self, session_id: int) -> None:
        """Restore a cut-off session's connection (LOST + a new session if it expired)."""
        with self.lock:
            self.refresh()
            owner = self._owner_of(session_id)
            if owner is not None:
                owner._resume()
            self._dispatch()

    def children(self, path: str) -> list[str]:
        """A node's children, sorted (ZooKeeper itself answers in no order)."""
        with self.lock:
            self.refresh()
            return sorted(self.model.children_of(path))

    def node(self, path: str) -> NodeInfo | None:
        with self.lock:
            self.refresh()
            node = self.model.nodes.get(path)
            return None if node is None else NodeInfo(path, node.data, node.full_stat())

    def sweep_containers(self) -> list[str]:
        """Run the container manager once (the real one runs every minute)."""
        with self.lock:
            self.refresh()
            swept = self.model.sweep_containers()
            self._dispatch()
            return swept

    def inspector(self) -> Inspector:
        """A kazoo-like view for tests written against kazoo (``get_children`` ...)."""
        return Inspector(self)

    def session(self, **kwargs: float) -> SimSession:
        """A started session (``session_timeout``, ``connect_timeout`` in seconds)."""
        session = SimSession(
            self,
            session_timeout=kwargs.get("session_timeout", DEFAULT_SESSION_TIMEOUT),
            connect_timeout=kwargs.get("connect_timeout", 15.0),
        )
        session.start()
        return session

    # -- internals (call with the lock held) ------------------------------------------

    def refresh(self) -> None:
        """Bring the model to now: connected sessions pinged, silent ones expired."""
        model = self.model
        model.now = self.clock()
        for session_id, owner in self._owners.items():
            if owner.connected and session_id == owner._session_id:
                model.touch(session_id)
        if model.expire_due():
            self._dispatch()

    def _dispatch(self) -> None:
        for notification in self.model.take_outbox():
            owner = self._owners.get(notification.session_id)
            if owner is not None:
                owner._deliver(notification.kind, notification.path)
        self._changed.notify_all()

    def _owner_of(self, session_id: int) -> SimSession | None:
        """The session object whose *current* session this is."""
        owner = self._owners.get(session_id)
        return owner if owner is not None and owner._session_id == session_id else None

    def _register(self, session_id: int, owner: SimSession) -> None:
        self._owners[session_id] = owner

    def _start_reaper(self) -> None:
        if self._reaper is not None and self._reaper.is_alive():
            self._changed.notify_all()
            return
        self._reaper = background_thread(self._reap, "sim-reaper")
        self._reaper.start()

    def _reap(self) -> None:
        """While a session is cut off, expire it at its instant (nobody may call then)."""
        with self.lock:
            while True:
                self.refresh()
                cut_off = [
                    self.model.expiry_due(o._session_id)
                    for o in self._owners.values()
                    if not o.connected and not o.closed
                ]
                due = [t for t in cut_off if t is not None]
                if not due:
                    self._reaper = None
                    return
                self._changed.wait(max(0.0, min(due) - self.clock()) + 0.001)


class Inspector:
    """The kazoo calls tests use to look at and poke the server, on a ``SimServer``.

    It has its own session (for its ephemeral nodes); errors are raised as
    ``zklocks._protocol.errors`` exceptions (``NoNodeError``...), not kazoo's.
    """

    def __init__(self, server: SimServer) -> None:
        self._server = server
        with server.lock:
            server.refresh()
            self._session_id = server.model.open_session(3600.0).id

    def _do(self, fn: Callable[[int], object]) -> object:
        server = self._server
        with server.lock:
            server.refresh()
            server.model.touch(self._session_id)
            reply = fn(self._session_id)
            server._dispatch()
        if isinstance(reply, ZooKeeperError):
            raise reply
        return reply

    def exists(self, path: str) -> Stat | None:
        node = self._server.node(path)
        return None if node is None else node.stat

    def get_children(self, path: str) -> list[str]:
        return cast(list[str], self._do(lambda s: self._server.model.get_children(s, path)))

    def get(self, path: str) -> tuple[bytes, Stat]:
        self._do(lambda s: self._server.model.get_data(s, path))
        node = self._server.node(path)
        assert node is not None
        return node.data, node.stat

    def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        model = self._server.model
        if makepath:
            parts = path.strip("/").split("/")[:-1]
            for i in range(len(parts)):
                parent = "/" + "/".join(parts[: i + 1])
                self._do(lambda s, p=parent: _ignore_exists(model.create(s, p)))  # type: ignore[misc]
        created = self._do(
            lambda s: model.create(s, path, value, ephemeral=ephemeral, sequential=sequence)
        )
        return cast(Created, created).path

    def delete(self, path: str) -> None:
        self._do(lambda s: self._server.model.delete(s, path))

    def stop(self) -> None:
        with self._server.lock:
            self._server.model.close_session(self._session_id)
            self._server._dispatch()


def _ignore_exists(reply: object) -> object:
    return None if isinstance(reply, NodeExistsError) else reply


class SimSession:
    """A ``SyncCarrier`` on a ``SimServer``; also has ``start()`` like ``NativeSyncCarrier``."""

    def __init__(
        self, server: SimServer, *, session_timeout: float, connect_timeout: float = 15.0
    ) -> None:
        self._server = server
        self._timeout = session_timeout
        self._connect_timeout = connect_timeout
        self._session_id = 0
        self.connected = False
        self._closed = False
        self._cut_off_at: float | None = None
        self._watches = ClientWatches()
        self._pending_watches: list[tuple[str, Watcher]] = []
        self._listeners: list[SessionListener] = []
        self._events: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.facts = SessionFacts(
            clock=server.clock,
            session_timeout=lambda: self._timeout,
            last_answered_sent=self._last_answered_sent,
            connected=lambda: self.connected,
        )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self.connected else "cut off"
        return f"<SimSession {self._session_id:#x} {state}>"

    def start(self) -> None:
        server = self._server
        with server.lock:
            server.refresh()
            self._open()
        self._thread = background_thread(self._run_events, "sim-events")
        self._thread.start()
        self._notify(SessionState.CONNECTED)

    # -- SyncCarrier ------------------------------------------------------------------

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        server = self._server
        with server.lock:
            server.refresh()
            while not self.connected and not self._closed:
                remaining = None if deadline is None else deadline - server.clock()
                if remaining is not None and remaining <= 0:
                    return never_sent(requests)
                server._changed.wait(remaining)
                server.refresh()
            if self._closed:
                return [ClientClosedError() for _ in requests]
            replies: list[Reply] = []
            for request in requests:
                watch = watcher is not None and isinstance(request, Exists | GetData | GetChildren)
                reply = server.model.apply(self._session_id, request, watch=watch)
                if watch and watcher is not None and not isinstance(reply, ZooKeeperError):
                    if isinstance(request, GetChildren):  # a child watch, as ZooKeeper's
                        self._watches.add_child(request.path, watcher)
                    else:
                        self._watches.add_data(request.path, watcher)
                replies.append(reply)
            server._dispatch()
            return replies

    def watch_node(self, path: str, watcher: Watcher) -> None:
        server = self._server
        with server.lock:
            if self._closed:
                self._post(watcher, WatchEvent(WatchKind.CLOSED, path))
                return
            server.refresh()
            if not self.connected:
                self._pending_watches.append((path, watcher))
                return
            self._set_watch(path, watcher)
            server._dispatch()

    def call_later(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        timer = threading.Timer(delay, fn)
        timer.daemon = True
        timer.start()
        return timer.cancel

    def in_background(self, work: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Runs ``work`` here, before returning: the model answers at once and never
        breaks a connection under a request, so there is nothing to leave running (a
        session cut off by a test waits for its reconnect or expiry, as every call does)."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            done.set_result(work())
        except BaseException as exc:
            done.set_exception(exc)
        return done

    def session_id(self) -> int:
        return self._session_id

    def credentials(self) -> tuple[int, bytes]:
        """Session id and password (as ``NativeSyncCarrier.credentials``)."""
        with self._server.lock:
            record = self._server.model.sessions.get(self._session_id)
            return self._session_id, b"" if record is None else record.password

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        server = self._server
        with server.lock:
            if self._closed:
                return
            self._closed = True
            self.connected = False
            server.refresh()
            server.model.close_session(self._session_id)
            for path, watcher in self._watches.drain():
                self._post(watcher, WatchEvent(WatchKind.CLOSED, path))
            server._dispatch()
        self._notify(SessionState.CLOSED)
        self._events.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # -- called by the server, with its lock held ----------------------------------------

    def _open(self) -> None:
        record = self._server.model.open_session(self._timeout)
        self._session_id = record.id
        self._server._register(record.id, self)
        self.connected = True
        self._cut_off_at = None

    def _deliver(self, kind: WatchKind, path: str) -> None:
        event = WatchEvent(kind, path)
        for watcher in self._watches.materialize(kind, path):
            self._post(watcher, event)

    def _expired(self) -> None:
        """kazoo's LOST: every watcher hears SESSION_LOST; then a fresh session."""
        for path, watcher in self._watches.drain():
            self._post(watcher, WatchEvent(WatchKind.SESSION_LOST, path))
        for path, watcher in self._pending_watches:
            self._post(watcher, WatchEvent(WatchKind.SESSION_LOST, path))
        self._pending_watches.clear()
        self._notify(SessionState.LOST)
        self._open()
        self._notify(SessionState.CONNECTED)
        self._server._changed.notify_all()

    def _suspend(self) -> None:
        if self.connected:
            self.connected = False
            self._cut_off_at = self._server.clock()
            self._notify(SessionState.SUSPENDED)

    def _resume(self) -> None:
        if self.connected or self._closed:
            return
        if not self._server.model.alive(self._session_id):
            self._expired()
            return
        self.connected = True
        self._cut_off_at = None
        for path, watcher in self._pending_watches:
            self._set_watch(path, watcher)
        self._pending_watches.clear()
        self._notify(SessionState.CONNECTED)
        self._server._changed.notify_all()

    def _set_watch(self, path: str, watcher: Watcher) -> None:
        reply = self._server.model.get_data(self._session_id, path, watch=True)
        if isinstance(reply, NodeData):
            self._watches.add_data(path, watcher)
        elif (event := watch_answer(path, reply)) is not None:
            self._post(watcher, event)
        elif isinstance(reply, SessionExpiredError):
            self._post(watcher, WatchEvent(WatchKind.SESSION_LOST, path))

    # -- event thread -----------------------------------------------------------------

    def _last_answered_sent(self) -> float | None:
        """While connected we ping all the time; cut off, the instant we were cut off."""
        if self.connected:
            return self._server.clock()
        return self._cut_off_at

    def _post(self, watcher: Watcher, event: WatchEvent) -> None:
        self._events.put(lambda: watcher(event))

    def _notify(self, state: SessionState) -> None:
        for listener in list(self._listeners):
            self._events.put(lambda listener=listener: listener(state))  # type: ignore[misc]

    def _run_events(self) -> None:
        while True:
            job = self._events.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # a callback's bug must not stop event delivery
                import traceback

                traceback.print_exc()


def session_factory(server: SimServer) -> SessionFactory[SimSession]:
    """What ``Client(hosts, session_factory=...)`` calls to make a session on ``server``."""

    def make(options: ClientOptions) -> SimSession:
        # (the hosts and the lease timing are ignored: one simulated server times its sessions)
        return SimSession(
            server,
            session_timeout=options.session_timeout,
            connect_timeout=options.connect_timeout,
        )

    return make
