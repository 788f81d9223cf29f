"""Run a flow on a blocking session: the sync driver. No lock rule lives here.

Interruptions (KeyboardInterrupt, any exception while blocked) are thrown *into* the
flow, which cleans up by yielding more operations (delete our node) and then re-raises;
the driver keeps executing those operations. A flow is never ``close()``d.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Any

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
from zklocks._sync.session import SyncSession
from zklocks._vocabulary import WatchEvent


def warn_if_in_event_loop(stacklevel: int) -> None:
    """The sync client blocks its caller: inside a running event loop that stalls every
    task, and a lock held by another task of that loop could never be released."""
    if asyncio._get_running_loop() is not None:
        warnings.warn(
            "zklocks.Client blocks the calling thread, and this thread is running an asyncio "
            "event loop: use zklocks.AsyncClient in async code",
            RuntimeWarning,
            stacklevel=stacklevel,
        )


def run(flow: Flow, session: SyncSession) -> Any:
    """Drive ``flow`` to its end and return its value (or raise what it raises)."""
    try:
        op = next(flow)
    except StopIteration as stop:
        return stop.value
    while True:
        try:
            reply = execute(op, session)
        except BaseException as exc:  # interrupted: the flow cleans up, then re-raises
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


def execute(op: Op, session: SyncSession) -> Reply:
    """One operation's reply."""
    too_late = retry_too_late(op, session.facts.clock())
    if too_late is not None:
        return too_late
    if isinstance(op, Pipeline):
        return tuple(session.call(op.requests, pipeline_deadline(op)))
    if isinstance(op, AwaitDeletion):
        return await_deletion(op, session)
    if isinstance(op, CreateParents):
        return parents_reply(session.call(parent_creates(op.path, op.acl), op.deadline))
    if isinstance(op, SessionId):
        return session.session_id()
    return session.call((op,), op.deadline)[0]


def await_deletion(op: AwaitDeletion, session: SyncSession) -> Reply:
    """Exists-watch every node; block until one is deleted, the deadline, or session end."""
    fired: list[WatchEvent] = []
    wake = threading.Event()

    def watcher(event: WatchEvent) -> None:
        fired.append(event)
        wake.set()

    clock = session.facts.clock
    while True:
        replies = session.call(watch_requests(op.nodes), op.deadline, watcher)
        done = first_gone(op.nodes, replies)
        if done is not None:
            return done
        remaining = None if op.deadline is None else op.deadline - clock()
        if (remaining is not None and remaining <= 0) or not wake.wait(remaining):
            return TIMED_OUT
        wake.clear()
        events = [fired.pop(0) for _ in range(len(fired))]
        done = wake_reply(events, op.nodes)
        if done is not None:
            return done
        # only a change that is not a deletion: set the watches again
