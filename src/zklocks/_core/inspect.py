"""Read-only views of locks for people and tools: ``client.locks()``, ``line_up`` and
``client.delete_tree()`` (``zklocks status``, ``ls``, ``serve`` and ``demo`` use them).

Like ``list_contenders`` these are flows (no I/O: they yield ``zklocks._core.ops`` and are
sent replies), run by the clients' drivers. Who holds and whom each waiter watches are
computed with the very strategies the locks use (``zklocks._core.strategies.decide``), so
what an operator sees is what the locks decide, not a second opinion.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from zklocks._core import dialects as _dialects
from zklocks._core import layouts as _layouts
from zklocks._core import nodes as _nodes
from zklocks._core.contenders import Contender
from zklocks._core.flow import access_denied
from zklocks._core.kinds import ELECT, LOCK, PERMIT, READ, WRITE
from zklocks._core.ops import Op, Pipeline, SessionId
from zklocks._core.strategies import Granted, Refused, WaitFor
from zklocks._errors import LockError
from zklocks._protocol.constants import AddWatchMode
from zklocks._protocol.errors import (
    ConnectionLossError,
    MarshallingError,
    NoAuthError,
    NoNodeError,
    UnimplementedError,
    ZooKeeperError,
)
from zklocks._protocol.records import (
    AddWatch,
    Children,
    Delete,
    Exists,
    GetChildren,
    Stat,
)
from zklocks._vocabulary import Watcher

#: Requests per pipelined round trip when walking a tree.
BATCH = 256
RESERVED = "/zookeeper"


@dataclass(frozen=True, slots=True)
class Place:
    """A contender and where it stands: its place in line and whom it waits for.

    ``waits_for`` holds the full paths of the nodes the contender watches (empty for a
    holder): the watch chain. ``refused`` says why a contender can never be granted
    (e.g. semaphore contenders that disagree on the permits).
    """

    contender: Contender
    place: int
    waits_for: tuple[str, ...] = ()
    refused: str | None = None

    @property
    def holder(self) -> bool:
        return self.contender.holder


def line_up(contenders: Sequence[Contender]) -> list[Place]:
    """``contenders`` in line order, each with the nodes it watches (the watch chain)."""
    by_name = {c.node.rsplit("/", 1)[1]: c for c in contenders}
    ours = _nodes.queue(by_name)
    places: list[Place] = []
    # Each contender judged as its own layout judges it (a Curator or kazoo contender
    # in its peer's line and rules); shown in creation order.
    for index, me in enumerate(_dialects.line_of_any(by_name), start=1):
        contender = by_name[me.name]
        parent = contender.node.rsplit("/", 1)[0]
        layout = _layouts.LAYOUTS[me.dialect]
        line = ours if layout is _layouts.ZKLOCKS else layout.dialect.line_up_to(me, by_name)
        decision = layout.rules.decide(me, line or [me])
        if isinstance(decision, WaitFor):
            places.append(Place(contender, index, tuple(f"{parent}/{n}" for n in decision.nodes)))
        elif isinstance(decision, Refused):
            places.append(Place(contender, index, refused=decision.reason))
        else:
            assert isinstance(decision, Granted)
            places.append(Place(contender, index))
    return places


def short_name(node: str) -> str:
    """``lock-<32 hex>-0000000007`` -> ``lock-…0007``: enough to tell nodes apart."""
    name = node.rsplit("/", 1)[1]
    peer = _dialects.read_any(name)
    if peer is not None and peer.dialect != "zklocks":  # Curator's, kazoo's
        return f"{peer.dialect}:{peer.kind}-…{name[-4:]}"
    parts = name.split("-")
    if len(parts) >= 3 and parts[-1].lstrip("-").isdigit():
        return f"{parts[0]}-…{parts[-1][-4:]}"
    return name


@dataclass(frozen=True, slots=True)
class LockSummary:
    """One lock path found under a root, for ``zklocks ls``.

    With ``locks(left_behind=True)`` (``zklocks doctor``) a summary may also be a
    directory left behind: a persistent node with no child that once had some, with no
    contender (``left_behind``); ``strangers`` then names the children of a lock's
    directory that no known layout (zklocks, Curator, kazoo) makes and that never had
    children of their own (a directory below, such as a nested lock's, is no stranger).
    """

    path: str
    kinds: tuple[str, ...]  # distinct contender kinds, in line order
    permits: int | None  # a semaphore's permits
    holders: int
    waiters: int
    tokens: tuple[int, ...]  # the holders' fencing tokens, in line order
    strangers: tuple[str, ...] = ()

    @property
    def left_behind(self) -> bool:
        """An empty directory left behind (only ``locks(left_behind=True)`` lists them)."""
        return not self.kinds

    @property
    def kind(self) -> str:
        """In words: "lock", "read/write", "semaphore(3)", "election", ..."""
        if PERMIT.name in self.kinds:  # a Curator lease does not say its permits
            return "semaphore" if self.permits is None else f"semaphore({self.permits})"
        if ELECT.name in self.kinds:
            return ELECT.words
        if set(self.kinds) & {READ.name, WRITE.name}:
            return "read/write"
        return LOCK.words


def _join(parent: str, child: str) -> str:
    return f"/{child}" if parent == "/" else f"{parent}/{child}"


def walk_locks(root: str, left_behind: bool = False) -> Generator[Op, Any, list[LockSummary]]:
    """Every lock path at or under ``root`` (sorted), with holder and waiter counts.

    A lock path is a node with contender children; every other child is descended
    into (contender nodes are ephemeral and have none). Each level is read in
    pipelined batches, so the walk costs about one round trip per level.
    ``left_behind``: each node's stat is read with its children (getChildren2), to tell
    the directories left empty and the strangers in a lock's directory (``LockSummary``).
    """
    found: list[tuple[str, list[_nodes.NodeName], list[str]]] = []
    empty: list[str] = []
    strangers: dict[str, list[str]] = {}
    frontier = [root]
    while frontier:
        chunk, frontier = frontier[:BATCH], frontier[BATCH:]
        replies = yield Pipeline(tuple(GetChildren(path, with_stat=left_behind) for path in chunk))
        for path, reply in zip(chunk, replies, strict=True):
            if isinstance(reply, Children):
                if not reply.names:
                    _sort_empty(path, reply.stat, strangers, empty)
                reply = reply.names
            if isinstance(reply, ConnectionLossError):
                frontier.append(path)  # sent again once the connection is back
                continue
            if isinstance(reply, NoNodeError):
                continue  # deleted meanwhile
            if isinstance(reply, NoAuthError):
                if path == root:
                    raise access_denied(path, "list")
                continue  # another identity's locks (docs/security.md): not ours to show
            if not isinstance(reply, list):
                raise LockError(f"cannot list {path}: {reply}")
            line = _dialects.line_of_any(reply)
            if line:
                found.append((path, line, reply))
                strangers[path] = []
            contenders = {node.name for node in line}
            for child in sorted(reply):
                below = _join(path, child)
                if child not in contenders and below != RESERVED:
                    frontier.append(below)
    summaries = [LockSummary(path, (), None, 0, 0, ()) for path in empty]
    for path, line, children in sorted(found, key=lambda item: item[0]):
        held = _layouts.holders(line, children)
        holding = [node for node in line if node.name in held]
        tokens = yield from _tokens([f"{path}/{node.name}" for node in holding])
        permits = next((node.permits for node in line if node.permits), None)
        summaries.append(
            LockSummary(
                path=path,
                kinds=tuple(dict.fromkeys(node.kind for node in line)),
                permits=permits,
                holders=len(holding),
                waiters=len(line) - len(holding),
                tokens=tokens,
                strangers=tuple(sorted(strangers.get(path, ()))),
            )
        )
    return sorted(summaries, key=lambda summary: summary.path)


def _sort_empty(path: str, stat: Stat, strangers: dict[str, list[str]], empty: list[str]) -> None:
    """A node with no child: a stranger in a lock's directory if it never had any (a
    lock's directory is read before the level below it), a directory left behind if it
    had some and no session owns it (a container, which ZooKeeper itself removes once
    empty, has an owner of its own), else nothing of ours."""
    parent, name = path.rsplit("/", 1)
    if stat.cversion == 0 and (parent or "/") in strangers:
        strangers[parent or "/"].append(name)
    elif stat.cversion > 0 and stat.ephemeral_owner == 0:
        empty.append(path)


def _tokens(nodes: list[str]) -> Generator[Op, Any, tuple[int, ...]]:
    """The fencing tokens (creation zxids) of ``nodes``; vanished ones are left out."""
    tokens: list[int] = []
    for start in range(0, len(nodes), BATCH):
        chunk = nodes[start : start + BATCH]
        replies = yield Pipeline(tuple(Exists(node) for node in chunk))
        tokens.extend(reply.czxid for reply in replies if isinstance(reply, Stat))
    return tuple(tokens)


def delete_tree(root: str) -> Generator[Op, Any, list[str]]:
    """Delete ``root`` and everything under it, deepest first; the paths left over.

    A node that gains a child meanwhile (someone still queueing) is left and reported.
    """
    levels: list[list[str]] = []
    frontier = [root]
    while frontier:
        levels.append(frontier)
        replies = yield Pipeline(tuple(GetChildren(path) for path in frontier))
        below: list[str] = []
        for path, reply in zip(frontier, replies, strict=True):
            if isinstance(reply, list):
                below.extend(_join(path, child) for child in reply)
        frontier = below
    left: list[str] = []
    for level in reversed(levels):
        replies = yield Pipeline(tuple(Delete(path) for path in level))
        for path, reply in zip(level, replies, strict=True):
            if isinstance(reply, ZooKeeperError) and not isinstance(reply, NoNodeError):
                left.append(path)  # NotEmptyError: someone queued meanwhile
    return left


def watch_lock(path: str, watcher: Watcher) -> Generator[Op, Any, bool]:
    """Set a watch that calls ``watcher`` once when a contender joins or leaves ``path``
    (or ``path`` is created); False when a change may already have happened (or the
    read failed), so the caller should look again at once.

    Set it, *then* list the contenders, then wait: a change after the listing fires the
    watch, so none is missed.
    """
    (reply,) = yield Pipeline((GetChildren(path),), watcher=watcher)
    if isinstance(reply, NoNodeError):
        # no lock path yet: an exists-watch fires when it is created
        (reply,) = yield Pipeline((Exists(path),), watcher=watcher)
        return reply is None  # else created in between (a Stat), or an error
    return isinstance(reply, list)


def watch_tree(roots: Sequence[str], watcher: Watcher) -> Generator[Op, Any, None]:
    """One persistent recursive watch (ZooKeeper 3.6+ ``addWatch``) per root, calling
    ``watcher`` for every node created, deleted or changed below it, for the session's
    life. A server before 3.6 does not know ``addWatch`` (it may drop the connection)."""
    # addWatch is not among the lock flows' requests (ops.Request); the session sends
    # any request the codec knows
    requests: Any = tuple(AddWatch(root, AddWatchMode.PERSISTENT_RECURSIVE) for root in roots)
    replies = yield Pipeline(requests, watcher=watcher)
    for root, reply in zip(roots, replies, strict=True):
        if isinstance(reply, (UnimplementedError, MarshallingError)):
            raise LockError(f"cannot watch {root}: ZooKeeper 3.6 or later is needed")
        if isinstance(reply, NoAuthError):
            raise access_denied(root, "watch")
        if isinstance(reply, BaseException):
            raise LockError(f"cannot watch {root}: {reply}")


def session_id() -> Generator[Op, Any, int]:
    """The id of the session the client has now (a new one has no watches)."""
    found: int = yield SessionId()
    return found
