"""Run a flow with ``await``: the asyncio driver. No lock rule lives here.

It sends what the flow yields and awaits the replies, or the watch events of this run
(its inbox) until the ``Wait``'s deadline; what a reply or an event means is the flow's
business (``zklocks._core.steps``).

Cancellation is first-class. A ``CancelledError`` (from ``task.cancel()``,
``asyncio.timeout`` or ``wait_for``) is thrown into the flow like any interruption: the
flow deletes our node — found by its attempt token if the cancel hit the create's round
trip — and re-raises, so the ``CancelledError`` reaches the caller unwrapped. Cleanup
requests are shielded: a second cancel cannot stop a delete already under way.

A ``Cleanup`` runs as a task of the session's (``in_background``) while the caller
awaits it until its deadline: past that the caller leaves with its error, and the
cleanup goes on without it (bounded: its retries, and the session's end). A cancel
while awaiting it ends the wait, never the cleanup.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from zklocks._asyncio.carrier import AsyncCarrier
from zklocks._core import ops
from zklocks._core.deadline import Deadline
from zklocks._core.flow import Flow
from zklocks._errors import ClientClosed
from zklocks._frontend.operations import Finished, Operation, Stepper
from zklocks._vocabulary import WatchEvent

log = logging.getLogger("zklocks.lock")


async def run(flow: Flow | Operation[Any], session: AsyncCarrier | None = None) -> Any:
    """Drive ``flow`` to its end and return its value (or raise what it raises).

    An operation (``zklocks._frontend.operations``) names its session with ``Use``."""
    stepper = Stepper(flow, session, Inbox)
    while not isinstance(op := stepper.next(), Finished):
        try:
            reply = execute(op, stepper.session, stepper.inbox)
            if stepper.interrupted and not isinstance(op, ops.Cleanup):  # one runs apart anyway
                stepper.send(await asyncio.shield(reply))
            else:
                stepper.send(await reply)
        except BaseException as exc:  # cancelled or interrupted: the flow cleans up
            stepper.throw(exc)
    return op.value


async def execute(op: ops.Op, session: AsyncCarrier, inbox: Inbox) -> ops.Reply:
    """One operation's reply."""
    clock = session.facts.clock  # the clock the operations made their deadlines on
    early = ops.too_late(op, clock())
    if early is not None:
        return early
    if isinstance(op, ops.Pipeline):
        watcher = op.watcher or (inbox.put if op.watch else None)
        return tuple(await session.call(op.requests, op.deadline, watcher))
    if isinstance(op, ops.Wait):
        return await inbox.take(op.deadline, clock)
    if isinstance(op, ops.SessionId):
        return session.session_id()
    if isinstance(op, ops.Cleanup):
        return await clean_up(op, session)
    return (await session.call((op,), op.deadline))[0]


async def clean_up(op: ops.Cleanup, session: AsyncCarrier) -> ops.Reply:
    """Run the cleanup steps apart from the caller; await them until ``op.deadline``."""
    task = session.in_background(run(op.steps, session))
    remaining = Deadline(op.deadline, session.facts.clock).remaining()
    finished, _ = await asyncio.wait((task,), timeout=remaining)
    if finished:
        task.result()  # what the steps raised goes into the flow, as if run in it
    else:
        task.add_done_callback(_report_late_failure)
    return None


def _report_late_failure(task: asyncio.Task[Any]) -> None:
    """A cleanup that failed after its caller left: nobody else will hear of it."""
    error = None if task.cancelled() else task.exception()
    if error is not None and not isinstance(error, ClientClosed):
        log.warning("cleanup after the caller left failed: %r", error)


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

    async def take(
        self, deadline: float | None, clock: Callable[[], float] = time.monotonic
    ) -> tuple[WatchEvent, ...] | ops.Wake:
        """The events that fired since the last take, waiting for one until ``deadline``
        on ``clock`` (the session's)."""
        if not self._events:
            ready = self._ready = self._ready or asyncio.Event()
            ready.clear()
            until = Deadline(deadline, clock)
            if until.passed():
                return ops.TIMED_OUT
            try:
                await asyncio.wait_for(ready.wait(), until.remaining())
            except TimeoutError:
                return ops.TIMED_OUT
        taken, self._events = tuple(self._events), []
        return taken
