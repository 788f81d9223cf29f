"""What the connection and transport-fault tests share: state and watch recorders."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionState, WatchEvent

WAIT = 15.0  # the longest any awaited condition may take to come true


class States:
    """Records a connection's state changes with their times; await one with a deadline."""

    def __init__(self, conn: Connection) -> None:
        self.seen: list[SessionState] = []
        self.times: list[float] = []
        self._changed = asyncio.Event()
        conn.add_state_listener(self._on)

    def _on(self, state: SessionState) -> None:
        self.seen.append(state)
        self.times.append(time.monotonic())
        self._changed.set()

    async def wait(self, state: SessionState, *, after: int = 0, timeout: float = WAIT) -> int:
        """Index in ``seen`` of the first ``state`` at or after index ``after``."""
        deadline = time.monotonic() + timeout
        while state not in self.seen[after:]:
            self._changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {state.name} within {timeout} s; saw {self.seen}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return self.seen.index(state, after)


class Watched:
    """A watcher that records events; await the next one with a deadline."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._queue: asyncio.Queue[WatchEvent] = asyncio.Queue()

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)
        self._queue.put_nowait(event)

    async def next(self, timeout: float = WAIT) -> WatchEvent:
        return await asyncio.wait_for(self._queue.get(), timeout)


async def until(predicate: Callable[[], Any], timeout: float = WAIT, step: float = 0.02) -> None:
    """Poll a condition about the outside world (the server) with a deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(step)
