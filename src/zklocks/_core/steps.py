"""Steps of the lock flows made of several operations: make the lock path, wait until a
blocker is deleted, wait until a line changes. No I/O.

They were once operations of their own that every driver carried out, each with its own
copy of the loop; as steps of the flow their rules are written once, here, and a driver
only sends requests and waits (``zklocks._core.ops``). What ends a wait:

* the watch-setting pipeline (``getData`` with a watch on each blocker) finds a blocker
  gone already: ``Gone`` at once; any other failure (a lost connection, an expired
  session, ``TIMED_OUT``) is the step's answer, for the flow to retry or give up;
* a ``DELETED`` event for a blocker: ``Gone``; ``SESSION_LOST`` or ``CLOSED``: the
  session's end, as ``SessionExpiredError`` or ``ClientClosedError``;
* the deadline: ``TIMED_OUT``.

A ``CHANGED`` event on a blocker used its watch up but is not a deletion: set the
watches again (or, when the caller asks, end the wait with ``Changed``: a waiter with a
lock-delay lists then, for a blocker writes its node again when it sees a loss,
``zklocks._core.lock_delay``). The inbox holds a whole flow run's events, so it may
also bring events of watches set by an earlier wait, on nodes that no longer block us:
they change nothing, and the wait goes on without a request.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from zklocks._core.ops import TIMED_OUT, Op, Pipeline, Reply, Wait, Wake
from zklocks._protocol.constants import Perm
from zklocks._protocol.errors import (
    ClientClosedError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import (
    Create,
    Exists,
    GetChildren,
    GetData,
    Id,
    NodeData,
    Stat,
    WireACL,
)
from zklocks._vocabulary import WatchEvent, WatchKind

__all__ = [
    "Changed",
    "Gone",
    "WaitOutcome",
    "ancestors",
    "await_children_change",
    "await_deletion",
    "first_gone",
    "make_parents",
    "parent_creates",
    "parents_reply",
    "wake_reply",
    "watch_pipeline",
]


@dataclass(frozen=True, slots=True)
class Gone:
    """A watched node (full path) no longer exists."""

    node: str


@dataclass(frozen=True, slots=True)
class Changed:
    """A watched node's data changed (it still exists)."""

    node: str


WaitOutcome: TypeAlias = Gone | Changed | Reply
"""What ``await_deletion`` returns: ``Gone``, ``Changed`` (only if asked for),
``TIMED_OUT``, or the error that ended it."""


# -- waiting for a deletion --------------------------------------------------------------


def await_deletion(
    nodes: tuple[str, ...],
    deadline: float | None,
    *,
    retry: bool = False,
    seen: dict[str, NodeData] | None = None,
    changes: bool = False,
) -> Generator[Op, Any, WaitOutcome]:
    """Watch ``nodes`` (full paths) until one is deleted, the deadline, or session end
    (with ``changes``, also until one's data changes: ``Changed``).

    ``seen`` gets each node's data as its watch read it (who a timeout waited for)."""
    watch = watch_pipeline(nodes, deadline, retry=retry)
    while True:
        replies = yield watch
        if seen is not None:
            for node, reply in zip(nodes, replies, strict=True):
                if isinstance(reply, NodeData):
                    seen[node] = reply
        done = first_gone(nodes, replies)
        if done is not None:
            return done
        while True:
            events: tuple[WatchEvent, ...] | Wake = yield Wait(deadline)
            if isinstance(events, Wake):
                return events
            done = wake_reply(events, nodes)
            if done is not None:
                return done
            changed = next((event.path for event in events if event.path in nodes), None)
            if changed is not None and changes:
                return Changed(changed)
            if changed is not None:
                break  # a change used a watch of ours up: set the watches again
        if retry:
            watch = watch_pipeline(nodes, deadline)  # setting them again is no retry


def watch_pipeline(
    nodes: Sequence[str], deadline: float | None, *, retry: bool = False
) -> Pipeline:
    """What a waiter sends to watch its blockers: ``getData`` with a watch, not ``exists``.

    Both set a data watch on a node that exists (it fires on its deletion), but an
    exists-watch on a node that is already gone stays registered as a creation watch
    until the session ends: one leaked watch per stale blocker. ``getData`` on a missing
    node answers NoNode and sets nothing.
    """
    requests = tuple(GetData(node, deadline=deadline, retry=retry) for node in nodes)
    return Pipeline(requests, watch=True)


def first_gone(nodes: Sequence[str], replies: Sequence[Reply]) -> WaitOutcome | None:
    """After setting the watches: a reply that ends the wait at once, or None to wait."""
    for node, reply in zip(nodes, replies, strict=True):
        if reply is None or isinstance(reply, NoNodeError):
            return Gone(node)
        if not isinstance(reply, NodeData | Stat):
            return reply
    return None


def wake_reply(events: Sequence[WatchEvent], nodes: Sequence[str]) -> WaitOutcome | None:
    """What fired watches mean for a waiter on ``nodes``; None: nothing that ends the wait."""
    for event in events:
        if event.kind is WatchKind.DELETED and event.path in nodes:
            return Gone(event.path)
        if event.kind is WatchKind.SESSION_LOST:
            return SessionExpiredError()
        if event.kind is WatchKind.CLOSED:
            return ClientClosedError()
    return None


def await_children_change(path: str, deadline: float | None) -> Generator[Op, Any, bool]:
    """Wait until a child of ``path`` comes or goes, or ``path`` is made (True), or the
    deadline (False): a child watch, or with no ``path`` yet an exists watch for its
    creation. Any event counts, the session's end included: the caller reads again."""
    (listing,) = yield Pipeline((GetChildren(path, deadline=deadline),), watch=True)
    if isinstance(listing, NoNodeError):
        yield Pipeline((Exists(path, deadline=deadline),), watch=True)
    return not isinstance((yield Wait(deadline)), Wake)


# -- making the lock path ------------------------------------------------------------------


def make_parents(
    path: str,
    acl: tuple[WireACL, ...],
    deadline: float | None,
    *,
    retry: bool = False,
    container: bool = True,
) -> Generator[Op, Any, Reply]:
    """Create ``path`` and its missing ancestors as containers (``container=False``:
    persistent nodes, as kazoo makes them), in one pipelined round trip. Returns
    ``None`` (they exist now, ours or not), ``TIMED_OUT`` or an error."""
    creates = parent_creates(path, acl, deadline=deadline, retry=retry, container=container)
    return parents_reply((yield Pipeline(tuple(creates))))


def ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b", "/a/b/c"]``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def parent_creates(
    path: str,
    acl: tuple[WireACL, ...] = (),
    *,
    deadline: float | None = None,
    retry: bool = False,
    container: bool = True,
) -> list[Create]:
    """The lock path and its ancestors as containers.

    The lock path gets ``acl``. Ancestors we create get it too, plus create and read
    for everyone: deleting an empty lock directory takes delete permission on its
    parent, which only ``acl`` grants, while other users (other credentials) may still
    make lock directories of their own beside ours, under a shared ``/locks``.
    Ancestors that already exist keep theirs.
    """
    shared = acl + _CREATE_AND_READ if acl else acl
    return [
        Create(
            p,
            ephemeral=False,
            container=container,
            acl=acl if p == path else shared,
            deadline=deadline,
            retry=retry,
        )
        for p in ancestors(path)
    ]


_CREATE_AND_READ = (WireACL(Perm.CREATE | Perm.READ, Id("world", "anyone")),)


def parents_reply(replies: Sequence[Reply]) -> Reply:
    """Existing ancestors are fine; the first other error (or TIMED_OUT) is the reply."""
    for reply in replies:
        if reply is TIMED_OUT:
            return TIMED_OUT
        if isinstance(reply, ZooKeeperError) and not isinstance(reply, NodeExistsError):
            return reply
    return None
