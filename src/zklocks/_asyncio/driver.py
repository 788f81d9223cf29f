"""Run a flow with ``await``: the asyncio driver. No lock rule lives here.

Cancellation is first-class. A ``CancelledError`` (from ``task.cancel()``,
``asyncio.timeout`` or ``wait_for``) is thrown into the flow like any interruption: the
flow deletes our node — found by its attempt token if the cancel hit the create's round
trip — and re-raises, so the ``CancelledError`` reaches the caller unwrapped. Cleanup
requests are shielded: a second cancel cannot stop a delete already under way.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from zklocks._asyncio.session import AsyncSession
from zklocks._core.drive import (
    first_gone,
    parent_creates,
    parents_reply,
    pipeline_deadline,
    retry_too_late,
    wake_reply,
    watch_requests,
)
from zklocks._core.flow import Flow
from zklocks._core.ops import (
    TIMED_OUT,
    AwaitDeletion,
    CreateParents,
    Op,
    Pipeline,
    Reply,
    SessionId,
)
from zklocks._vocabulary import WatchEvent


async def run(flow: Flow, session: AsyncSession) -> Any:
    """Drive ``flow`` to its end and return its value (or raise what it raises)."""
    try:
        op = next(flow)
    except StopIteration as stop:
        return stop.value
    cleaning_up = False
    while True:
        try:
            if cleaning_up:
                reply = await asyncio.shield(execute(op, session))
            else:
                reply = await execute(op, session)
        except BaseException as exc:  # cancelled or interrupted: the flow cleans up
            cleaning_up = True
            try:
                op = flow.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            op = flow.send(reply)
        except StopIteration as stop:
            return stop.value
        # The flow has the reply now. Holding it here while the next operation waits
        # would keep e.g. a thousand-name listing alive per waiter.
        del reply


async def execute(op: Op, session: AsyncSession) -> Reply:
    """One operation's reply."""
    too_late = retry_too_late(op, time.monotonic())
    if too_late is not None:
        return too_late
    if isinstance(op, Pipeline):
        return tuple(await session.call(op.requests, pipeline_deadline(op)))
    if isinstance(op, AwaitDeletion):
        return await await_deletion(op, session)
    if isinstance(op, CreateParents):
        return parents_reply(await session.call(parent_creates(op.path, op.acl), op.deadline))
    if isinstance(op, SessionId):
        return session.session_id()
    return (await session.call((op,), op.deadline))[0]


async def await_deletion(op: AwaitDeletion, session: AsyncSession) -> Reply:
    """Exists-watch every node; wait until one is deleted, the deadline, or session end."""
    fired: list[WatchEvent] = []
    wake = asyncio.Event()

    def watcher(event: WatchEvent) -> None:
        fired.append(event)
        wake.set()

    while True:
        replies = await session.call(watch_requests(op.nodes), op.deadline, watcher)
        done = first_gone(op.nodes, replies)
        if done is not None:
            return done
        remaining = None if op.deadline is None else op.deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return TIMED_OUT
        try:
            await asyncio.wait_for(wake.wait(), remaining)
        except asyncio.TimeoutError:
            return TIMED_OUT
        wake.clear()
        events, fired[:] = list(fired), []  # one thread: the loop's
        done = wake_reply(events, op.nodes)
        if done is not None:
            return done
        # only a change that is not a deletion: set the watches again
