"""A ``SyncSession`` on our own asyncio ``Connection``, run on one private loop thread.

Every sync ``Client`` owns one event-loop thread and one connection on it: never a
thread per waiter. A blocking call hands its requests to the loop (submitted back to
back, so they are pipelined) and waits on a ``concurrent.futures.Future`` for all the
replies; waiting threads are the callers' own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl as _ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any

from zklocks._core.errors import InvalidArgument
from zklocks._core.ops import TIMED_OUT, GetData, Reply, Request
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionFailedError,
    NoNodeError,
    ZooKeeperError,
)
from zklocks._transport.adapter import connection_failed, facts_of, reply_of, submit_all
from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionState, StateListener, Watcher, WatchEvent, WatchKind


class _Latch:
    """One caller waits for one answer from the loop thread.

    Lighter than a ``concurrent.futures.Future`` (no Condition, no callbacks list): a
    lock taken at birth and released by the answer. Waiting on it is interruptible
    (Ctrl-C), and the driver then throws the interruption into the flow.
    """

    __slots__ = ("_answered", "_error", "_lock", "_replies", "count")

    def __init__(self, count: int) -> None:
        self.count = count
        self._lock = threading.Lock()
        self._lock.acquire()
        self._replies: list[Reply] = []
        self._error: BaseException | None = None
        self._answered = False

    def set(self, replies: list[Reply]) -> None:
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


class NativeSession:
    """One connection on one loop thread, seen through the ``SyncSession`` interface."""

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: float,
        connect_timeout: float,
        ensemble_lag: float | None = None,
        ssl: _ssl.SSLContext | None = None,
        auth: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        # ``connect_timeout`` bounds the whole start; each attempt gets a share of it
        # (the connection's own per-attempt bound), so a frozen member costs a fraction.
        self._connection = Connection(
            hosts,
            session_timeout=session_timeout,
            ensemble_lag=ensemble_lag,
            ssl=ssl,
            auth=auth,
        )
        self._connect_timeout = connect_timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="zklocks-connection", daemon=True
        )
        self._closed = False
        self._pending: set[_Latch] = set()  # calls handed to the loop, not yet answered
        self._pending_lock = threading.Lock()
        self._connected = asyncio.Event()
        self._connection.add_state_listener(self._track_connected)
        self.facts = facts_of(self._connection)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
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
        self._loop.call_soon_threadsafe(self._connected.set)

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
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        if not self._loop.is_closed():
            self._loop.close()
        with self._pending_lock:
            stranded, self._pending = self._pending, set()
        for latch in stranded:  # handed to the loop as it stopped: never to be answered
            latch.set([ClientClosedError() for _ in range(latch.count)])

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- what the driver asks -------------------------------------------------------------

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        if self._closed:
            return [ClientClosedError() for _ in requests]
        if not requests:
            return []
        done = _Latch(len(requests))
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
        """Cut off: send once reconnected, or answer TIMED_OUT (never sent) at the deadline."""
        try:
            remaining = deadline - self._loop.time()
            await asyncio.wait_for(self._connected.wait(), max(0.0, remaining))
        except asyncio.TimeoutError:
            done.set([TIMED_OUT for _ in requests])
            return
        self._submit(requests, watcher, done)

    def _submit(self, requests: Sequence[Request], watcher: Watcher | None, done: _Latch) -> None:
        try:
            futures = submit_all(self._connection, requests, watcher)
        except BaseException as exc:
            done.fail(exc)
            raise
        pending = [len(futures)]

        def one_answered(_future: asyncio.Future[Any]) -> None:
            pending[0] -= 1
            if pending[0] == 0:
                try:
                    done.set([reply_of(future) for future in futures])
                except BaseException as exc:
                    done.fail(exc)

        for future in futures:
            future.add_done_callback(one_answered)

    def watch_node(self, path: str, watcher: Watcher) -> None:
        if self._closed:
            watcher(WatchEvent(WatchKind.CLOSED, path))
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
            if isinstance(error, NoNodeError):
                watcher(WatchEvent(WatchKind.DELETED, path))
            elif error is not None and not isinstance(error, ZooKeeperError):
                raise error

        future.add_done_callback(answered)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        handles: list[asyncio.TimerHandle] = []
        cancelled: list[bool] = []

        def arm() -> None:
            if not cancelled:
                handles.append(self._loop.call_later(delay, fn))

        def cancel() -> None:
            cancelled.append(True)
            if handles and not self._loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(handles[0].cancel)

        if not self._closed:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: no timer
                self._loop.call_soon_threadsafe(arm)
        return cancel

    def session_id(self) -> int:
        return self._connection.session_id

    def credentials(self) -> tuple[int, bytes]:
        """(session id, password): lets a test make the server expire this session."""
        return self._connection.session_id, self._connection.session_password

    def add_state_listener(self, fn: StateListener) -> Callable[[], None]:
        return self._connection.add_state_listener(fn)

    def _track_connected(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
