"""The operations a lock flow yields and the replies a driver sends back.

A flow (``zklocks._core.flow``) never performs I/O: it yields one of the operations below
and is resumed with the reply. Three drivers run flows — the sync front end, the asyncio
front end and the simulator — so this module is their whole contract. A driver only
sends requests and waits for watch events or a deadline; what a reply or an event
*means* (a blocker is gone, make the parents, set the watches again) is the flow's
business (``zklocks._core.steps``).

* ``Create``, ``Delete``, ``GetChildren``, ``GetData``, ``Exists``, ``GetACL`` and
  ``Multi`` (a transaction: ``zklocks._core.transaction``) are single ZooKeeper
  requests. The reply is the value documented on the class, or an *instance* of a
  ``zklocks._protocol.errors.ZooKeeperError`` subclass (never raised into the flow: a
  refused request is an answer the flow inspects, not control flow).
* ``Pipeline`` sends several requests back to back without waiting in between (ZooKeeper
  answers one session's requests in order) and replies with a tuple of their replies.
  With ``watch=True`` every request that can carry a watch (``GetData``, ``Exists``,
  ``GetChildren``) sets one, and its events go to this flow run's *inbox*: the driver
  keeps one inbox per run of a flow. With ``watcher=fn`` instead, the watches' events
  go to ``fn`` (a caller's own one-shot watch: the public reads, ``zklocks._core.reads``).
* ``Wait`` waits for the inbox. Reply: the tuple of watch events that fired since the
  last ``Wait`` (at least one; a session that ends fires ``SESSION_LOST`` or ``CLOSED``
  to every watch), or ``TIMED_OUT`` once the deadline passed first.
* ``SessionId`` asks which session the client currently has. Reply: ``int``.
* ``Cleanup`` hands the driver a flow's cleanup (``steps``, themselves operations) with
  the instant the caller may leave by: the driver runs the steps apart from the caller
  (a thread or a task of the session) and waits for them until then, so cleanup never
  holds a call past its deadline. Reply: ``None``. A driver with no caller to free (the
  simulator) runs them in place with ``inline_cleanups``.

``Create`` carries ``acl``: the entries (``zklocks._protocol.records.WireACL``) the new node
gets; empty means ZooKeeper's open ACL (``world:anyone``, all permissions).

Requests carry ``deadline``: an absolute instant on the *driver's* clock, or ``None``.
A driver that cannot *send* the request by then (e.g. while reconnecting) replies
``TIMED_OUT``, which therefore always means "never sent, never applied"; a request once
sent is waited for until it is answered or fails with ``ConnectionLossError``.
Cleanup requests carry ``None``: they wait for a connection as long as the session
lives (if it expires, the server has removed our ephemeral nodes anyway).

An operation yielded again after a failure carries ``retry=True``: a driver never sends
a retry once its deadline has passed, connected or not, and replies ``TIMED_OUT``
(``too_late``, which every driver asks first). A first try is still sent while
connected (``timeout=0`` on a free lock succeeds), but a loop of fast failures (a
deleted chroot, a server that breaks every connection) ends at the deadline.
"""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from zklocks._protocol.errors import ZooKeeperError
from zklocks._protocol.records import (
    Children,
    Create,
    Created,
    Delete,
    Exists,
    GetACL,
    GetChildren,
    GetData,
    Multi,
    MultiResult,
    NodeACL,
    NodeData,
    Stat,
    Sync,
)
from zklocks._vocabulary import Watcher, WatchEvent

__all__ = [
    "TIMED_OUT",
    "Children",
    "Cleanup",
    "Op",
    "Pipeline",
    "Reply",
    "Request",
    "SessionId",
    "Wait",
    "Wake",
    "inline_cleanups",
    "too_late",
]

T = TypeVar("T")


class Wake(enum.Enum):
    """The deadline passed before the request could be sent (or the wait ended)."""

    TIMED_OUT = "timed out"


TIMED_OUT = Wake.TIMED_OUT


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait for this flow run's watch events. Reply: a non-empty tuple of ``WatchEvent``,
    or ``TIMED_OUT`` once ``deadline`` passed first (even with events waiting)."""

    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class SessionId:
    """Which session the client has now. Reply: ``int``."""


Request: TypeAlias = Create | Delete | GetChildren | GetData | Exists | GetACL | Multi | Sync


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Send ``requests`` back to back; reply with the tuple of their replies, in order.

    ``watch``: each request sets a watch whose events go to this flow run's inbox
    (what a ``Wait`` answers). ``watcher``: each request sets a watch whose events go
    to this callable instead (a caller's watch, which outlives the run).
    """

    requests: tuple[Request, ...]
    watch: bool = False
    watcher: Watcher | None = None

    @property
    def deadline(self) -> float | None:
        """A pipeline is sent as one: by the earliest deadline of its requests."""
        deadlines = [r.deadline for r in self.requests if r.deadline is not None]
        return min(deadlines) if deadlines else None

    @property
    def retry(self) -> bool:
        return any(request.retry for request in self.requests)


@dataclass(frozen=True, slots=True, eq=False)
class Cleanup:
    """Run ``steps`` to their end; keep the caller only until ``deadline``. Reply: ``None``.

    A call's way out (a timeout, an error, an interruption) deletes what it left behind,
    and those deletes carry no deadline of their own: an orphan would block everyone.
    But against a server that breaks every connection each of them waits for a
    reconnect, and the caller would wait for all of them, long past its deadline. So the
    driver runs ``steps`` apart from the caller and waits for them until ``deadline``
    (``None``: until they end); past it, they go on without the caller, bounded by
    ``CLEANUP_RETRIES`` and by the session's end. If they end in time by raising, the
    driver raises that into the flow, as if they had run in it.
    """

    steps: Generator[Op, Any, Any]
    deadline: float | None = None


Op: TypeAlias = Request | Pipeline | Wait | SessionId | Cleanup

Reply: TypeAlias = (
    Created
    | NodeData
    | Stat
    | list[str]
    | list[MultiResult]
    | Children
    | tuple["Reply", ...]
    | tuple[WatchEvent, ...]
    | Wake
    | int
    | NodeACL
    | ZooKeeperError
    | None
)


def too_late(op: Op, now: float) -> Reply | None:
    """The reply to ``op`` without sending it, if its deadline rules it out; else None.

    A retry past its deadline is never sent: ``TIMED_OUT`` (one per request of a
    pipeline). A ``Wait`` past its deadline answers ``TIMED_OUT`` at once.
    """
    if isinstance(op, SessionId | Cleanup):
        return None  # cleanup is never skipped: past its deadline it runs apart
    deadline = op.deadline
    if deadline is None or now < deadline:
        return None
    if isinstance(op, Wait):
        return TIMED_OUT
    if not op.retry:
        return None
    if isinstance(op, Pipeline):
        return tuple(TIMED_OUT for _ in op.requests)
    return TIMED_OUT


def inline_cleanups(flow: Generator[Op, Any, T]) -> Generator[Op, Any, T]:
    """``flow`` with every ``Cleanup`` run in place: the steps' operations are yielded as
    the flow's own, and what the steps raise is thrown into the flow.

    For a driver with no caller to free (the simulator explores the steps one operation
    at a time, faults included) and for a test that steps a flow by hand.
    """
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        reply, error = None, None
        if isinstance(op, Cleanup):
            try:
                yield from op.steps
            except GeneratorExit:
                raise
            except BaseException as exc:
                error = exc
            continue
        try:
            reply = yield op
        except GeneratorExit:
            flow.close()
            raise
        except BaseException as exc:
            error = exc
