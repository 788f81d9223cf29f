"""Run a flow with ``await``: the asyncio driver. No lock rule lives here.

It sends what the flow yields and awaits the replies, or the watch events of this run
(its inbox) until the ``Wait``'s deadline; what a reply or an event means is the flow's
business (``zklocks._core.steps``).

Cancellation is first-class. A ``CancelledError`` (from ``task.cancel()``,
``asyncio.timeout`` or ``wait_for``) is thrown into the flow like any interruption: the
flow deletes our node — found by its attempt token if the cancel hit the create's round
trip — and re-raises, so the ``CancelledError`` reaches the caller unwrapped. Cleanup
requests are shielded: a second cancel cannot stop a delete already under way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from zklocks._asyncio.session import AsyncSession
from zklocks._core.flow import Flow
from zklocks._core.ops import TIMED_OUT, Op, Pipeline, Reply, SessionId, Wait, Wake, too_late
from zklocks._vocabulary import WatchEvent


async def run(flow: Flow, session: AsyncSession) -> Any:
    """Drive ``flow`` to its end and return its value (or raise what it raises)."""
    inbox = Inbox()
    step: Callable[[Any], Op] = flow.send
    value: Any = None
    cleaning_up = False
    while True:
        try:
            op = step(value)
        except StopIteration as stop:
            return stop.value
        # The flow has the reply now. Holding it here while the next operation waits
        # would keep e.g. a thousand-name listing alive per waiter.
        value = None
        try:
            if cleaning_up:
                value = await asyncio.shield(execute(op, session, inbox))
            else:
                value = await execute(op, session, inbox)
            step = flow.send
        except BaseException as exc:  # cancelled or interrupted: the flow cleans up
            cleaning_up = True
            value, step = exc, flow.throw


async def execute(op: Op, session: AsyncSession, inbox: Inbox) -> Reply:
    """One operation's reply."""
    early = too_late(op, time.monotonic())
    if early is not None:
        return early
    if isinstance(op, Pipeline):
        watcher = inbox.put if op.watch else None
        return tuple(await session.call(op.requests, op.deadline, watcher))
    if isinstance(op, Wait):
        return await inbox.take(op.deadline)
    if isinstance(op, SessionId):
        return session.session_id()
    return (await session.call((op,), op.deadline))[0]


class Inbox:
    """The watch events of one flow run, all on the loop's thread. ``put`` is the one
    watcher of the run (one registration per node)."""

    __slots__ = ("_events", "_ready")

    def __init__(self) -> None:
        self._events: list[WatchEvent] = []
        self._ready: asyncio.Event | None = None  # most runs never wait: made on use

    def put(self, event: WatchEvent) -> None:
        self._events.append(event)
        if self._ready is not None:
            self._ready.set()

    async def take(self, deadline: float | None) -> tuple[WatchEvent, ...] | Wake:
        """The events that fired since the last take, waiting for one until ``deadline``."""
        if not self._events:
            ready = self._ready = self._ready or asyncio.Event()
            ready.clear()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return TIMED_OUT
            try:
                await asyncio.wait_for(ready.wait(), remaining)
            except asyncio.TimeoutError:
                return TIMED_OUT
        taken, self._events = tuple(self._events), []
        return taken
