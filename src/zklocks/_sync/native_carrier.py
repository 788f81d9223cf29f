"""A ``SyncCarrier`` on our own asyncio ``Connection``, run on one private loop thread.

Every sync ``Client`` owns one event-loop thread and one connection on it: never a
thread per waiter. While the connection is up (plain TCP), a blocking call writes its
requests to the socket itself, back to back (pipelined), and reads the replies itself
while no other thread reads (``_transport/caller_reads.py``); else it waits on a
``_Latch`` that whoever reads (another caller, or the loop) releases once all are
answered: no hand-off to the loop per call. Otherwise (TLS, cut off, connecting, closing) the call
is handed to the loop, which sends or queues it as the connection's state says.
Timers (``call_later``) share one loop timer, so arming one costs no hand-off either.
A flow's cleanup that must not hold its caller runs on a thread of its own
(``in_background``); ``close()`` joins those threads after the connection is closed,
when every request they make fails at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from zklocks._core.carrying import Replies, never_sent, requests_meter, watch_answer
from zklocks._core.deadline import Deadline
from zklocks._core.ops import Reply, Request
from zklocks._core.threads import background_thread
from zklocks._errors import InvalidArgument
from zklocks._frontend.options import NO_SECURITY, ClientOptions, ConnectionSecurity
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionFailedError,
    ZooKeeperError,
)
from zklocks._protocol.records import GetData
from zklocks._transport import forks
from zklocks._transport.adapter import connection_failed, facts_of, submit_all
from zklocks._vocabulary import SessionListener, SessionState, Watcher, WatchEvent, WatchKind

T = TypeVar("T")
_JOIN_APART = 5.0  # how long close() waits for each cleanup thread (they end at once)


class _Latch(Replies):
    """One caller waits for the answers to its requests (``Replies``), given by whoever
    reads: the caller itself, another caller, or the loop thread.

    Lighter than a ``concurrent.futures.Future`` (no Condition, no callbacks list): a
    lock taken at birth and released by the answer. Waiting on it is interruptible
    (Ctrl-C), and the driver then throws the interruption into the flow.
    """

    __slots__ = ("_answered", "_error", "_left", "_lock", "_replies", "count")
    threadsafe = True  # a caller reading the socket may answer it (``caller_reads.py``)

    def __init__(self, count: int) -> None:
        self.count = count
        self._lock = threading.Lock()
        self._lock.acquire()
        self._replies: list[Reply] = [None] * count
        self._left = count
        self._error: BaseException | None = None
        self._answered = False

    def done(self) -> bool:
        return self._answered

    def answer(self, index: int, reply: Reply) -> None:
        """One request's reply (whoever reads answers them one at a time)."""
        if self._answered:
            return
        self._replies[index] = reply
        self._left -= 1
        if self._left == 0:
            self._answered = True
            self._lock.release()

    def set(self, replies: list[Reply]) -> None:
        """Every reply at once (never sent in time; answered by ``close()``)."""
        if not self._answered:
            self._answered = True
            self._replies = replies
            self._lock.release()

    def fail(self, error: BaseException) -> None:
        if not self._answered:
            self._answered = True
            self._error = error
            self._lock.release()

    def wait(self) -> list[Reply]:
        self._lock.acquire()
        if self._error is not None:
            raise self._error
        return self._replies


class _Timers:
    """``call_later`` from any thread on one loop timer: the earliest entry's.

    Arming a timer later than the armed one (a lease's node watch, every grant) only
    pushes onto a heap; the loop is woken only for an earlier one. Cancelling marks
    the entry; it is dropped when due. Functions run on the loop thread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, list[Callable[[], None] | None]]] = []
        self._mutex = threading.Lock()
        self._order = itertools.count()
        self._armed: float | None = None  # when the loop timer fires (or is about to be set)
        self._handle: asyncio.TimerHandle | None = None

    def add(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        due = time.monotonic() + delay  # the loop's clock (asyncio uses time.monotonic)
        entry: list[Callable[[], None] | None] = [fn]
        with self._mutex:
            heapq.heappush(self._heap, (due, next(self._order), entry))
            wake = self._armed is None or due < self._armed
            if wake:
                self._armed = due
        if wake:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: no timer
                self._loop.call_soon_threadsafe(self._arm)

        def cancel() -> None:
            entry[0] = None

        return cancel

    def _arm(self) -> None:
        with self._mutex:
            due = self._heap[0][0] if self._heap else None
            self._armed = due
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if due is not None:
            self._handle = self._loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._handle = None
        now = self._loop.time()
        due: list[Callable[[], None]] = []
        with self._mutex:
            heap = self._heap
            while heap and heap[0][0] <= now:
                fn = heapq.heappop(heap)[2][0]
                if fn is not None:
                    due.append(fn)
            self._armed = None
        self._arm()
        for fn in due:
            fn()


class NativeSyncCarrier:
    """One connection on one loop thread, seen through the ``SyncCarrier`` interface."""

    def __init__(self, options: ClientOptions, security: ConnectionSecurity = NO_SECURITY) -> None:
        # ``connect_timeout`` bounds the whole start; each attempt gets a share of it
        # (the connection's own per-attempt bound), so a frozen member costs a fraction.
        self._connection = security.connection(options)
        self._connection.thread_writes = True  # callers write their own requests
        self._connection.thread_reads = True  # and read the replies (``caller_reads.py``)
        self._connection.count_requests(requests_meter)  # once metrics are enabled
        self._connect_timeout = options.connect_timeout
        self._loop = asyncio.new_event_loop()
        self._thread = background_thread(self._loop.run_forever, "zklocks-connection")
        self._closed = False
        self._pending: set[_Latch] = set()  # calls handed to the loop, not yet answered
        self._pending_lock = threading.Lock()
        self._apart: set[threading.Thread] = set()  # cleanups running apart from callers
        self._connected = asyncio.Event()
        self._connection.add_state_listener(self._track_connected)
        self._timers = _Timers(self._loop)
        self.facts = facts_of(self._connection)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        forks.track(self)  # from before the thread exists: a fork meanwhile is covered too
        self._thread.start()
        try:
            self._run(self._connection.start(self._connect_timeout))
        except ConnectionFailedError as exc:
            self._shut_down()
            raise connection_failed(exc) from exc
        except BaseException:
            self._shut_down()
            raise
        if self._connection.chroot_exists is False:
            self.close()
            raise InvalidArgument(
                f"chroot {self._connection.chroot} does not exist on the server; "
                "create it first, or remove it from the hosts string"
            )
        # Connected, unless the connection is gone already (one that died at birth): a
        # request with a deadline must not be queued for the next one.
        self._loop.call_soon_threadsafe(lambda: self._track_connected(self._connection.state))

    def close(self) -> None:
        if self._closed:
            return
        with self._pending_lock:
            self._closed = True
        if self._thread.is_alive():
            self._run(self._connection.close())
        self._shut_down()

    def _shut_down(self) -> None:
        with self._pending_lock:
            self._closed = True
        forks.untrack(self)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        if not self._loop.is_closed():
            self._loop.close()
        with self._pending_lock:
            stranded, self._pending = self._pending, set()
        for latch in stranded:  # handed to the loop as it stopped: never to be answered
            latch.set([ClientClosedError() for _ in range(latch.count)])
        with self._pending_lock:
            apart = list(self._apart)
        for thread in apart:  # every call they make now answers ClientClosedError
            thread.join(_JOIN_APART)

    def _after_fork_in_child(self) -> None:
        """(``forks``) In a forked child the loop thread is gone, and the connection is
        the parent's. Every call now answers ``ClientClosedError`` at once and ``close()``
        returns at once; the sockets and the loop's epoll descriptor (shared with the
        parent's loop) are let go quietly. The loop is never run, stopped or closed here.
        """
        self._closed = True
        self._pending = set()  # the parent's callers' latches: nobody waits for them here
        self._apart = set()  # threads of the parent's: none runs here
        self._connection.forget_after_fork()
        selector = getattr(self._loop, "_selector", None)  # asyncio names it privately
        fileno = getattr(selector, "fileno", None)
        if callable(fileno):
            forks.drop_descriptors([fileno()])
        forks.keep(self)

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- what the driver asks -------------------------------------------------------------

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        if self._closed or not requests:  # nothing to send: an empty list
            return [ClientClosedError() for _ in requests]
        done = _Latch(len(requests))
        if self._connection.submit_from_thread(requests, done.tokens(), watcher):
            # Sent from this thread. This thread reads the replies while no other does;
            # else whoever reads answers the latch, or the loop fails it with the
            # connection (a drop, close()), exactly as it does the futures below.
            self._connection.read_until(done.done)
            return done.wait()
        with self._pending_lock:  # close() answers whatever the stopped loop never will
            if self._closed:
                return [ClientClosedError() for _ in requests]
            self._pending.add(done)
            self._loop.call_soon_threadsafe(self._call, requests, deadline, watcher, done)
        try:
            return done.wait()
        finally:
            with self._pending_lock:
                self._pending.discard(done)

    def _call(
        self,
        requests: Sequence[Request],
        deadline: float | None,
        watcher: Watcher | None,
        done: _Latch,
    ) -> None:
        if deadline is None or self._connected.is_set():
            self._submit(requests, watcher, done)
        else:
            self._loop.create_task(self._submit_when_connected(requests, deadline, watcher, done))

    async def _submit_when_connected(
        self,
        requests: Sequence[Request],
        deadline: float,
        watcher: Watcher | None,
        done: _Latch,
    ) -> None:
        """Cut off: send once reconnected, or answer TIMED_OUT (never sent) at the deadline.

        Woken by a connection that is gone again (one that died at birth), it waits on:
        handed to the connection now, the request would be queued for the next one,
        past its deadline.
        """
        while not self._connected.is_set():
            try:
                remaining = Deadline(deadline, self.facts.clock).remaining()
                await asyncio.wait_for(self._connected.wait(), remaining)
            except TimeoutError:
                done.set(never_sent(requests))
                return
        self._submit(requests, watcher, done)

    def _submit(self, requests: Sequence[Request], watcher: Watcher | None, done: _Latch) -> None:
        """On the loop: send ``requests``, the latch's slots answered as futures would be."""
        try:
            submit_all(self._connection, requests, watcher, done.tokens())
        except BaseException as exc:
            done.fail(exc)
            raise

    def in_background(self, work: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``work`` on a thread of its own; ``close()`` joins it. Not a pool: cleanup
        is rare (a timeout, an error), and an idle worker would outlive every use."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def apart() -> None:
            try:
                done.set_result(work())
            except BaseException as exc:  # the caller, or the driver's log, reads it
                done.set_exception(exc)
            finally:
                with self._pending_lock:
                    self._apart.discard(thread)

        thread = background_thread(apart, "zklocks-cleanup")
        with self._pending_lock:
            closed = self._closed
            if not closed:
                self._apart.add(thread)
        if closed:  # nothing to wait for: every request fails at once
            apart()
        else:
            thread.start()
        return done

    def watch_node(self, path: str, watcher: Watcher) -> None:
        if self._closed:
            watcher(WatchEvent(WatchKind.CLOSED, path))
            return
        if threading.get_ident() == self._thread.ident:  # a timer's or watcher's own call
            self._watch_node(path, watcher)
            return
        try:
            self._loop.call_soon_threadsafe(self._watch_node, path, watcher)
        except RuntimeError:  # stopped by another thread just now
            watcher(WatchEvent(WatchKind.CLOSED, path))

    def _watch_node(self, path: str, watcher: Watcher) -> None:
        future = self._connection.submit(GetData(path), watcher=watcher)

        def answered(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                return
            error = future.exception()
            event = watch_answer(path, error)
            if event is not None:
                watcher(event)
            elif error is not None and not isinstance(error, ZooKeeperError):
                raise error

        future.add_done_callback(answered)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        if self._closed:
            return lambda: None
        return self._timers.add(delay, fn)

    def session_id(self) -> int:
        return self._connection.session_id

    def credentials(self) -> tuple[int, bytes]:
        """(session id, password): lets a test make the server expire this session."""
        return self._connection.session_id, self._connection.session_password

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]:
        return self._connection.add_state_listener(fn)

    def _track_connected(self, state: SessionState) -> None:
        # set: calls go ahead (a closed connection, e.g. a login refused on reconnect,
        # answers them ClientClosedError at once instead of at their deadline)
        if state in (SessionState.CONNECTED, SessionState.CLOSED):
            self._connected.set()
        else:
            self._connected.clear()
