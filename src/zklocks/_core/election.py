"""Leader election as a lock kind: the flows both front ends share (no I/O).

Theory of operation
-------------------
A candidate is a contender of kind ``elect`` (``elect-<attempt>-<sequence>``) under the
election path, and campaigning is acquiring: the one engine (``zklocks._core.flow``) creates
the node, and the exclusive rule (``zklocks._core.strategies``) makes the head of the line
the leader and has every other candidate watch only its immediate predecessor. When the
leader goes (resigns, dies, its session expires) exactly one candidate is woken: the
next in line, which leads with a larger fencing token (its node's creation zxid).
Leading is holding: the term is a ``Lease``, lost on the holder's own clock.

An observer is not a candidate. It reads the head of the line and watches *only the
head's node* (one getData watch), so a thousand candidates joining behind it cost the
observer nothing; when the head is deleted it reads the line again. Only while nobody
leads does it watch the path's children (or, with no path yet, the path's creation):
one watch in every state. A leader that comes and goes between two reads is not seen:
observers see every leader they could see, in order, never one twice in a row.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from zklocks._core import dialects as _dialects
from zklocks._core import kinds as _kinds
from zklocks._core import nodes as _nodes
from zklocks._core.contender import Contender, contender_of
from zklocks._core.flow import access_denied
from zklocks._core.ops import TIMED_OUT, Op, Pipeline, Wait, Wake
from zklocks._core.steps import await_deletion
from zklocks._errors import ClientClosed, LockError
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Exists, GetChildren, GetData, NodeData, Stat
from zklocks._vocabulary import WatchKind

KIND = _kinds.ELECT.name


def candidates(
    children: list[str], dialect: _dialects.Dialect = _dialects.ZKLOCKS
) -> list[_nodes.NodeName]:
    """The election's candidates in line order: ours (other children ignored), or in a
    Curator layout, LeaderLatch's or LeaderSelector's line (every child counts, as
    Curator counts it)."""
    if isinstance(dialect, _dialects.CuratorDialect):
        return _dialects.curator_election_line(children, dialect)
    return [node for node in _nodes.queue(children) if node.kind == KIND]


def read_leader(
    path: str, dialect: _dialects.Dialect = _dialects.ZKLOCKS
) -> Generator[Op, Any, Contender | None]:
    """Who leads the election at ``path`` now: the head of the line, or None."""
    while True:
        children = yield GetChildren(path)
        if isinstance(children, NoNodeError):
            return None
        if isinstance(children, ConnectionLossError | SessionExpiredError):
            continue
        if isinstance(children, ClientClosedError):
            raise ClientClosed(f"cannot read the leader of {path}: the client is stopped")
        if isinstance(children, NoAuthError):
            raise access_denied(path, "list")
        if not isinstance(children, list):
            raise LockError(f"cannot list {path}: {children}")
        line = candidates(children, dialect)
        if not line:
            return None
        head = line[0]
        reply = yield GetData(f"{path}/{head.name}")
        if isinstance(reply, NodeData):
            return contender_of(path, head, reply, holder=True)
        if isinstance(reply, ClientClosedError):
            raise ClientClosed(f"cannot read the leader of {path}: the client is stopped")
        if isinstance(reply, NoAuthError):
            raise access_denied(f"{path}/{head.name}", "read")
        # gone meanwhile (it resigned, or its session ended) or no answer: read again


def await_leader_gone(node: str, deadline: float | None) -> Generator[Op, Any, bool]:
    """Watch the leader's node until it is deleted (True) or ``deadline`` (False).

    A lost connection or an expired session also answers True: the watch may be gone
    with it, so the caller reads the line again rather than wait on nothing. A stopped
    client answers False: the observation is over.
    """
    reply = yield from await_deletion((node,), deadline)
    return not (reply is TIMED_OUT or isinstance(reply, ClientClosedError))


def await_change(
    path: str,
    leader: str | None,
    deadline: float | None,
    dialect: _dialects.Dialect = _dialects.ZKLOCKS,
) -> Generator[Op, Any, bool]:
    """Wait for a change worth reading the line again for (True), or ``deadline`` or a
    stopped client (False): the leader's node (full path) going, or with no leader, a
    candidate joining (a children watch on ``path``; with no ``path`` yet, an exists
    watch for its creation). One watch in every state.

    A watch that could not be set (a lost connection, an expired session) answers True
    at once: the caller reads the line again rather than wait on nothing.
    """
    if leader is not None:
        return (yield from await_leader_gone(leader, deadline))
    (listing,) = yield Pipeline((GetChildren(path, deadline=deadline),), watch=True)
    if not isinstance(listing, list | NoNodeError):
        return not isinstance(listing, ClientClosedError | Wake)
    if has_candidates(listing, dialect):
        return True  # a candidate came between our two reads
    if isinstance(listing, NoNodeError):
        (stat,) = yield Pipeline((Exists(path, deadline=deadline),), watch=True)
        if isinstance(stat, Stat):
            return True  # the path was made between our two reads
        if stat is not None:  # None: no path, the watch waits for its creation
            return not isinstance(stat, ClientClosedError | Wake)
    events = yield Wait(deadline)
    if isinstance(events, Wake):
        return False
    return not any(event.kind is WatchKind.CLOSED for event in events)


def has_candidates(reply: object, dialect: _dialects.Dialect = _dialects.ZKLOCKS) -> bool:
    """Does a (watched) listing of the path show a candidate?"""
    return isinstance(reply, list) and bool(candidates(reply, dialect))


def same_leader(a: Contender | None, b: Contender | None) -> bool:
    """One term is one node: a leader that resigned and won again is a change."""
    return (a is None and b is None) or (a is not None and b is not None and a.node == b.node)
