"""Run a flow on a blocking session: the sync driver. No lock rule lives here.

Interruptions (KeyboardInterrupt, any exception while blocked) are thrown *into* the
flow, which cleans up by yielding more operations (delete our node) and then re-raises;
the driver keeps executing those operations. A flow is never ``close()``d.
"""

from __future__ import annotations

import threading
from typing import Any

from zklocks._flow import Flow
from zklocks._ops import (
    TIMED_OUT,
    AwaitDeletion,
    Create,
    CreateParents,
    Exists,
    Gone,
    Op,
    Pipeline,
    Reply,
    SessionId,
    Stat,
)
from zklocks._protocol.errors import (
    ClientClosedError,
    NodeExistsError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._session import SyncSession, WatchEvent, WatchKind


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


def execute(op: Op, session: SyncSession) -> Reply:
    """One operation's reply."""
    if isinstance(op, Pipeline):
        deadline = min_deadline(op)
        return tuple(session.call(op.requests, deadline))
    if isinstance(op, AwaitDeletion):
        return await_deletion(op, session)
    if isinstance(op, CreateParents):
        return create_parents(op, session)
    if isinstance(op, SessionId):
        return session.session_id()
    return session.call((op,), op.deadline)[0]


def min_deadline(op: Pipeline) -> float | None:
    deadlines = [r.deadline for r in op.requests if r.deadline is not None]
    return min(deadlines) if deadlines else None


def ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b", "/a/b/c"]``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def create_parents(op: CreateParents, session: SyncSession) -> Reply:
    """All ancestors as containers in one pipelined round trip; existing ones are fine."""
    creates = [Create(p, ephemeral=False, container=True) for p in ancestors(op.path)]
    for reply in session.call(creates, op.deadline):
        if reply is TIMED_OUT:
            return TIMED_OUT
        if isinstance(reply, ZooKeeperError) and not isinstance(reply, NodeExistsError):
            return reply
    return None


def await_deletion(op: AwaitDeletion, session: SyncSession) -> Reply:
    """Exists-watch every node; block until one is deleted, the deadline, or session end."""
    fired: list[WatchEvent] = []
    wake = threading.Event()

    def watcher(event: WatchEvent) -> None:
        fired.append(event)
        wake.set()

    clock = session.facts.clock
    while True:
        replies = session.call([Exists(n) for n in op.nodes], op.deadline, watcher)
        for node, reply in zip(op.nodes, replies, strict=True):
            if reply is None:
                return Gone(node)
            if not isinstance(reply, Stat):
                return reply
        while True:
            remaining = None if op.deadline is None else op.deadline - clock()
            if remaining is not None and remaining <= 0:
                return TIMED_OUT
            if not wake.wait(remaining):
                return TIMED_OUT
            wake.clear()
            while fired:
                event = fired.pop(0)
                if event.kind is WatchKind.DELETED and event.path in op.nodes:
                    return Gone(event.path)
                if event.kind is WatchKind.SESSION_LOST:
                    return SessionExpiredError()
                if event.kind is WatchKind.CLOSED:
                    return ClientClosedError()
            if not fired:
                break  # a change that is not a deletion: set the watches again
