"""Our ``Connection`` as the asyncio driver sees it: on the caller's own event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from zklocks._core import events as _events
from zklocks._core.deadline import Deadline
from zklocks._core.ops import TIMED_OUT, GetData, Reply, Request
from zklocks._protocol.errors import ClientClosedError, NoNodeError
from zklocks._transport.adapter import facts_of, reply_of, submit_all
from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionState, Watcher, WatchEvent, WatchKind

T = TypeVar("T")


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a reply seen even if its caller was cancelled before reading it."""
    if not future.cancelled():
        future.exception()


async def _all_answered(futures: list[asyncio.Future[Any]]) -> None:
    """Wait until every future is done. A cancel of the caller cancels only the wait: the
    requests go on to their replies, which are then marked seen (no "exception never
    retrieved"). One gate future, not ``asyncio.wait``: that builds sets, a waiter and a
    callback per call and removes them after, about a tenth of the client's CPU per
    request in the many-locks benchmark."""
    gate = futures[0].get_loop().create_future()
    left = len(futures)

    def answered(future: asyncio.Future[Any]) -> None:
        nonlocal left
        _retrieve(future)
        left -= 1
        if left == 0 and not gate.done():
            gate.set_result(None)

    for future in futures:
        future.add_done_callback(answered)
    await gate


def _requests_meter() -> _events.Sink | None:
    """Where the connection counts requests: the metrics sink, once one is enabled."""
    return _events.sink


class AsyncSession:
    """One connection; every method runs on the loop the client was started on."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        connection.meter = _requests_meter  # count requests once metrics are enabled
        self.facts = facts_of(connection)
        self.closed = False
        self._connected = asyncio.Event()
        self._apart: set[asyncio.Task[Any]] = set()  # cleanups running apart from callers
        connection.add_state_listener(self._track_connected)

    def _track_connected(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()

    def mark_connected(self) -> None:
        """After start(): connected, unless the connection is gone already (one that died
        at birth); a request with a deadline must not be queued for the next one."""
        self._track_connected(self.connection.state)

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        """Send back to back (pipelined) and wait for every reply."""
        if self.closed or not requests:  # nothing to send: an empty list
            return [ClientClosedError() for _ in requests]
        # Woken by a connection that is gone again (one that died at birth), wait on:
        # submitted now, the requests would be queued for the next one, past the deadline.
        while deadline is not None and not self._connected.is_set():
            remaining = Deadline(deadline, self.facts.clock).remaining()
            try:
                await asyncio.wait_for(self._connected.wait(), remaining)
            except TimeoutError:
                return [TIMED_OUT for _ in requests]  # never sent
        futures = submit_all(self.connection, requests, watcher)
        await _all_answered(futures)
        return [reply_of(future) for future in futures]

    def in_background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a task apart from the caller (a flow's cleanup, which must not
        hold its caller past the call's deadline); ``finish_background()`` awaits it."""
        task = asyncio.get_running_loop().create_task(work)
        self._apart.add(task)
        task.add_done_callback(self._apart_done)
        return task

    def _apart_done(self, task: asyncio.Task[Any]) -> None:
        self._apart.discard(task)
        _retrieve(task)  # its caller may have left (the driver reports that case)

    async def finish_background(self) -> None:
        """After the connection is closed: await the cleanups still running (every
        request they make fails at once now), so none outlives the client."""
        while self._apart:
            await asyncio.wait(set(self._apart))

    def watch_node(self, path: str, watcher: Watcher) -> None:
        if self.closed:
            watcher(WatchEvent(WatchKind.CLOSED, path))
            return
        future = self.connection.submit(GetData(path), watcher=watcher)

        def answered(future: asyncio.Future[Any]) -> None:
            if not future.cancelled() and isinstance(future.exception(), NoNodeError):
                watcher(WatchEvent(WatchKind.DELETED, path))

        future.add_done_callback(answered)

    def session_id(self) -> int:
        return self.connection.session_id

    def credentials(self) -> tuple[int, bytes]:
        return self.connection.session_id, self.connection.session_password
