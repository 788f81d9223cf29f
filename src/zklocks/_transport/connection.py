"""The asyncio connection that runs the sans-IO session (``zklocks._protocol.session``).

Theory of operation
-------------------
One ``Connection`` keeps one ZooKeeper session alive over successive TCP (or TLS)
connections. The protocol core decides what bytes mean; this module owns everything
that needs a clock, a socket or a callback:

* **Pipelining.** ``submit()`` encodes the request and writes it at once; the future is
  resolved when its reply arrives (ZooKeeper answers in order). It must be called on the
  loop's thread.
* **Other threads.** ``submit_from_thread()`` lets a blocking caller write its own
  requests (no hand-off to the loop per call) while the loop thread goes on reading
  every reply: on an established plain-TCP connection with nothing queued or buffered
  ahead, else it declines and the caller uses the loop. Every write and every change
  to the session's in-flight FIFO holds ``_send_lock``, so the wire's order is the
  FIFO's. One caller writes at a time, outside the lock; callers (and the loop) that
  come meanwhile append to an outbox it sends next. Callers write to a duplicate of
  the socket, closed under that lock before the transport's own (by the writing
  caller, when one is in its send), so no thread writes to a reused descriptor number.
* **Liveness.** Once connected, a ping goes out whenever nothing was sent for a third of
  the negotiated session timeout; if nothing at all is *received* for two thirds of it,
  the connection is declared dead and dropped (a silent peer or a stalled network looks
  exactly like that). One timer handles both; it is not re-armed per packet.
* **States.** ``CONNECTING`` (before the first session) -> ``CONNECTED`` ->
  ``SUSPENDED`` (connection lost, session maybe alive) -> ``CONNECTED`` (same session)
  or ``LOST`` (the session expired) -> ``CONNECTED`` (a new session). ``CLOSED`` is
  final. Listeners hear every transition, on the loop thread.
* **Reconnecting.** On a drop, every request in flight fails with
  ``ConnectionLossError`` (the server may or may not have applied it; the caller
  decides); requests submitted meanwhile wait in a queue. Hosts are tried in turn
  (shuffled once at start), starting with the one after the host that failed, each
  attempt bounded by ``connect_timeout`` and by a share of the time left, so a member
  that accepts TCP and never answers cannot use it all. A connection that died young
  is followed by a capped, jittered, doubling backoff (a broken server must not cost a
  reconnect per round trip). On the new connection the session is resumed
  with its id, password and last zxid; then (with ``sasl=``) the SASL exchange runs to
  completion, auth is re-sent and every watch restored with setWatches before the queue
  is flushed. A SASL login the server refuses, or a server that requires one we do not
  make (``enforce.auth.enabled``), ends the connection for good: retrying cannot help.
* **Expiry.** The session is LOST when a server says so during the handshake, or when
  a full session timeout has passed since the last answered request was sent without a
  connection coming back (the server must have expired it by then: it cannot have heard
  from us later than we sent). Every watcher is then called once with
  ``WatchEvent(SESSION_LOST, path)``, queued requests fail with ``SessionExpiredError``,
  and a new session is established; requests submitted from then on use it.
* **Lease time.** ``last_answered_sent`` is the ``time.monotonic()`` at which the most
  recently answered request (pings and the handshake included) was sent: the server
  heard from us no earlier than that, so the session lives at least until that instant
  plus the session timeout — on a standalone server. A lease counts from ``lease_sent``
  instead, which the lease rule (``lease_rule.py``) keeps: every margin taken off, and on
  an ensemble only what the leader has surely counted. On an ensemble the connection
  also sends a renewing ``sync`` every ``renew_interval`` to keep that proof fresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import ssl as _ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from zklocks._core import events as _events
from zklocks._core import security as _security
from zklocks._core.ops import Created, NodeData
from zklocks._protocol import codec
from zklocks._protocol.constants import DEFAULT_MAX_BUFFER, AddWatchMode, EventType
from zklocks._protocol.errors import (
    AuthFailedError,
    ClientClosedError,
    ConnectionFailedError,
    ConnectionLossError,
    MarshallingError,
    SessionClosedRequireSaslAuthError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import (
    ACL,
    OPEN_ACL_UNSAFE,
    AddWatch,
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    GetSASLRequest,
    Multi,
    MultiOp,
    SetData,
    SetSASLResponse,
    Stat,
    Sync,
)
from zklocks._protocol.session import (
    Established,
    Expired,
    Notification,
    ReceiveError,
    Reply,
    Session,
)
from zklocks._transport import diagnose as _diagnose
from zklocks._transport import forks as _forks
from zklocks._transport import lease_rule as _lease_rule
from zklocks._transport.sasl import SASL, SaslFailed
from zklocks._transport.server_conf import learn_timing
from zklocks._vocabulary import SessionState, StateListener, Watcher, WatchEvent, WatchKind

__all__ = ["Connection"]

# the wire's event types in the shared vocabulary (a session end is told separately)
_KINDS: dict[int, WatchKind] = {
    EventType.CREATED.value: WatchKind.CREATED,
    EventType.DELETED.value: WatchKind.DELETED,
    EventType.CHANGED.value: WatchKind.CHANGED,
    EventType.CHILD.value: WatchKind.CHILD,
}
_ENDS = {SessionState.LOST: WatchKind.SESSION_LOST, SessionState.CLOSED: WatchKind.CLOSED}

log = logging.getLogger("zklocks.connection")

# how a refused SASL step is named to people (ZooKeeper's own code names)
_REFUSALS: dict[type[BaseException], str] = {
    AuthFailedError: "AUTH_FAILED",
    SessionClosedRequireSaslAuthError: "SESSION_CLOSED_REQUIRE_SASL_AUTH",
}
_CLOSE_REPLY_TIMEOUT = 2.0  # how long close() waits for the closeSession answer
_BACKOFF_MIN = 0.02
_BACKOFF_MAX = 1.0
_LEARN_TIMING_TIMEOUT = 1.0  # at most this of start() asking the server for tickTime


class _Wire(asyncio.Protocol):
    """One TCP/TLS connection; hands every byte to its ``Connection``."""

    def __init__(self, owner: Connection, loop: asyncio.AbstractEventLoop) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.handshake: asyncio.Future[Established | Expired] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.foreign: bytes | None = None  # what a peer that is not ZooKeeper sent
        self.error: Exception | None = None  # why it ended, when the transport said

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.owner._data_received(self, data)

    def eof_received(self) -> bool:
        return False  # the server hung up: close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._stop_direct(self)
        self.error = exc
        if not self.handshake.done():
            self.handshake.set_exception(ConnectionLossError("connection closed in handshake"))
            self.handshake.exception()  # retrieved: nobody may be waiting any more
        if not self.lost.done():
            self.lost.set_result(None)

    def abort(self) -> None:
        self.owner._stop_direct(self)
        if self.transport is not None:
            self.transport.abort()


async def _speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` answers a TLS ClientHello with TLS (its certificate unchecked:
    only the protocol is asked). A TLS-only ZooKeeper port hangs up on a plaintext
    handshake without a byte, exactly as a member without quorum does; this tells them
    apart."""
    context = _ssl.SSLContext(_ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = _ssl.CERT_NONE
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context), timeout
        )
    except _ssl.SSLError as exc:
        # an alert is TLS too (a server that wants a client certificate, say)
        return not isinstance(exc, _ssl.SSLEOFError | _ssl.SSLZeroReturnError) and (
            "WRONG_VERSION_NUMBER" not in str(exc).upper()
        )
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return True


class Connection:
    """A ZooKeeper session kept alive over reconnects, on one asyncio event loop."""

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: float = 10.0,
        ssl: _ssl.SSLContext | None = None,
        auth: Sequence[tuple[str, bytes]] = (),
        sasl: SASL | None = None,
        connect_timeout: float | None = None,
        randomize_hosts: bool = True,
        max_request_size: int = DEFAULT_MAX_BUFFER,
        tick_time: float | None = None,
        clock_drift: float = _lease_rule.DEFAULT_CLOCK_DRIFT,
    ) -> None:
        addresses, chroot = codec.parse_hosts(hosts)
        if randomize_hosts:
            random.shuffle(addresses)
        self._addresses = addresses
        self._ssl = ssl
        self._sasl = sasl
        self._connect_timeout = connect_timeout
        self._session = Session(
            timeout_ms=int(session_timeout * 1000),
            chroot=chroot,
            auth=auth,
            max_request_size=max_request_size,
        )
        self._state = SessionState.CONNECTING
        self._listeners: list[StateListener] = []
        self._queue: deque[tuple[object, asyncio.Future[Any], Watcher | None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wire: _Wire | None = None  # the established connection, if any
        self._attempt: _Wire | None = None  # the connection being set up, if any
        self._abandoned: set[_Wire] = set()  # aborted attempts whose sockets are closing
        self._transport: asyncio.Transport | None = None
        self._host_index = 0
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._closing = False
        self._closed_event: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_recv = 0.0
        self._last_send = 0.0
        self._ping_interval = session_timeout / 3
        self._read_timeout = session_timeout * 2 / 3
        self._closer: asyncio.Task[None] | None = None
        self.last_answered_sent: float | None = None
        self.last_host: str | None = None
        self._failures: dict[str, str] = {}  # host -> why it first failed (this outage)
        self._reported: set[tuple[str, str]] = set()  # (host, kind of failure) logged
        self._refusals: set[str] = set()  # hosts that refused us (TLS), this outage
        self._tls_ports: dict[str, bool] = {}  # host -> answers TLS (asked once, at start)
        # The lease rule (see ``lease_sent``). Until start() has learnt whether the server
        # is one of an ensemble, and its tickTime, assume the worst ZooKeeper allows.
        self._clock_drift = clock_drift
        self._timing = (
            None if tick_time is None else _lease_rule.Timing(tick_time, "tick_time option")
        )
        self._rule: _lease_rule.LeaseRule = _lease_rule.for_ensemble(
            session_timeout,
            clock_drift,
            self._timing or _lease_rule.assumed_timing(session_timeout),
        )
        self._last_renewal = 0.0  # when the last renewing sync was sent
        self._address: tuple[str, int] | None = None  # the member of the last handshake
        self._reconnect_backoff = _BACKOFF_MIN
        self._connected_at = 0.0
        self.ensemble: bool | None = None  # None: not known (yet)
        self.chroot_exists: bool | None = None  # None: no chroot, or not known
        # Sending from callers' threads (``submit_from_thread``): every write and every
        # change to the session's round (requests numbered, in flight, disconnected)
        # happens under this lock, so the wire order is the order of the in-flight FIFO.
        self._send_lock = threading.RLock()
        self.thread_writes = False  # set by a blocking front end before start()
        self._direct: socket.socket | None = None  # a dup of the live plain-TCP socket
        self._direct_wire: _Wire | None = None
        # The rest of a caller's partial write: the loop writes it before anything else.
        self._rest: bytes | None = None
        # Frames made while another caller is writing: that writer sends them too, in
        # order, so callers never wait on each other's send syscall.
        self._outbox: list[bytes] = []
        self._writing = False  # a caller is sending to ``_direct`` outside the lock
        self._retired: list[socket.socket] = []  # stopped while written to: close later

    # ------------------------------------------------------------ public state

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:
        return self._session.session_id

    @property
    def session_timeout(self) -> float:
        """The negotiated session timeout in seconds (the requested one before that)."""
        ms = self._session.timeout_ms or self._session.requested_timeout_ms
        return ms / 1000

    @property
    def session_password(self) -> bytes:
        return self._session.passwd

    @property
    def chroot(self) -> str:
        return self._session.chroot

    @property
    def lease_rule(self) -> _lease_rule.LeaseRule:
        """The rule that keeps ``lease_sent`` (``Standalone`` or, on an ensemble, a chain)."""
        return self._rule

    @property
    def timing(self) -> _lease_rule.Timing | None:
        """The servers' tickTime as given or learnt (``timing.assumed``: neither); None on
        a standalone server."""
        if not self.ensemble:
            return None
        rule = self._rule
        return rule.timing if isinstance(rule, _lease_rule.SyncChain) else self._timing

    @property
    def lease_lagging(self) -> bool:
        """Can the lease run out while connected (an ensemble)? Then a timer watches it."""
        return self._rule.lagging

    @property
    def lease_sent(self) -> float | None:
        """The instant from which the session timeout surely counts, margins taken off.

        On a standalone server that is ``last_answered_sent`` less the clock-drift
        margin. On an ensemble only the leader times sessions, and a member cut off from
        it goes on answering (a follower relays our touches only in its replies to the
        leader's pings): only a chain of syncs proves what the leader counted. See
        ``lease_rule.py`` and docs/locks.md, "What lost means".
        """
        return self._rule.lease_sent()

    @property
    def hosts(self) -> list[str]:
        """``host:port`` of every server, in the order they are tried."""
        return [f"{host}:{port}" for host, port in self._addresses]

    def add_state_listener(self, fn: StateListener) -> Callable[[], None]:
        """Call ``fn(state)`` on every state change (on the loop thread); returns a remover."""
        self._listeners.append(fn)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(fn)

        return remove

    # ------------------------------------------------------------ lifecycle

    async def start(self, timeout: float | None = None) -> None:
        """Connect and establish a session; ``timeout`` defaults to the session timeout.

        Raises ``ConnectionFailedError`` naming every host tried when none answered in time.
        """
        if self._task is not None or self._state is SessionState.CLOSED:
            raise RuntimeError("a Connection can be started once")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._closed_event = asyncio.Event()
        limit = self.session_timeout if timeout is None else timeout
        self._started = loop.create_future()
        self._task = loop.create_task(self._supervise(time.monotonic() + limit))
        try:
            await asyncio.shield(self._started)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """End the session (the server removes our ephemeral nodes now) and release all.

        Idempotent. Waits up to two seconds for the server to confirm the closeSession.
        """
        if self._closing:
            if self._closed_event is not None:
                await self._closed_event.wait()
            return
        self._closing = True
        wire = self._wire
        if wire is not None and self._session.connected:
            closing = self._loop_or_running().create_future()
            try:
                with self._send_lock:
                    self._write(self._session.close_session((closing, time.monotonic())))
                await asyncio.wait_for(asyncio.shield(closing), _CLOSE_REPLY_TIMEOUT)
            except (ZooKeeperError, asyncio.TimeoutError, OSError) as exc:
                log.debug("closeSession not confirmed: %r", exc)
        # Hang up before and after waiting for the supervisor: on Python 3.11 a cancel
        # that lands as a handshake completes can be swallowed by ``wait_for``, and the
        # supervisor then waits for that new connection to end; it sees ``_closing``
        # and returns once it does.
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        for w in (self._wire, self._attempt):
            if w is not None:
                await self._hang_up(w)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for w in (self._wire, self._attempt):
            if w is not None:
                await self._hang_up(w)
        if self._abandoned:
            await asyncio.wait([w.lost for w in self._abandoned], timeout=1.0)
        self._wire = self._attempt = None
        self._transport = None
        self._cancel_timer()
        error = ClientClosedError("the connection was closed")
        with self._send_lock:
            in_flight = self._session.disconnect()
        self._fail(in_flight, error)
        self._fail_queue(error)
        watchers = self._session.watches.drain()
        self._set_state(SessionState.CLOSED)
        self._notify_all(watchers, SessionState.CLOSED)
        if self._started is not None and not self._started.done():
            self._started.set_exception(ClientClosedError("closed before a session was made"))
            self._started.exception()
        if self._closed_event is not None:
            self._closed_event.set()

    def forget_after_fork(self) -> None:
        """In a forked child, where this connection is the parent's: never write to it
        again, and let go of the child's copies of its sockets without a byte sent (see
        ``forks``). No closeSession, no listener, no lock (one held by a thread of the
        parent at the fork stays held here)."""
        self._closing = True  # anything submitted from now on fails with ClientClosedError
        self._state = SessionState.CLOSED
        sockets: list[Any] = [self._direct, *self._retired]
        for wire in (self._wire, self._attempt, *self._abandoned):
            if wire is not None and wire.transport is not None:
                sockets.append(wire.transport.get_extra_info("socket"))
        # the socket objects stay as they are (closing one later closes /dev/null)
        _forks.drop_descriptors(sock.fileno() for sock in sockets if sock is not None)

    def _loop_or_running(self) -> asyncio.AbstractEventLoop:
        return self._loop or asyncio.get_running_loop()

    async def _hang_up(self, wire: _Wire) -> None:
        transport = wire.transport
        if transport is None:
            return
        transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(wire.lost), 1.0)
        except asyncio.TimeoutError:
            transport.abort()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(wire.lost), 1.0)

    # ------------------------------------------------------------ requests

    def submit(self, request: object, *, watcher: Watcher | None = None) -> asyncio.Future[Any]:
        """Send ``request`` now (or queue it while disconnected); the future gets the reply.

        Must be called on the loop's thread. A refused request sets the typed
        ``ZooKeeperError`` as the future's exception; one in flight when the connection
        drops, ``ConnectionLossError``; any after ``close()``, ``ClientClosedError``.
        ``watcher`` sets a watch (exists/getData: data watch; getChildren: child watch;
        AddWatch: a persistent watch) and is called on the loop thread when it fires.
        """
        loop = self._loop or asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if self._closing:
            future.set_exception(ClientClosedError())
        elif self._wire is not None and not self._queue:
            self._send(request, future, watcher)
        else:
            self._queue.append((request, future, watcher))
        return future

    def submit_many(
        self, requests: Sequence[object], *, watcher: Watcher | None = None
    ) -> list[asyncio.Future[Any]]:
        """``submit`` each request, pipelined, with all their frames in *one* write.

        On loopback a ``send`` costs more than encoding (the kernel delivers into the
        server inside the syscall), so a lock's ``create`` + ``getChildren`` leave
        together. ``watcher`` applies to every request that can carry a watch.
        """
        if self._wire is None or self._queue:
            return [self.submit(request, watcher=watcher) for request in requests]
        loop = self._loop or asyncio.get_running_loop()
        now = time.monotonic()
        futures: list[asyncio.Future[Any]] = []
        frames: list[bytes] = []
        sink = _events.sink
        with self._send_lock:
            for request in requests:
                if sink is not None:
                    sink.request(request)
                future: asyncio.Future[Any] = loop.create_future()
                futures.append(future)
                try:
                    frames.append(self._session.request(request, (future, now), watcher))
                except (ZooKeeperError, TypeError, ValueError) as exc:
                    future.set_exception(exc)
            if frames:
                self._write(b"".join(frames))
        return futures

    def _send(self, request: object, future: asyncio.Future[Any], watcher: Watcher | None) -> None:
        if _events.sink is not None:
            _events.sink.request(request)
        with self._send_lock:
            try:
                frame = self._session.request(request, (future, time.monotonic()), watcher)
            except (ZooKeeperError, TypeError, ValueError) as exc:
                future.set_exception(exc)
                return
            self._write(frame)

    def _write(self, frame: bytes) -> None:
        """Write on the loop thread, holding ``_send_lock`` (with the frame's making)."""
        self._last_send = time.monotonic()
        transport = self._transport
        assert transport is not None
        if self._writing and self._direct_wire is self._wire:
            self._outbox.append(frame)  # after what the writing caller is sending
            return
        if self._rest is not None:
            self._write_rest(self._wire)  # a caller's partial write ends first
        transport.write(frame)

    # ------------------------------------------------------------ from other threads

    def submit_from_thread(
        self, requests: Sequence[object], tokens: Sequence[Any], watcher: Watcher | None
    ) -> bool:
        """Send ``requests`` from the calling thread, in one write; False: use the loop.

        The sync client's hot path: no hand-off to the loop thread per request. Each
        token needs ``done()``, ``set_result()`` and ``set_exception()`` like a future
        (the loop thread answers it, or fails it when the connection drops, exactly as
        it does futures). Only on an established plain-TCP connection with nothing
        queued or buffered before it; otherwise nothing is sent and the caller goes
        through the loop (``submit``), which keeps every other case as it was.
        """
        with self._send_lock:
            sock = self._direct
            transport = self._transport
            if (
                sock is None
                or transport is None
                or self._closing
                or self._queue
                or self._rest is not None
                or not self._session.connected
                or transport.get_write_buffer_size()
            ):
                return False
            wire = self._wire
            try:
                now = time.monotonic()
                sink = _events.sink
                frames: list[bytes] = []
                for request, token in zip(requests, tokens, strict=True):
                    if sink is not None:
                        sink.request(request)
                    try:
                        frames.append(self._session.request(request, (token, now), watcher))
                    except (ZooKeeperError, TypeError, ValueError) as exc:
                        token.set_exception(exc)
                if not frames:
                    return True
                self._last_send = now
                if self._writing:
                    self._outbox.extend(frames)
                    return True  # the writing caller sends ours after its own
                self._writing = True
            except BaseException:
                self._broken_write(wire, writer=False)
                raise
        try:
            self._send_outbox(sock, b"".join(frames) if len(frames) > 1 else frames[0], wire)
        except BaseException:
            self._broken_write(wire, writer=True)
            raise
        return True

    def _broken_write(self, wire: _Wire | None, *, writer: bool) -> None:
        """Something (Ctrl-C, in the main thread) interrupted a caller between numbering
        its requests and sending them: the stream may be torn, so the connection is
        dropped and every request in flight fails as on any drop."""
        if writer:
            with self._send_lock:
                self._outbox.clear()
                self._stop_writing()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to drop
            self._loop_or_running().call_soon_threadsafe(self._abort_direct, wire)

    def _send_outbox(self, sock: socket.socket, data: bytes, wire: _Wire | None) -> None:
        """As the writing caller: send ``data``, then what the outbox gathered meanwhile,
        until it is empty; outside the lock, so other callers only add to the outbox."""
        while True:
            try:
                sent = sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                # The connection is broken: the loop drops it, and the requests in
                # flight (these too) fail with ConnectionLossError, as if sent.
                log.debug("direct send failed: %r", exc)
                with self._send_lock:
                    self._outbox.clear()
                    self._stop_writing()
                self._loop_or_running().call_soon_threadsafe(self._abort_direct, wire)
                return
            with self._send_lock:
                if sent < len(data):  # the socket buffer is full: the loop writes the rest
                    if self._direct is sock:
                        self._rest = data[sent:] + b"".join(self._outbox)
                        self._loop_or_running().call_soon_threadsafe(self._write_rest, wire)
                    self._outbox.clear()
                    self._stop_writing()
                    return
                outbox = self._outbox
                if not outbox or self._direct is None:
                    outbox.clear()  # stopped: those requests fail with the connection
                    self._stop_writing()
                    return
                sock = self._direct
                data = b"".join(outbox) if len(outbox) > 1 else outbox[0]
                outbox.clear()
                wire = self._wire

    def _stop_writing(self) -> None:
        """Holding ``_send_lock``: no caller writes now; close a socket stopped meanwhile."""
        self._writing = False
        retired, self._retired = self._retired, []
        for sock in retired:
            sock.close()

    def _write_rest(self, wire: _Wire | None) -> None:
        """On the loop: the rest of a caller's partial write, unless written already (the
        loop's next write sends it first) or its connection is gone."""
        with self._send_lock:
            rest, self._rest = self._rest, None
            transport = self._transport
            if rest is not None and wire is not None and wire is self._wire and transport:
                self._last_send = time.monotonic()
                transport.write(rest)

    def _abort_direct(self, wire: _Wire | None) -> None:
        if wire is not None and wire is self._wire:
            wire.abort()

    def _start_direct(self, wire: _Wire) -> None:
        """Let callers' threads write to ``wire`` (plain TCP only: a TLS object is not
        safe to write from one thread while another reads). A duplicate of the socket:
        closed under ``_send_lock`` before the transport's own, so a thread never writes
        to a descriptor number the loop has closed and reused."""
        if not self.thread_writes or self._ssl is not None or wire.transport is None:
            return
        raw = wire.transport.get_extra_info("socket")
        if raw is None:
            return
        # Dead at birth: bytes read with the handshake's answer broke the protocol (a
        # reply nobody asked for), and the wire was aborted, its socket closed, before
        # it got here. That, or any failure to duplicate the socket, is a dropped
        # connection like any other: the supervisor sees ``lost`` and reconnects.
        if wire.transport.is_closing():
            return
        try:
            direct = socket.socket(fileno=os.dup(raw.fileno()))
        except Exception:
            log.warning(
                "cannot write to %s from callers' threads; dropping the connection",
                self.last_host,
                exc_info=True,
            )
            wire.abort()
            return
        with self._send_lock:
            self._stop_direct_locked()
            self._direct, self._direct_wire = direct, wire

    def _stop_direct(self, wire: _Wire) -> None:
        with self._send_lock:
            if self._direct_wire is wire:
                self._stop_direct_locked()

    def _stop_direct_locked(self) -> None:
        direct, self._direct, self._direct_wire = self._direct, None, None
        self._rest = None
        self._outbox.clear()
        if direct is None:
            return
        if self._writing:  # a caller may be in its send: it closes the socket after
            self._retired.append(direct)
        else:
            direct.close()

    # ------------------------------------------------------------ incoming bytes

    def _data_received(self, wire: _Wire, data: bytes) -> None:
        if wire is not self._wire and wire is not self._attempt:
            return  # a connection we have given up on
        self._last_recv = time.monotonic()
        try:
            events = self._session.receive(data)
        except MarshallingError as exc:
            if wire is self._attempt and wire.foreign is None:
                wire.foreign = bytes(data[:64])  # reported once, as "not ZooKeeper"
                log.debug("not a ZooKeeper answer: %s", exc)
            else:
                log.warning("dropping the connection to %s: %s", self.last_host, exc)
            wire.abort()
            # The answers that came before the broken bytes are real: deliver them. The
            # rest are failed with ConnectionLossError when the connection is lost.
            events = exc.events if isinstance(exc, ReceiveError) else []
        for event in events:
            if type(event) is Reply:
                future, sent = event.token
                last = self.last_answered_sent
                if last is None or sent > last:
                    self.last_answered_sent = sent
                self._rule.answered(sent, self._last_recv, event.through_leader)
                if not event.ok and isinstance(event.value, SessionClosedRequireSaslAuthError):
                    if future is not None and not future.done():
                        future.set_exception(event.value)
                    if self._sasl is None:  # (a login's own refusal is _sasl_login's)
                        self._end_for_good(wire, self._auth_required())
                        return
                    continue
                if future is None:
                    if not event.ok and isinstance(event.value, AuthFailedError):
                        # Credentials it accepted before are refused now: like the Java
                        # client's AUTH_FAILED, this is the end of the connection.
                        log.error("the server refused our credentials (AUTH_FAILED); closing")
                        self._refuse_start(self._auth_refused())
                        self._drop_refused(wire)
                        self._closer = self._loop_or_running().create_task(self.close())
                        return
                    continue
                if not future.done():
                    if event.ok:
                        future.set_result(event.value)
                    else:
                        future.set_exception(event.value)
            elif type(event) is Notification:
                self._notify(event)
            elif not wire.handshake.done():
                assert isinstance(event, Established | Expired)
                wire.handshake.set_result(event)

    def _notify(self, event: Notification) -> None:
        if not event.watchers:
            return
        kind = _KINDS.get(event.event_type)
        if kind is None:
            log.warning("unknown watch event type %r on %s", event.event_type, event.path)
            return
        watch_event = WatchEvent(kind, event.path)
        for watcher in event.watchers:
            try:
                watcher(watch_event)
            except Exception:
                log.exception("watcher %r failed on %r", watcher, watch_event)

    def _notify_all(self, watchers: list[tuple[str, Any]], state: SessionState) -> None:
        for path, watcher in watchers:
            try:
                watcher(WatchEvent(_ENDS[state], path))
            except Exception:
                log.exception("watcher %r failed on the %s notice", watcher, state.name)

    # ------------------------------------------------------------ states

    def _set_state(self, state: SessionState) -> None:
        if state is self._state:
            return
        log.debug("session %#x: %s -> %s", self.session_id, self._state.name, state.name)
        self._state = state
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                log.exception("state listener %r failed on %s", listener, state.name)

    def _fail(self, tokens: list[Any], error: ZooKeeperError) -> None:
        for future, _sent in tokens:
            if future is not None and not future.done():
                future.set_exception(type(error)(str(error)))

    def _fail_queue(self, error: ZooKeeperError) -> None:
        queue = self._queue
        while queue:
            _request, future, _watcher = queue.popleft()
            if not future.done():
                future.set_exception(type(error)(str(error)))

    # ------------------------------------------------------------ the supervisor

    async def _supervise(self, start_deadline: float) -> None:
        assert self._started is not None
        try:
            await self._establish(start_deadline)
        except asyncio.CancelledError:
            if not self._started.done():
                self._started.set_exception(ClientClosedError("closed while connecting"))
            raise
        except Exception as exc:
            if not self._started.done():
                self._started.set_exception(exc)
            return
        if self._session.auth and not await self._auth_accepted():
            return  # _started has the failure; close() is under way
        await self._probe(start_deadline)
        if not self._started.done():
            self._started.set_result(None)
        while not self._closing:
            wire = self._wire
            if wire is None:
                return  # ended for good (refused); close() is under way
            # not `await wire.lost`: cancelling this task must not cancel that future
            await asyncio.wait((wire.lost,))
            if self._closing:
                return
            self._disconnected(wire)
            await self._back_off()
            try:
                await self._establish(None)
            except ConnectionFailedError as exc:  # a refused SASL login: for good
                log.error("%s; closing", exc)
                self._closer = self._loop_or_running().create_task(self.close())
                return

    async def _back_off(self) -> None:
        """After a drop: reconnect at once if the connection had lived, else wait.

        A server that answers the handshake and then breaks every connection (a protocol
        error, a proxy gone wrong) would otherwise cost a reconnect per round trip. The
        wait is jittered, doubles up to ``_BACKOFF_MAX``, and never outlasts the session.
        """
        lived = time.monotonic() - self._connected_at
        if lived >= self._ping_interval:
            self._reconnect_backoff = _BACKOFF_MIN
            return
        backoff = self._reconnect_backoff
        self._reconnect_backoff = min(backoff * 2, _BACKOFF_MAX)
        pause = random.uniform(backoff / 2, backoff)
        expiry = self._expiry_deadline()
        if expiry is not None:
            pause = min(pause, max(expiry - time.monotonic(), 0.0))
        await asyncio.sleep(pause)

    async def _probe(self, deadline: float) -> None:
        """One round trip after the first handshake: is this an ensemble, is the chroot there?

        ``/zookeeper/config`` lists the members of an ensemble and is empty on a
        standalone server (which times sessions itself: every answer counts). A server
        that cannot say (older than 3.5, or no answer in time) is taken for an ensemble,
        whose tickTime the lease rule then needs (``_learn_timing``).
        """
        chroot = self._session.chroot
        requests: list[tuple[object, str | None]] = [(GetData("/zookeeper/config"), "")]
        if chroot:
            requests.append((Exists("/"), None))
        loop = self._loop_or_running()
        wire = self._wire
        assert wire is not None
        futures: list[asyncio.Future[Any]] = []
        now = time.monotonic()
        for request, root in requests:
            future: asyncio.Future[Any] = loop.create_future()
            futures.append(future)
            with self._send_lock:
                self._write(self._session.request(request, (future, now), None, chroot=root))
        # Until every answer, a dropped connection or the start deadline.
        answered = asyncio.gather(*futures, return_exceptions=True)
        await asyncio.wait(
            (answered, wire.lost),
            timeout=max(deadline - time.monotonic(), 0.001),
            return_when=asyncio.FIRST_COMPLETED,
        )
        if not answered.done():
            answered.cancel()
            answered.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved
        ok = [f.done() and not f.cancelled() and f.exception() is None for f in futures]
        results = [f.result() if good else None for f, good in zip(futures, ok, strict=True)]
        config = results[0]
        data = config.data if isinstance(config, NodeData) else None
        self.ensemble = data is None or b"server." in data
        if not self.ensemble:  # standalone: every answer so far counts
            rule = _lease_rule.Standalone(self.session_timeout, self._clock_drift)
            if self.last_answered_sent is not None:
                rule.connected(self.last_answered_sent, resumed=False)
            self._rule = rule
        if chroot and ok[-1]:
            self.chroot_exists = results[-1] is not None
        if self.ensemble:
            await self._learn_timing(deadline)

    async def _learn_timing(self, deadline: float) -> None:
        """Give the ensemble's lease rule the servers' tickTime: the option, or asked.

        Where nothing answers, the rule keeps the worst case ZooKeeper's defaults allow
        (safe, but then a lease cannot be kept while connected): said once, at WARNING,
        with the option that fixes it.
        """
        rule = self._rule
        timing = self._timing
        if timing is None and self._address is not None:
            host, port = self._address
            budget = min(_LEARN_TIMING_TIMEOUT, max(deadline - time.monotonic(), 0.05))
            timing = await learn_timing(host, port, self._ssl, budget)
        if timing is None:
            log.warning(
                "could not learn the ZooKeeper servers' tickTime from %s (the `conf` "
                "four-letter word is not allowed and no AdminServer answered on port "
                "8080); assuming the largest ZooKeeper's defaults allow for a %.3g s "
                "session (%.3g s), under which a lease on an ensemble cannot be kept while "
                "connected: pass tick_time=<the servers' tickTime in seconds> (CLI: "
                "--tick-time or ZKLOCKS_TICK_TIME)",
                self.last_host,
                self.session_timeout,
                _lease_rule.assumed_timing(self.session_timeout).tick,
            )
            return
        self._timing = timing
        if not isinstance(rule, _lease_rule.SyncChain):
            return  # a planted rule (the nemesis' checker must catch it)
        rule.timing = timing
        log.info(
            "ensemble tickTime %.3f s (from the %s); lease renewed by a sync every %.3f s",
            timing.tick,
            timing.source,
            rule.renew_interval(),
        )
        if not rule.sustainable():
            log.warning(
                "a %.3g s session is too short to keep a lease on an ensemble with "
                "tickTime %.3g s (a lease proven through the leader is about 3 sync "
                "intervals plus a tick old); leases will be lost while connected: use a "
                "session_timeout above %.3g s",
                self.session_timeout,
                timing.tick,
                rule.shortest_session(),
            )
        if self._wire is not None:
            self._arm_timer()  # the renewal interval has changed

    def _disconnected(self, wire: _Wire) -> None:
        log.info("connection to %s lost (session %#x)", self.last_host, self.session_id)
        self._wire = None
        self._transport = None
        self._cancel_timer()
        self._stop_direct(wire)
        with self._send_lock:
            in_flight = self._session.disconnect()
        self._fail(in_flight, ConnectionLossError("the connection dropped"))
        self._set_state(SessionState.SUSPENDED)

    def _expired(self, session_id: int, watchers: list[tuple[str, Any]]) -> None:
        log.warning("session %#x expired", session_id)
        self._fail_queue(SessionExpiredError("the session expired before it could be sent"))
        self._set_state(SessionState.LOST)
        self._notify_all(watchers, SessionState.LOST)

    def _expiry_deadline(self) -> float | None:
        """When the session must be gone on the server if we have not been heard since."""
        if not self._session.session_id or self.last_answered_sent is None:
            return None
        return self.last_answered_sent + self.session_timeout

    async def _establish(self, deadline: float | None) -> None:
        """Try hosts until a session is live on a connection; handles expiry on the way.

        ``deadline`` bounds the whole search (start only); raises ConnectionFailedError.
        """
        tried: dict[str, None] = {}
        failures = 0
        backoff = _BACKOFF_MIN
        # This round's failures, when every one so far had a definite cause (refused,
        # unknown name, a TLS refusal or mismatch); None once a host was silent or
        # answered. At start, a round of definite failures ends the search at once.
        definite: dict[str, str] | None = {}
        while True:
            if self._closing:
                raise asyncio.CancelledError  # a cancel that wait_for swallowed
            now = time.monotonic()
            expiry = self._expiry_deadline()
            if expiry is not None and now >= expiry:
                session_id = self._session.session_id
                self._expired(session_id, self._session.expire())
                continue
            if deadline is not None and now >= deadline:
                reasons = [self._failures[h] for h in tried if h in self._failures]
                message = "no ZooKeeper server answered" + (
                    f" ({'; '.join(reasons)})" if reasons else f" (tried {', '.join(tried)})"
                )
                refused = bool(self._refusals & set(tried))
                raise ConnectionFailedError(
                    message, hosts=tuple(tried), reasons=tuple(reasons), refused=refused
                )
            host, port = self._addresses[self._host_index % len(self._addresses)]
            self._host_index += 1
            name = f"{host}:{port}"
            tried[name] = None
            # Each attempt gets a share of the time left, so one member that accepts
            # TCP but never answers (a frozen process) leaves time for the others.
            limit = self._attempt_timeout()
            left_in_round = len(self._addresses) - failures % len(self._addresses)
            for bound in (expiry, deadline):
                if bound is not None:
                    limit = min(limit, (bound - now) / left_in_round)
            outcome = await self._connect_one(host, port, max(limit, 0.001))
            if isinstance(outcome, Established):
                return
            if isinstance(outcome, Expired):
                self._expired(outcome.session_id, outcome.watchers)
                backoff = _BACKOFF_MIN
                self._reconnect_backoff = _BACKOFF_MIN
                continue  # the server hung up; a new connection asks for a new session
            failures += 1
            if definite is not None and outcome is not None:
                definite[name] = outcome
            else:
                definite = None
            if failures % len(self._addresses) == 0:
                if deadline is not None and definite:
                    # Every host failed for a reason that waiting will not change.
                    raise ConnectionFailedError(
                        "no ZooKeeper server could be reached ("
                        + "; ".join(definite.values())
                        + ")",
                        hosts=tuple(tried),
                        reasons=tuple(definite.values()),
                        refused=bool(self._refusals & set(definite)),
                    )
                definite = {}
                # Every host failed once: pause before the next round, not longer than
                # the time left.
                pause = random.uniform(backoff / 2, backoff)
                for bound in (expiry, deadline):
                    if bound is not None:
                        pause = min(pause, max(bound - time.monotonic(), 0))
                await asyncio.sleep(pause)
                backoff = min(backoff * 2, _BACKOFF_MAX)

    async def _auth_accepted(self) -> bool:
        """At start: wait until the server has answered the credentials sent first thing.

        The server answers auth packets as it reads them, ahead of anything queued, so
        once a ping sent after them is answered they were accepted; a refusal arrives
        first and ends the session (ZooKeeper closes it on AUTH_FAILED).
        """
        wire = self._wire
        assert wire is not None and self._started is not None
        probe: asyncio.Future[Any] = self._loop_or_running().create_future()
        probe.add_done_callback(lambda done: done.cancelled() or done.exception())
        with self._send_lock:
            self._write(self._session.ping((probe, time.monotonic())))
        # A drop for another reason ends the wait too; the supervisor then reconnects.
        await asyncio.wait((probe, wire.lost), return_when=asyncio.FIRST_COMPLETED)
        return not self._started.done()

    def _auth_refused(self) -> ConnectionFailedError:
        schemes = ", ".join(sorted({scheme for scheme, _ in self._session.auth})) or "?"
        host = self.last_host or "?"
        return ConnectionFailedError(
            f"ZooKeeper at {host} refused our credentials (AUTH_FAILED for scheme "
            f"{schemes}) and closed the session; check auth (scheme and 'user:password')",
            hosts=(host,),
            reasons=(f"{host} refused our credentials (AUTH_FAILED)",),
            refused=True,
        )

    def _auth_required(self) -> ConnectionFailedError:
        host = self.last_host or "?"
        return ConnectionFailedError(
            f"ZooKeeper at {host} requires authentication (enforce.auth.enabled) and closed "
            "the session: log in with SASL, sasl=zklocks.SASL(mechanism='DIGEST-MD5', "
            "username=..., password=...) (CLI: --sasl-user and --sasl-password-file)",
            hosts=(host,),
            reasons=(f"{host} requires authentication: a SASL login (enforce.auth.enabled)",),
            refused=True,
        )

    def _end_for_good(self, wire: _Wire, error: ConnectionFailedError) -> None:
        """The server refused us in a way no retry can fix: fail start() (or log), close."""
        starting = self._started is not None and not self._started.done()
        log.log(logging.INFO if starting else logging.ERROR, "%s", error)  # start() raises it
        self._refuse_start(error)
        self._drop_refused(wire)
        self._closer = self._loop_or_running().create_task(self.close())

    async def _sasl_login(self, wire: _Wire, host: str, port: int) -> None:
        """Run the SASL exchange on a fresh connection, before anything else is sent.

        Each token goes out as a ``GetSASLRequest`` and the server's answer is fed back to
        the mechanism until it is complete. A refusal (AUTH_FAILED, or the enforcing
        server's SESSIONCLOSEDREQUIRESASLAUTH) raises ``SaslFailed``; a hang-up mid-way is
        an ordinary ``ConnectionLossError`` (the server may be going down).
        """
        sasl = self._sasl
        assert sasl is not None and wire.transport is not None
        mechanism = sasl.mechanism_for(host)
        loop = self._loop_or_running()
        try:
            token = mechanism.first()
            while True:
                answer: asyncio.Future[Any] = loop.create_future()
                now = time.monotonic()
                with self._send_lock:
                    frame = self._session.request(GetSASLRequest(token), (answer, now), None)
                    wire.transport.write(frame)
                self._last_send = now
                await asyncio.wait((answer, wire.lost), return_when=asyncio.FIRST_COMPLETED)
                if not answer.done():
                    answer.cancel()
                    raise ConnectionLossError("the server hung up during the SASL exchange")
                error = answer.exception()
                if error is not None:
                    raise SaslFailed(
                        f"SASL authentication failed: {host}:{port} refused the "
                        f"{sasl.mechanism} login of {sasl.username!r} "
                        f"({_REFUSALS.get(type(error), type(error).__name__)}); check the "
                        "user and password"
                    )
                reply = answer.result()
                assert isinstance(reply, SetSASLResponse)
                if mechanism.complete:  # that was our last token (GSSAPI): accepted
                    return
                token = mechanism.answer(reply.token)
                if mechanism.complete and not token:  # nothing left to say (DIGEST-MD5)
                    return
        finally:
            mechanism.dispose()

    def _drop_refused(self, wire: _Wire) -> None:
        """After AUTH_FAILED the server ends the session: fail what is in flight, hang up
        (close() then has no closeSession to send)."""
        refused = AuthFailedError("the server refused our credentials")
        self._stop_direct(wire)
        with self._send_lock:
            in_flight = self._session.disconnect()
        self._fail(in_flight, refused)
        if wire is self._wire:
            self._wire = None
            self._transport = None
            self._cancel_timer()
        self._abandon(wire)

    def _refuse_start(self, error: ConnectionFailedError) -> None:
        started = self._started
        if started is not None and not started.done():
            started.set_exception(error)

    def _tls_failure(self, error: BaseException, wire: _Wire, tls_port: bool) -> str | None:
        """What a TLS refusal (or a TLS mismatch, either way) means, else None."""
        reason = _security.connect_failure_reason(error)
        if reason is None and wire.error is not None:
            reason = _security.connect_failure_reason(wire.error)
        if reason is None and tls_port:
            reason = (
                "the server hung up on our plaintext handshake and speaks TLS on that port; "
                "connect with ssl=True or an ssl.SSLContext"
            )
        if (
            reason is None
            and self._ssl is not None
            and wire.transport is None  # the TLS handshake did not complete
            and isinstance(error, ConnectionResetError | ConnectionAbortedError | _ssl.SSLEOFError)
        ):
            reason = (
                "the server hung up during the TLS handshake (a plaintext port? "
                "then leave out ssl=, or serve TLS on that port)"
            )
        return reason

    def _attempt_timeout(self) -> float:
        """How long one connection attempt may wait for the handshake's answer.

        At most a third of the session timeout even with a single host: a server that
        accepts TCP but never answers (one still starting after a restart, a frozen
        process) must leave time for a second attempt before the session expires.
        """
        if self._connect_timeout is not None:
            return self._connect_timeout
        return max(self.session_timeout / max(len(self._addresses), 3), 0.1)

    async def _connect_one(
        self, host: str, port: int, timeout: float
    ) -> Established | Expired | str | None:
        """The session's event, or for a failure its reason when definite, else None."""
        loop = self._loop_or_running()
        wire = _Wire(self, loop)
        self._attempt = wire
        try:
            started = time.monotonic()
            try:
                event = await asyncio.wait_for(self._handshake(wire, host, port), timeout)
            except SaslFailed as exc:
                self._abandon(wire)
                with self._send_lock:
                    self._session.disconnect()
                name = f"{host}:{port}"
                raise ConnectionFailedError(
                    str(exc), hosts=(name,), reasons=(str(exc),), refused=True
                ) from None
            except (OSError, asyncio.TimeoutError, ZooKeeperError) as exc:
                log.debug("could not connect to %s:%s: %r", host, port, exc)
                self._abandon(wire)
                name = f"{host}:{port}"
                tls_port = False
                if self._hung_up_plain(exc, wire):
                    if name not in self._tls_ports:
                        left = timeout - (time.monotonic() - started)
                        self._tls_ports[name] = await _speaks_tls(host, port, max(left, 0.001))
                    tls_port = self._tls_ports[name]
                return self._report_failure(name, exc, wire, timeout, tls_port)
            except BaseException:
                self._abandon(wire)
                raise
            if isinstance(event, Expired):
                self._abandon(wire)
                return event
            self.last_host = f"{host}:{port}"
            self._failures.clear()
            self._reported.clear()
            self._refusals.clear()
            self._established(wire, event)
            return event
        finally:
            self._attempt = None

    def _report_failure(
        self, host: str, error: BaseException, wire: _Wire, limit: float, tls_port: bool
    ) -> str | None:
        """Say once per host (until a session is made) why it failed: refused, unknown
        name, silent, or not ZooKeeper. INFO before the first session (``start()``
        raises with these reasons), WARNING for a client that was connected.

        Returns the reason when it is definite (see ``_diagnose.definite``), else None.
        """
        tls = None if wire.foreign is not None else self._tls_failure(error, wire, tls_port)
        if wire.foreign is not None:
            text, kind = _diagnose.not_zookeeper(host, wire.foreign), "foreign"
            sure = _diagnose.looks_like(wire.foreign) == _diagnose.TLS
        elif tls is not None:
            text, kind = f"{host}: {tls}", "tls"
            self._refusals.add(host)
            sure = True
        else:
            text, kind = _diagnose.failure(host, error, limit), type(error).__name__
            sure = _diagnose.definite(error)
        self._failures.setdefault(host, text)
        if (host, kind) not in self._reported:
            self._reported.add((host, kind))
            log.log(logging.WARNING if self.last_host else logging.INFO, "%s", text)
        return text if sure else None

    def _hung_up_plain(self, error: BaseException, wire: _Wire) -> bool:
        """A plaintext client's first handshake ended by a silent hang-up: a TLS-only port,
        or a member that is not serving (no quorum yet). ``_speaks_tls`` tells which."""
        return (
            self._ssl is None
            and self.last_host is None
            and isinstance(error, ConnectionLossError)
            and wire.foreign is None
        )

    def _abandon(self, wire: _Wire) -> None:
        """Abort a connection attempt; close() waits until its socket is really closed."""
        if wire.transport is None or wire.lost.done():
            return
        wire.abort()
        self._abandoned.add(wire)
        wire.lost.add_done_callback(lambda _: self._abandoned.discard(wire))

    async def _handshake(self, wire: _Wire, host: str, port: int) -> Established | Expired:
        loop = self._loop_or_running()
        sent = time.monotonic()
        await loop.create_connection(lambda: wire, host, port, ssl=self._ssl)
        assert wire.transport is not None
        with self._send_lock:
            wire.transport.write(self._session.connect())
        self._last_send = sent
        event = await wire.handshake
        if isinstance(event, Established) and self._sasl is not None:
            await self._sasl_login(wire, host, port)
        if isinstance(event, Established):
            # the handshake is an answered request: the server heard us no earlier
            self.last_answered_sent = sent
            self._rule.negotiated(event.timeout_ms / 1000)
            self._rule.connected(sent, event.resumed)  # a new session: its own timer
            self._address = (host, port)
            self._connected_at = time.monotonic()
        return event

    def _established(self, wire: _Wire, event: Established) -> None:
        assert wire.transport is not None
        self._wire = wire
        self._transport = wire.transport
        timeout = event.timeout_ms / 1000
        self._set_intervals(timeout)
        now = time.monotonic()
        self._last_recv = now
        with self._send_lock:
            for frame in self._session.restore((None, now)):
                self._write(frame)
        queue = self._queue
        while queue:
            request, future, watcher = queue.popleft()
            if not future.done():
                self._send(request, future, watcher)
        self._start_direct(wire)
        self._arm_timer()
        log.info(
            "session %#x %s on %s (timeout %.3f s)",
            event.session_id,
            "resumed" if event.resumed else "established",
            self.last_host,
            timeout,
        )
        self._set_state(SessionState.CONNECTED)

    def _set_intervals(self, timeout: float) -> None:
        # Pings keep the session and tell a dead connection; on an ensemble the renewing
        # syncs (``_tick``) keep the lease, which pings cannot prove.
        self._ping_interval = timeout / 3
        self._read_timeout = timeout * 2 / 3

    # ------------------------------------------------------------ the liveness timer

    def _arm_timer(self) -> None:
        self._cancel_timer()
        loop = self._loop_or_running()
        due = min(self._last_recv + self._read_timeout, self._last_send + self._ping_interval)
        renew = self._rule.renew_interval()
        if renew is not None:
            due = min(due, self._last_renewal + renew)
        self._timer = loop.call_later(max(due - time.monotonic(), 0), self._tick)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        wire = self._wire
        if wire is None:
            return
        now = time.monotonic()
        if now - self._last_recv >= self._read_timeout:
            log.warning(
                "nothing heard from %s for %.3f s; dropping the connection",
                self.last_host,
                now - self._last_recv,
            )
            wire.abort()
            return
        renew = self._rule.renew_interval()
        if renew is not None and now - self._last_renewal >= renew:
            # On an ensemble: a round trip through the leader that the lease rule counts
            # (no transaction, no disk write); answered with no one waiting for it.
            self._last_renewal = now
            with self._send_lock:
                self._write(self._session.request(Sync("/"), (None, now), None, chroot=""))
        elif now - self._last_send >= self._ping_interval:
            with self._send_lock:
                self._write(self._session.ping((None, now)))
        self._arm_timer()

    # ------------------------------------------------------------ conveniences

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
        ttl: float | None = None,
        acl: Sequence[ACL] = OPEN_ACL_UNSAFE,
    ) -> Created:
        """Create a node; ``ttl`` (seconds) makes a TTL node. Returns path and stat."""
        if not acl:
            raise ValueError("a node needs at least one ACL entry")
        ttl_ms = 0 if ttl is None else max(int(ttl * 1000), 1)
        request = Create(
            path, data, ephemeral, sequential, container, acl=tuple(acl), ttl_ms=ttl_ms
        )
        _ = request.mode  # flags that make no create mode: ValueError now, not at a resend
        result: Created = await self.submit(request)
        return result

    async def delete(self, path: str, *, version: int = -1) -> None:
        await self.submit(Delete(path, version=version))

    async def exists(self, path: str, *, watcher: Watcher | None = None) -> Stat | None:
        result: Stat | None = await self.submit(Exists(path), watcher=watcher)
        return result

    async def get_data(self, path: str, *, watcher: Watcher | None = None) -> NodeData:
        result: NodeData = await self.submit(GetData(path), watcher=watcher)
        return result

    async def set_data(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        result: Stat = await self.submit(SetData(path, data, version))
        return result

    async def get_children(self, path: str, *, watcher: Watcher | None = None) -> list[str]:
        names: list[str] = await self.submit(GetChildren(path), watcher=watcher)
        return names

    async def multi(self, *ops: MultiOp) -> list[Any]:
        """Apply ``ops`` atomically; raises the failing op's error (``.results`` has all)."""
        result: list[Any] = await self.submit(Multi(tuple(ops)))
        return result

    async def sync(self, path: str = "/") -> None:
        await self.submit(Sync(path))

    async def add_watch(self, path: str, watcher: Watcher, *, recursive: bool = True) -> None:
        """A persistent watch (ZooKeeper 3.6+); restored after reconnects, ends with the session."""
        mode = AddWatchMode.PERSISTENT_RECURSIVE if recursive else AddWatchMode.PERSISTENT
        await self.submit(AddWatch(path, mode), watcher=watcher)

    async def add_auth(self, scheme: str, credential: bytes) -> None:
        """Authenticate this session (e.g. ``"digest", b"user:password"``); re-sent on reconnect."""
        loop = self._loop_or_running()
        if self._wire is None:
            if self._closing:
                raise ClientClosedError()
            # Not connected: remember it; the next connection sends it first thing.
            if (scheme, credential) not in self._session.auth:
                self._session.auth.append((scheme, credential))
            return
        future: asyncio.Future[Any] = loop.create_future()
        with self._send_lock:
            self._write(self._session.add_auth(scheme, credential, (future, time.monotonic())))
        await future
