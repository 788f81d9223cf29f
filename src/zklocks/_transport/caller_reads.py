"""The sync client's read path: the caller that waits for a reply reads the socket itself.

Theory of operation
-------------------
A blocking caller writes its own requests (``direct.py``). If the loop thread then read
the reply, every answer would cross threads: the loop wakes, parses, releases the
caller's latch, and the caller wakes (two switches and a GIL hand-off per reply, more
among many threads). Instead, on an established plain-TCP connection, whoever waits
for a reply may hold the *reader role* and read the socket itself.

* **One reader at a time.** The role is a holder under one mutex: a caller's thread, or
  the loop's. A caller whose latch is not done takes it if it is free (never waiting
  for it); otherwise it waits on its latch as before, and the holder (or the loop)
  answers it. The holder reads until its own reply is in, then gives the role back.
* **The loop reads when no caller does, and sleeps while one does.** The loop does not
  watch the socket itself: it watches a private epoll set holding a duplicate of it.
  A caller taking the role disables the socket in that set (one ``epoll_ctl``), so a
  reply it is reading does not wake the loop too; giving the role back enables it, and
  bytes that came meanwhile wake the loop at once. Only the role's holder touches the
  set, under the mutex, so it is never enabled while a caller reads. (The transport's
  own reading is paused for the wire's life.)
* **Every frame is dispatched as the loop would, in order.** The holder parses into
  one queue, the *sink*, shared by all holders. From its head a caller settles what is
  safe on any thread: replies to callers' latches (thread-safe), and the replies to the
  loop's pings and renewing syncs (nothing to tell but the lease rule). The first event
  it cannot settle (a notification, an asyncio future's reply, an auth refusal) stops
  it: that event *and every later one* stay in the sink for the loop, and a caller
  never reads while the sink is not empty. So replies stay in xid order and
  notifications in zxid order, and a notification a caller read reaches the watchers
  the loop would have called, on the loop, before anything read after it. The loop
  empties the sink (``drain``) before it reads again.
* **The lease rule and liveness see every answer.** The holder tells ``heard`` the
  receive time of each read and the lease rule each reply's send and receive time, in
  stream order: the role serializes them (one holder at a time, caller or loop).
  Timers, pings, renewing syncs and lost-callbacks stay on the loop, which is never
  blocked by a caller: it reads whenever the role is free.
* **Nothing is lost when a reader is interrupted.** ``Session.receive`` puts each event
  in the sink *before* the session forgets the request it answers or the watch it
  fires; the holder removes an event from the sink only after settling it. A Ctrl-C
  (or ``hold()``'s ``LockLost``) anywhere in a caller's read therefore leaves every
  event either in the sink (the loop delivers it) or still in flight (failed with the
  connection, or, a watch, restored on the next one). Bytes read but not parsed would
  tear the stream: then the connection is dropped, as for a torn write (``direct.py``),
  and every request in flight fails with ``ConnectionLossError``. The role is given
  back in a ``finally`` that an interruption cannot cut short (it retries).
* **A drop, close() or a reset wakes the reader.** The loop ends a wire by setting
  ``stopping``, writing the wake-up descriptor the holder polls with the socket, and
  waiting (briefly) for the role; then it delivers what is left in the sink, and fails
  what is in flight as on any drop. A reset or EOF a caller reads is handed to the loop
  (it aborts the wire); the caller then waits on its latch, which the loop fails.

TLS keeps the loop's reading (an SSL object is not thread-safe), and so does any call
handed to the loop (not yet connected, a write waiting for the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from zklocks._protocol.errors import MarshallingError, SessionClosedRequireSaslAuthError
from zklocks._protocol.session import Event, ReceiveError, Session, WireReply
from zklocks._transport.wire import Wire

__all__ = ["CallerReads"]

log = logging.getLogger("zklocks.connection")

_CHUNK = 256 * 1024  # bytes per read
_BACKSTOP_MS = 1000  # a poll never sleeps longer (a missed wake-up costs at most this)
# On the main thread, a signal that lands just before the poll begins is acted on within
# this (``_core.threads.SIGNAL_SLICE``'s reason; the transport cannot import the core)
_MAIN_SLICE_MS = 200
_HAND_BACK = 5.0  # seconds the loop waits for a woken reader to give the role back
_RETRIES = 4  # tries of a step that an asynchronous exception must not cut short


class _Stamped:
    """The sink: events in stream order, each with the time its bytes were read."""

    __slots__ = ("items", "now")

    def __init__(self) -> None:
        self.items: deque[tuple[Event, float]] = deque()
        self.now = 0.0

    def append(self, event: Event) -> None:
        self.items.append((event, self.now))


class CallerReads:
    """The reader role of one connection: its holder, the sink, the loop's watch."""

    def __init__(
        self,
        session: Session,
        loop: Callable[[], asyncio.AbstractEventLoop],
        on_data: Callable[[Wire, bytes], None],
        deliver: Callable[[Wire, Event, float], object],
        heard: Callable[[float], None],
        answered: Callable[[float, float, bool], None],
    ) -> None:
        self._session = session
        self._loop = loop
        self._on_data = on_data  # the loop's own reading: parse and deliver (the connection)
        self._deliver = deliver  # one event, on the loop, as the connection delivers it
        self._heard = heard  # liveness: bytes came in at ...
        self._answered = answered  # the lease rule: (sent, answered, through_leader)
        self._mutex = threading.Lock()
        self._released = threading.Condition(self._mutex)  # the role came free (stop waits)
        self._holder: int | None = None  # the thread (a caller's or the loop's) reading
        self._stopping = False  # the wire is ending: nobody takes the role
        self._wire: Wire | None = None
        self._socket: socket.socket | None = None  # a dup of the wire's plain-TCP socket
        self._watch: Any = None  # the loop's epoll set (select.epoll) holding ``_socket``
        self._poll: Any = None  # what a caller polls (select.poll): the socket, the wake-up
        self._wake = -1  # an eventfd the holder polls with the socket: the loop's wake-up
        self.sink = _Stamped()

    def descriptors(self) -> list[int]:
        """Every descriptor this reader has open (for a forked child to let go of)."""
        fds = [self._wake]  # (-1: none)
        if self._socket is not None:
            fds.append(self._socket.fileno())
        if self._watch is not None:
            fds.append(self._watch.fileno())
        return fds

    @property
    def reading(self) -> bool:
        """Is a caller's thread (or the loop) holding the role now?"""
        return self._holder is not None

    # ------------------------------------------------------------ on the loop

    def start(self, wire: Wire) -> None:
        """Read ``wire`` through the role from now on (it is established, plain TCP)."""
        transport = wire.transport
        assert transport is not None
        raw = transport.get_extra_info("socket")
        if raw is None or transport.is_closing():
            return  # dead at birth: the supervisor sees ``lost`` and reconnects
        made: list[Any] = []  # closed again if a later step fails
        try:
            sock = socket.socket(fileno=os.dup(raw.fileno()))
            made.append(sock)
            watch = select.epoll()
            made.append(watch)
            watch.register(sock.fileno(), select.EPOLLIN)
            wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except Exception:
            # No epoll or eventfd here (a sandbox that forbids them): the loop goes on
            # reading every reply, as on TLS; slower, never wrong.
            log.debug("callers' threads cannot read this connection", exc_info=True)
            for thing in made:
                thing.close()
            return
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        poll.register(wake, select.POLLIN)
        with self._mutex:
            self._wire, self._socket, self._watch, self._poll = wire, sock, watch, poll
            self._wake = wake
            self._stopping = False
        transport.pause_reading()  # the role reads this socket now
        self._loop().add_reader(watch.fileno(), self._loop_reads, wire)

    def stop(self, wire: Wire) -> None:
        """``wire`` is ending: wake a caller reading it, wait for the role, deliver what
        the sink holds, and let go of the socket. On the loop."""
        me = threading.get_ident()
        with self._mutex:
            if self._wire is not wire or wire is None:
                return
            self._stopping = True
            if self._holder is not None and self._holder != me:
                os.eventfd_write(self._wake, 1)
                deadline = time.monotonic() + _HAND_BACK
                while self._holder is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:  # a bug: never wait for ever on the loop
                        log.error("a caller's thread kept the reader role; taking it back")
                        self._holder = None
                        break
                    self._released.wait(left)
            if self._holder == me:
                return  # inside the loop's own read: it finishes the stop when it is done
        self._finish_stop(wire)

    def _finish_stop(self, wire: Wire) -> None:
        with self._mutex:
            if self._wire is not wire:
                return
            sock, watch, wake = self._socket, self._watch, self._wake
            self._wire = self._socket = self._watch = self._poll = None
            self._wake = -1
        self.drain_now(wire)  # what was read before the end is delivered before the failures
        with contextlib.suppress(Exception):
            self._loop().remove_reader(watch.fileno())
        watch.close()
        if sock is not None:
            sock.close()
        os.close(wake)

    def drain_now(self, wire: Wire) -> None:
        """Deliver every event the sink holds, read from ``wire`` (on the loop, the role
        free or the loop's)."""
        items = self.sink.items
        while items:
            event, now = items[0]
            try:
                self._deliver(wire, event, now)
            finally:
                items.popleft()

    def _hold_on_loop(self) -> bool:
        with self._mutex:
            if self._holder is not None:
                return False  # a caller reads; it posts a drain when it gives the role back
            self._holder = threading.get_ident()
            return True

    def _free_on_loop(self) -> None:
        with self._mutex:
            self._holder = None
            wire = self._wire if self._stopping else None
        if wire is not None:
            self._finish_stop(wire)

    def _drain(self) -> None:
        """Posted by a caller that left events in the sink for the loop."""
        if not self._hold_on_loop():
            return
        try:
            wire = self._wire
            if wire is not None:
                self.drain_now(wire)
        finally:
            self._free_on_loop()

    def _loop_reads(self, wire: Wire) -> None:
        """The loop's epoll set says the socket is readable, and no caller reads it."""
        if not self._hold_on_loop():
            return
        try:
            sock = self._socket
            if sock is None or self._wire is not wire or self._stopping:
                return
            self.drain_now(wire)
            try:
                data = sock.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                _lost(wire, exc)
                return
            if not data:
                _lost(wire, None)
                return
            self._on_data(wire, data)
        finally:
            self._free_on_loop()

    # ------------------------------------------------------------ in callers' threads

    def read_until(self, done: Callable[[], bool]) -> None:
        """Read on this thread, holding the role, until ``done()``; return at once when
        the role is taken or when the rest is the loop's (the caller then waits on its
        latch, answered by whoever reads)."""
        me = threading.get_ident()
        torn = False
        reading: Wire | None = None
        try:
            if not self._take(me):
                return
            wire, sock, poll = self._wire, self._socket, self._poll
            if wire is None or sock is None or poll is None:
                return
            reading = wire
            sink = self.sink
            items = sink.items
            wake = self._wake
            main = threading.current_thread() is threading.main_thread()
            slice_ms = _MAIN_SLICE_MS if main else _BACKSTOP_MS
            while not done() and not items and not self._stopping:
                ready = poll.poll(slice_ms)
                if not ready:
                    continue
                if any(fd == wake for fd, _ in ready):
                    continue  # the loop is ending the wire: ``_stopping`` says so
                torn = True
                try:
                    data = sock.recv(_CHUNK)
                except (BlockingIOError, InterruptedError):
                    torn = False
                    continue
                except OSError as exc:
                    torn = False
                    self._end(_lost, wire, exc)
                    return
                if not data:
                    torn = False
                    self._end(_lost, wire, None)
                    return
                now = time.monotonic()
                sink.now = now
                self._heard(now)
                try:
                    self._session.receive(data, sink)
                except MarshallingError as exc:
                    # What came before the broken bytes is in the sink; the loop drops the
                    # connection (and delivers them first).
                    if not isinstance(exc, ReceiveError):
                        raise
                    torn = False
                    self._end(_broken, wire, exc)
                    return
                torn = False
                self._settle_head()
        except BaseException:
            if torn and reading is not None:  # bytes read and not parsed: the stream is torn
                torn_wire = reading
                _surely(lambda: self._end(_lost, torn_wire, None))
            raise
        finally:
            _surely(lambda: self._give(me))

    def _settle_head(self) -> None:
        """Settle, from the sink's head, what is safe on this thread; stop at the first
        event that is the loop's (it and all after it wait for the loop's drain)."""
        items = self.sink.items
        answered = self._answered
        while items:
            event, now = items[0]
            if type(event) is not WireReply:
                return
            token, sent = event.token
            if token is None:
                if not event.ok:
                    return  # a refusal of the loop's own (AUTH_FAILED, ...)
            elif not getattr(token, "threadsafe", False) or (
                not event.ok and isinstance(event.value, SessionClosedRequireSaslAuthError)
            ):
                return
            answered(sent, now, event.through_leader)
            if token is not None and not token.done():
                if event.ok:
                    token.set_result(event.value)
                else:
                    token.set_exception(event.value)
            items.popleft()

    def _take(self, me: int) -> bool:
        with self._mutex:
            if self._holder is not None or self._stopping or self._watch is None or self.sink.items:
                return False
            self._holder = me  # first: an interruption after it still gives the role back
            self._watch.modify(self._socket.fileno(), 0)  # type: ignore[union-attr]
        return True

    def _give(self, me: int) -> None:
        """Give the role back (idempotent): the loop watches the socket again, and
        drains what this caller left in the sink."""
        with self._mutex:
            if self._holder != me:
                return
            if not self._stopping and self._watch is not None and self._socket is not None:
                self._watch.modify(self._socket.fileno(), select.EPOLLIN)
            self._holder = None
            if self._stopping:
                self._released.notify_all()
            left = bool(self.sink.items)
        if left:
            self._post(self._drain)

    def _end(self, how: Callable[[Wire, Any], None], wire: Wire, error: Any) -> None:
        """As the holder: nobody reads ``wire`` again, and the loop ends it (``how``).

        At once, under the role: bytes read and not parsed would otherwise be followed
        by the next read's, and a notification lost in them could be passed over by a
        reply parsed after it (its zxid then hides the change from the next
        connection's setWatches)."""
        with self._mutex:
            self._stopping = True
        self._post(how, wire, error)

    def _post(self, fn: Callable[..., object], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to do
            self._loop().call_soon_threadsafe(fn, *args)


def _lost(wire: Wire, error: Exception | None) -> None:
    """On the loop: the socket said EOF or failed; end the wire as the transport would."""
    if error is not None and wire.error is None:
        wire.error = error
    wire.abort()


def _broken(wire: Wire, error: Exception) -> None:
    log.warning("dropping the connection: %s", error)
    wire.abort()


def _surely(step: Callable[[], None]) -> None:
    """Run ``step`` to its end even if an asynchronous exception (Ctrl-C, ``hold()``'s
    ``LockLost``) lands in it: it is retried (it must be idempotent), and the exception
    is raised once it is done."""
    interrupted: BaseException | None = None
    for _attempt in range(_RETRIES):
        try:
            step()
            break
        except BaseException as exc:
            interrupted = exc  # an error of its own repeats: raised after the last try
    if interrupted is not None:
        raise interrupted
