"""Run a flow on a blocking session: the sync driver. No lock rule lives here.

It sends what the flow yields and blocks for the replies, or for the watch events of
this run (its inbox) until the ``Wait``'s deadline; what a reply or an event means is
the flow's business (``zklocks._core.steps``). Interruptions (KeyboardInterrupt, any
exception while blocked) are thrown *into* the flow, which cleans up by yielding more
operations (delete our node) and then re-raises; the driver keeps executing those
operations. A flow is never ``close()``d.

A ``Cleanup`` runs on a thread of the session's (``in_background``) while the caller
waits for it until its deadline: past that the caller leaves with its error, and the
cleanup goes on without it (bounded: its retries, and the session's end).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

from zklocks._core import ops
from zklocks._core.deadline import Deadline
from zklocks._core.flow import Flow
from zklocks._core.threads import wait_interruptibly
from zklocks._errors import ClientClosed
from zklocks._frontend.operations import Finished, Operation, Stepper
from zklocks._sync.carrier import SyncCarrier
from zklocks._vocabulary import WatchEvent

log = logging.getLogger("zklocks.lock")


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


def run(flow: Flow | Operation[Any], session: SyncCarrier | None = None) -> Any:
    """Drive ``flow`` to its end and return its value (or raise what it raises).

    An operation (``zklocks._frontend.operations``) names its session with ``Use``."""
    stepper = Stepper(flow, session, Inbox)
    while not isinstance(op := stepper.next(), Finished):
        try:
            stepper.send(execute(op, stepper.session, stepper.inbox))
        except BaseException as exc:  # interrupted: the flow cleans up, then re-raises
            stepper.throw(exc)
    return op.value


def execute(op: ops.Op, session: SyncCarrier, inbox: Inbox) -> ops.Reply:
    """One operation's reply."""
    clock = session.facts.clock
    early = ops.too_late(op, clock())
    if early is not None:
        return early
    if isinstance(op, ops.Pipeline):
        watcher = op.watcher or (inbox.open() if op.watch else None)
        return tuple(session.call(op.requests, op.deadline, watcher))
    if isinstance(op, ops.Wait):
        return inbox.take(op.deadline, clock)
    if isinstance(op, ops.SessionId):
        return session.session_id()
    if isinstance(op, ops.Cleanup):
        return clean_up(op, session)
    return session.call((op,), op.deadline)[0]


def clean_up(op: ops.Cleanup, session: SyncCarrier) -> ops.Reply:
    """Run the cleanup steps apart from the caller; wait for them until ``op.deadline``.

    An interruption (Ctrl-C) ends the wait, not the cleanup: the steps run on.
    """
    done = session.in_background(functools.partial(run, op.steps, session))
    remaining = Deadline(op.deadline, session.facts.clock).remaining()
    finished, _ = concurrent.futures.wait((done,), remaining)
    if finished:
        done.result()  # what the steps raised goes into the flow, as if run in it
    else:
        done.add_done_callback(_report_late_failure)
    return None


def _report_late_failure(done: concurrent.futures.Future[Any]) -> None:
    """A cleanup that failed after its caller left: nobody else will hear of it."""
    error = done.exception()
    if error is not None and not isinstance(error, ClientClosed):
        log.warning("cleanup after the caller left failed: %r", error)


class Inbox:
    """The watch events of one flow run: put by the session's thread, taken by the
    caller's. ``put`` is the one watcher of the run (one registration per node)."""

    __slots__ = ("_events", "_ready")

    def __init__(self) -> None:
        self._events: deque[WatchEvent] = deque()
        self._ready: threading.Event | None = None  # most runs never wait: made on use

    def open(self) -> Callable[[WatchEvent], None]:
        """The watcher, ready before any event can reach it (the caller's thread)."""
        if self._ready is None:
            self._ready = threading.Event()
        return self.put

    def put(self, event: WatchEvent) -> None:
        self._events.append(event)
        assert self._ready is not None
        self._ready.set()

    def take(
        self, deadline: float | None, clock: Callable[[], float]
    ) -> tuple[WatchEvent, ...] | ops.Wake:
        """The events that fired since the last take, waiting for one until ``deadline``."""
        ready = self._ready
        if ready is None:
            ready = self._ready = threading.Event()  # no watch set: only the deadline ends it
        until = Deadline(deadline, clock)
        while True:
            if until.passed() or not wait_interruptibly(ready, until):
                return ops.TIMED_OUT
            ready.clear()
            taken = []
            while self._events:  # append and popleft are atomic: nothing is lost
                taken.append(self._events.popleft())
            if taken:
                return tuple(taken)
