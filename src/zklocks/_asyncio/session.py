"""Our ``Connection`` as the asyncio driver sees it: on the caller's own event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from zklocks._core.ops import TIMED_OUT, GetData, Reply, Request
from zklocks._protocol.errors import ClientClosedError, NoNodeError
from zklocks._transport.adapter import facts_of, reply_of, submit_all
from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionState, Watcher, WatchEvent, WatchKind


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a reply seen even if its caller was cancelled before reading it."""
    if not future.cancelled():
        future.exception()


class AsyncSession:
    """One connection; every method runs on the loop the client was started on."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.facts = facts_of(connection)
        self.closed = False
        self._connected = asyncio.Event()
        connection.add_state_listener(self._track_connected)

    def _track_connected(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()

    def mark_connected(self) -> None:
        self._connected.set()

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        """Send back to back (pipelined) and wait for every reply."""
        if self.closed:
            return [ClientClosedError() for _ in requests]
        if not requests:
            return []
        if deadline is not None and not self._connected.is_set():
            try:
                await asyncio.wait_for(
                    self._connected.wait(), max(0.0, deadline - time.monotonic())
                )
            except asyncio.TimeoutError:
                return [TIMED_OUT for _ in requests]  # never sent
        futures = submit_all(self.connection, requests, watcher)
        for future in futures:
            future.add_done_callback(_retrieve)
        await asyncio.wait(futures)  # a cancel here leaves the requests to finish
        return [reply_of(future) for future in futures]

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
