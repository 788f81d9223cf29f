"""The asyncio connection that runs the sans-IO session (``zklocks._protocol.session``).

Theory of operation
-------------------
One ``Connection`` keeps one ZooKeeper session alive over successive TCP (or TLS)
connections. The protocol core decides what bytes mean; the connection and the objects
it is made of own everything that needs a clock, a socket or a callback:

* ``Outgoing`` (``outgoing.py``): the live wire, requests waiting for one, pipelined
  writes; with ``DirectWriter`` (``direct.py``), the sync client's callers' threads
  writing their own requests, and with ``CallerReads`` (``caller_reads.py``), the
  waiting caller reading its own reply (the loop reads when no caller does).
* ``Opener`` (``opener.py``): dial, handshake and log in, one attempt at a time, with a
  ``Dialer`` (``dialer.py``): which host next, how long to give it, why it failed (said
  once per host, in words from ``diagnose.py``); definite failures end ``start()``.
* ``Liveness`` (``liveness.py``): pings, dropping a silent connection, and the lease's
  renewing syncs on one timer.
* ``LeaseProofs`` (``lease_proofs.py``): the lease rule (``lease_rule.py``) and the
  tickTime it needs.
* ``auth.py``: the SASL exchange after every handshake, and refusals that end for good.
* ``notices.py``: watch events, session ends and failed requests told to their waiters.

This module holds the session's life: start, the supervisor that reconnects, the bytes
that come in, and close.

* **States.** ``CONNECTING`` (before the first session) -> ``CONNECTED`` ->
  ``SUSPENDED`` (connection lost, session maybe alive) -> ``CONNECTED`` (same session)
  or ``LOST`` (the session expired) -> ``CONNECTED`` (a new session). ``CLOSED`` is
  final. Listeners hear every transition, on the loop thread.
* **Reconnecting.** On a drop, every request in flight fails with
  ``ConnectionLossError`` (the server may or may not have applied it; the caller
  decides); requests submitted meanwhile wait in a queue. A connection that died young
  is followed by a capped, jittered, doubling backoff (a broken server must not cost a
  reconnect per round trip). On the new connection the session is resumed with its id,
  password and last zxid; then (with ``sasl=``) the SASL exchange runs to completion,
  auth is re-sent and every watch restored with setWatches before the queue is
  flushed. A SASL login the server refuses, or a server that requires one we do not
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
import random
import ssl as _ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from zklocks import _vocabulary
from zklocks._errors import InvalidArgument
from zklocks._protocol import codec
from zklocks._protocol.constants import DEFAULT_MAX_BUFFER
from zklocks._protocol.errors import (
    AuthFailedError,
    ClientClosedError,
    ConnectionFailedError,
    ConnectionLossError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.session import (
    Established,
    Session,
)
from zklocks._transport import forks as _forks
from zklocks._transport import lease_rule as _lease_rule
from zklocks._transport import notices as _notices
from zklocks._transport.auth import auth_refused, auth_required, credentials_answered
from zklocks._transport.caller_reads import CallerReads
from zklocks._transport.dialer import Dialer
from zklocks._transport.heartbeat import Heartbeat
from zklocks._transport.incoming import SASL_REQUIRED, Incoming
from zklocks._transport.lease_proofs import LeaseProofs, TimingQuestion
from zklocks._transport.liveness import Liveness
from zklocks._transport.opener import Opener, session_timeout_of
from zklocks._transport.outgoing import Outgoing, RequestMeter
from zklocks._transport.probe import ask_server
from zklocks._transport.sasl import SASL
from zklocks._transport.session_bounds import SessionBounds
from zklocks._transport.wire import Wire
from zklocks._vocabulary import SessionListener, SessionState, Watcher, tell_each

__all__ = ["Connection"]

log = logging.getLogger("zklocks.connection")

_CLOSE_REPLY_TIMEOUT = 2.0  # how long close() waits for the closeSession answer


class Connection:
    """A ZooKeeper session kept alive over reconnects, on one asyncio event loop."""

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: float = _vocabulary.DEFAULT_SESSION_TIMEOUT,
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
        self._ssl = ssl
        self._sasl = sasl
        self._session = Session(
            timeout_ms=int(session_timeout * 1000),
            chroot=chroot,
            auth=auth,
            max_request_size=max_request_size,
        )
        self._state = SessionState.CONNECTING
        self._listeners: list[SessionListener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._closed_event: asyncio.Event | None = None
        self._liveness = Liveness(session_timeout)
        self._closer: asyncio.Task[None] | None = None
        self._proofs = LeaseProofs(session_timeout, clock_drift, tick_time)  # ``lease_sent``
        self.ensemble: bool | None = None  # None: not known (yet)
        self.chroot_exists: bool | None = None  # None: no chroot, or not known
        # Sending from callers' threads (``submit_from_thread``): every write and every
        # change to the session's round (requests numbered, in flight, disconnected)
        # happens under this lock, so the wire order is the order of the in-flight FIFO.
        self._send_lock = threading.RLock()
        self.thread_writes = False  # set by a blocking front end before start()
        self.thread_reads = False  # and callers read replies (``read_until``)
        self._out = Outgoing(self._session, self._send_lock, self._liveness, self._loop_or_running)
        self._writer = self._out.writer
        # Reading from callers' threads (``read_until``): the waiting caller reads its reply.
        self._in = Incoming(
            self._session,
            self._liveness,
            self._proofs,
            self._wires,
            lambda: self._opener.attempt,
            self._refused,
            sasl is not None,
        )
        self._in.host = lambda: self.last_host
        reads = (self._in.data_received, self._in.deliver)
        heard, answered = self._liveness.heard, self._proofs.answered
        self._reader = CallerReads(self._session, self._loop_or_running, *reads, heard, answered)
        self._out.reader = self._reader
        self._heartbeat = Heartbeat(
            self._liveness,
            self._proofs,
            self._out,
            self._session,
            self._send_lock,
            lambda: self.last_host,
        )
        dialer = Dialer(addresses, ssl, connect_timeout)
        self._opener = Opener(
            self._session,
            self._out,
            self._liveness,
            self._proofs,
            dialer,
            sasl,
            self._in.data_received,
            self._expired,
        )

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
        return session_timeout_of(self._session)

    @property
    def last_answered_sent(self) -> float | None:
        """When the most recently answered request (pings and the handshake included) was
        sent (``time.monotonic()``): the server heard from us no earlier than that."""
        return self._proofs.last_answered_sent

    @property
    def last_host(self) -> str | None:
        """``host:port`` of the server of the last session made (None: none yet)."""
        return self._opener.last_host

    @property
    def session_password(self) -> bytes:
        return self._session.passwd

    @property
    def chroot(self) -> str:
        return self._session.chroot

    @property
    def lease_rule(self) -> _lease_rule.LeaseRule:
        """The rule that keeps ``lease_sent`` (``Standalone`` or, on an ensemble, a chain)."""
        return self._proofs.rule

    @property
    def timing(self) -> _lease_rule.Timing | None:
        """The servers' tickTime as given or learnt (``timing.assumed``: neither); None on
        a standalone server."""
        return self._proofs.timing() if self.ensemble else None

    @property
    def session_bounds(self) -> SessionBounds | None:
        """The servers' session bounds, where an ensemble's were learnt (None otherwise)."""
        return self._proofs.bounds if self.ensemble else None

    @property
    def lease_problem(self) -> str | None:
        """Why no lease can be kept here, with the fix (None: one can); set by start()."""
        return self._proofs.problem if self.ensemble else None

    def loss_reason(self) -> tuple[str, str]:
        """Why the lease rule's instant came (words, code): ``LeaseProofs.loss_reason``."""
        return self._proofs.loss_reason(self.session_timeout, self.ensemble, self.last_host)

    @property
    def lease_lagging(self) -> bool:
        """Can the lease run out while connected (an ensemble)? Then a timer watches it."""
        return self._proofs.rule.lagging

    @property
    def lease_sent(self) -> float | None:
        """The instant from which the session timeout surely counts, margins taken off.

        On a standalone server that is ``last_answered_sent`` less the clock-drift
        margin. On an ensemble only the leader times sessions, and a member cut off from
        it goes on answering (a follower relays our touches only in its replies to the
        leader's pings): only a chain of syncs proves what the leader counted. See
        ``lease_rule.py`` and docs/locks.md, "What lost means".
        """
        return self._proofs.rule.lease_sent()

    @property
    def hosts(self) -> list[str]:
        """``host:port`` of every server, in the order they are tried."""
        return [f"{host}:{port}" for host, port in self._opener.dialer.addresses]

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]:
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
        if not self._out.close():
            if self._closed_event is not None:
                await self._closed_event.wait()
            return
        wire = self._out.wire
        if wire is not None and self._session.connected:
            closing = self._loop_or_running().create_future()
            try:
                with self._send_lock:
                    self._out.write(self._session.close_session((closing, time.monotonic())))
                await asyncio.wait_for(asyncio.shield(closing), _CLOSE_REPLY_TIMEOUT)
            except (TimeoutError, ZooKeeperError, OSError) as exc:
                log.debug("closeSession not confirmed: %r", exc)
            finally:
                # Unanswered (a silent server, a frame cut short), the request is still in
                # flight, and failing those below would leave an exception nobody reads
                # ("Future exception was never retrieved"): nobody waits for it now.
                closing.cancel()
        # Hang up before and after waiting for the supervisor: on Python 3.11 a cancel
        # that lands as a handshake completes can be swallowed by ``wait_for``, and the
        # supervisor then waits for that new connection to end; it sees ``_closing``
        # and returns once it does.
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        await self._hang_up()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._hang_up()
        await self._opener.let_go()
        self._out.detach()
        self._liveness.cancel()
        error = ClientClosedError("the connection was closed")
        with self._send_lock:
            in_flight = self._session.disconnect()
        _notices.fail(in_flight, error)
        self._out.fail_waiting(error)
        watchers = self._session.watches.drain()
        self._set_state(SessionState.CLOSED)
        _notices.notify_all(watchers, SessionState.CLOSED)
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
        self._out.close()  # anything submitted from now on fails with ClientClosedError
        self._state = SessionState.CLOSED
        sockets: list[Any] = list(self._writer.sockets())
        for wire in (*self._wires(), *self._opener.abandoned):
            if wire is not None and wire.transport is not None:
                sockets.append(wire.transport.get_extra_info("socket"))
        # the socket objects stay as they are (closing one later closes /dev/null)
        fds = [sock.fileno() for sock in sockets if sock is not None]
        _forks.drop_descriptors([*fds, *self._reader.descriptors()])

    def _wires(self) -> list[Wire]:
        """The live wire and the one being set up, those there are."""
        return [w for w in (self._out.wire, self._opener.attempt) if w is not None]

    async def _hang_up(self) -> None:
        for wire in self._wires():
            await wire.hang_up()

    def _loop_or_running(self) -> asyncio.AbstractEventLoop:
        return self._loop or asyncio.get_running_loop()

    # ------------------------------------------------------------ requests

    def submit(
        self, request: object, *, watcher: Watcher | None = None, token: Any = None
    ) -> asyncio.Future[Any]:
        """Send ``request`` now (or queue it while disconnected); the future gets the reply.

        Must be called on the loop's thread. A refused request sets the typed
        ``ZooKeeperError`` as the future's exception; one in flight when the connection
        drops, ``ConnectionLossError``; any after ``close()``, ``ClientClosedError``.
        ``watcher`` sets a watch (exists/getData: data watch; getChildren: child watch;
        AddWatch: a persistent watch) and is called on the loop thread when it fires.
        ``token``: answered instead of a new future (anything with a future's ``done``,
        ``set_result`` and ``set_exception``: a carrier's own, cheaper, reply slot).
        """
        return self._out.submit(request, watcher, token)

    def submit_many(
        self,
        requests: Sequence[object],
        *,
        watcher: Watcher | None = None,
        tokens: Sequence[Any] | None = None,
    ) -> list[asyncio.Future[Any]]:
        """``submit`` each request, pipelined, with all their frames in *one* write.

        ``watcher`` applies to every request that can carry a watch; ``tokens``, one per
        request, as ``submit``'s ``token``.
        """
        return self._out.submit_many(requests, watcher, tokens)

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
        return self._out.submit_from_thread(requests, tokens, watcher)

    def read_until(self, done: Callable[[], bool]) -> None:
        """Read replies on the calling thread until ``done()`` (see ``caller_reads.py``).

        Returns at once when another thread reads, when the connection is not read this
        way (TLS, not connected), or when the rest is the loop's to deliver: the caller
        then waits for its tokens as usual. Only for tokens of ``submit_from_thread``.
        """
        self._reader.read_until(done)

    def count_requests(self, meter: Callable[[], RequestMeter | None]) -> None:
        """Count requests where ``meter()`` says, from now on (the front end's seam)."""
        self._out.count_with(meter)

    # ------------------------------------------------------------ incoming bytes

    def _refused(self, wire: Wire, why: str) -> None:
        """The server refused us in a way that ends the connection (``incoming.py``)."""
        if why == SASL_REQUIRED:
            self._end_for_good(wire, auth_required(self.last_host))
            return
        log.error("the server refused our credentials (AUTH_FAILED); closing")
        self._refuse_start(auth_refused(self.last_host, self._session.auth))
        self._drop_refused(wire)
        self._closer = self._loop_or_running().create_task(self.close())

    # ------------------------------------------------------------ states

    def _set_state(self, state: SessionState) -> None:
        if state is self._state:
            return
        log.debug("session %#x: %s -> %s", self.session_id, self._state.name, state.name)
        self._state = state
        tell_each(self._listeners, state, log)

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
        if self._session.auth:
            await credentials_answered(self._session, self._out)
            if self._started.done():
                return  # a refusal failed start(); close() is under way
        try:
            await self._probe(start_deadline)
        except InvalidArgument as exc:  # a tick_time the servers contradict
            if not self._started.done():
                self._started.set_exception(exc)
            return
        if not self._started.done():
            self._started.set_result(None)
        while not self._out.closing:
            wire = self._out.wire
            if wire is None:
                return  # ended for good (refused); close() is under way
            # not `await wire.lost`: cancelling this task must not cancel that future
            await asyncio.wait((wire.lost,))
            if self._out.closing:
                return
            self._disconnected(wire)
            await self._opener.back_off()
            try:
                await self._establish(None)
            except ConnectionFailedError as exc:  # a refused SASL login: for good
                log.error("%s; closing", exc)
                self._closer = self._loop_or_running().create_task(self.close())
                return

    async def _probe(self, deadline: float) -> None:
        """Standalone or ensemble (the lease rule), and is the chroot there (see probe.py)."""
        ensemble, chroot_exists = await ask_server(self._session, self._out, deadline)
        self.ensemble = ensemble
        if not ensemble:  # standalone: every answer so far counts
            self._proofs.standalone(self.session_timeout, self.last_answered_sent)
        if chroot_exists is not None:
            self.chroot_exists = chroot_exists
        if ensemble:
            asked, granted = self._session.requested_timeout_ms, self._session.timeout_ms
            where = (self._opener.address, self._ssl, deadline, self.last_host, self.hosts)
            changed = await self._proofs.learn_timing(TimingQuestion(*where, asked, granted))
            if changed and self._out.wire is not None:
                self._arm_timer()  # the renewal interval has changed

    def _disconnected(self, wire: Wire) -> None:
        log.info("connection to %s lost (session %#x)", self.last_host, self.session_id)
        self._out.detach()
        self._liveness.cancel()
        self._out.wire_ended(wire)
        with self._send_lock:
            in_flight = self._session.disconnect()
        _notices.fail(in_flight, ConnectionLossError("the connection dropped"))
        self._set_state(SessionState.SUSPENDED)

    def _expired(self, session_id: int, watchers: list[tuple[str, Any]]) -> None:
        log.warning("session %#x expired", session_id)
        error = SessionExpiredError("the session expired before it could be sent")
        self._out.fail_waiting(error)
        self._set_state(SessionState.LOST)
        _notices.notify_all(watchers, SessionState.LOST)

    async def _establish(self, deadline: float | None) -> None:
        """A live session on a new wire (see ``Opener.establish``); ``deadline``: start's."""
        wire, event = await self._opener.establish(deadline)
        self._established(wire, event)

    def _end_for_good(self, wire: Wire, error: ConnectionFailedError) -> None:
        """The server refused us in a way no retry can fix: fail start() (or log), close."""
        starting = self._started is not None and not self._started.done()
        log.log(logging.INFO if starting else logging.ERROR, "%s", error)  # start() raises it
        self._refuse_start(error)
        self._drop_refused(wire)
        self._closer = self._loop_or_running().create_task(self.close())

    def _drop_refused(self, wire: Wire) -> None:
        """After AUTH_FAILED the server ends the session: fail what is in flight, hang up
        (close() then has no closeSession to send)."""
        refused = AuthFailedError("the server refused our credentials")
        self._out.wire_ended(wire)
        with self._send_lock:
            in_flight = self._session.disconnect()
        _notices.fail(in_flight, refused)
        if self._out.detach(wire):
            self._liveness.cancel()
        self._opener.abandon(wire)

    def _refuse_start(self, error: ConnectionFailedError) -> None:
        started = self._started
        if started is not None and not started.done():
            started.set_exception(error)

    def _established(self, wire: Wire, event: Established) -> None:
        assert wire.transport is not None
        self._out.attach(wire)
        timeout = event.timeout_ms / 1000
        self._liveness.set_intervals(timeout)
        now = time.monotonic()
        self._liveness.connected(now)
        with self._send_lock:
            for frame in self._session.restore((None, now)):
                self._out.write(frame)
        self._out.flush()
        if self.thread_writes and self._ssl is None:  # a TLS object is not thread-safe
            self._writer.start(wire, self.last_host)
            if self.thread_reads:
                self._reader.start(wire)
        self._arm_timer()
        log.info(
            "session %#x %s on %s (timeout %.3f s)",
            event.session_id,
            "resumed" if event.resumed else "established",
            self.last_host,
            timeout,
        )
        self._set_state(SessionState.CONNECTED)

    # ------------------------------------------------------------ the liveness timer

    def _arm_timer(self) -> None:
        self._heartbeat.arm(self._loop_or_running())
