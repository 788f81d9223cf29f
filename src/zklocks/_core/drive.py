"""Pure pieces both drivers share: what to send for ``CreateParents``, how to read watch
events for ``AwaitDeletion``. The drivers differ only in how they wait."""

from __future__ import annotations

from collections.abc import Sequence

from zklocks._core.ops import TIMED_OUT, Create, GetData, Gone, NodeData, Op, Pipeline, Reply, Stat
from zklocks._protocol.constants import Perm
from zklocks._protocol.errors import (
    ClientClosedError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import ACL, Id
from zklocks._vocabulary import WatchEvent, WatchKind


def pipeline_deadline(op: Pipeline) -> float | None:
    """A pipeline is sent as one: by the earliest deadline of its requests."""
    deadlines = [r.deadline for r in op.requests if r.deadline is not None]
    return min(deadlines) if deadlines else None


def retry_too_late(op: Op, now: float) -> Reply | None:
    """``TIMED_OUT`` (per request of a pipeline) for a retry past its deadline, else None."""
    if isinstance(op, Pipeline):
        deadline = pipeline_deadline(op)
        retry = any(request.retry for request in op.requests)
        if retry and deadline is not None and now >= deadline:
            return tuple(TIMED_OUT for _ in op.requests)
        return None
    deadline = getattr(op, "deadline", None)
    if getattr(op, "retry", False) and deadline is not None and now >= deadline:
        return TIMED_OUT
    return None


def ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b", "/a/b/c"]``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def parent_creates(path: str, acl: tuple[ACL, ...] = ()) -> list[Create]:
    """The lock path and its ancestors as containers, sent in one pipelined round trip.

    The lock path gets ``acl``. Ancestors we create get it too, plus create and read
    for everyone: deleting an empty lock directory takes delete permission on its
    parent, which only ``acl`` grants, while other users (other credentials) may still
    make lock directories of their own beside ours, under a shared ``/locks``.
    Ancestors that already exist keep theirs.
    """
    paths = ancestors(path)
    shared = acl + _CREATE_AND_READ if acl else acl
    return [
        Create(p, ephemeral=False, container=True, acl=acl if p == path else shared) for p in paths
    ]


_CREATE_AND_READ = (ACL(Perm.CREATE | Perm.READ, Id("world", "anyone")),)


def parents_reply(replies: Sequence[Reply]) -> Reply:
    """Existing ancestors are fine; the first other error (or TIMED_OUT) is the reply."""
    for reply in replies:
        if reply is TIMED_OUT:
            return TIMED_OUT
        if isinstance(reply, ZooKeeperError) and not isinstance(reply, NodeExistsError):
            return reply
    return None


def watch_requests(nodes: Sequence[str]) -> list[GetData]:
    """What a waiter sends to watch its blockers: ``getData`` with a watch, not ``exists``.

    Both set a data watch on a node that exists (it fires on its deletion), but an
    exists-watch on a node that is already gone stays registered as a creation watch
    until the session ends: one leaked watch per stale blocker. ``getData`` on a missing
    node answers NoNode and sets nothing.
    """
    return [GetData(node) for node in nodes]


def first_gone(nodes: Sequence[str], replies: Sequence[Reply]) -> Reply | None:
    """After setting the watches: a reply that ends the wait at once, or None to wait."""
    for node, reply in zip(nodes, replies, strict=True):
        if reply is None or isinstance(reply, NoNodeError):
            return Gone(node)
        if not isinstance(reply, NodeData | Stat):
            return reply
    return None


def wake_reply(events: list[WatchEvent], nodes: Sequence[str]) -> Reply | None:
    """What fired watches mean for a waiter; None: only changes, set the watches again."""
    for event in events:
        if event.kind is WatchKind.DELETED and event.path in nodes:
            return Gone(event.path)
        if event.kind is WatchKind.SESSION_LOST:
            return SessionExpiredError()
        if event.kind is WatchKind.CLOSED:
            return ClientClosedError()
    return None
