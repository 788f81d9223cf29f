"""Who blocks whom: one pure rule per contender kind.

``decide(me, queue)`` looks only at the contenders queued before ``me`` (``queue`` is in
line order and contains ``me``) and answers:

* ``Granted``: ``me`` holds.
* ``WaitFor(nodes)``: ``me`` may not hold while *all* of ``nodes`` exist; wake when one
  of them is deleted, then decide again.
* ``Refused(reason)``: the contenders disagree about what this path is (a semaphore with
  other permits, a semaphore and a lock on one path).

The rules:

* exclusive (``lock``, ``write``): held when first; waits for its immediate predecessor.
* ``read``: held when no exclusive node is before it; waits for the nearest earlier one
  (so a reader behind a queued writer waits: writers are not starved).
* ``elect`` (a leader-election candidate): exclusive, so the head of the line leads and
  each candidate watches only its predecessor; it never shares a path with a lock kind.
* ``lease`` (semaphore of N permits): held when fewer than N contenders are before it.
  It waits for *all* of the N contenders immediately before it. While those N exist, at
  least N are ahead, so it cannot be granted unwoken: no missed wake-up. Watching only
  "the node N places ahead" misses one: when a *different* earlier node leaves, the
  waiter becomes a holder without being woken. The price is at most N wake-ups per
  release, never the whole queue.

Every rule is monotone: removing predecessors never turns ``Granted`` into waiting. The
flow relies on that to decide again without re-listing after a watched node is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from zklocks._core.nodes import ELECTION_KIND, EXCLUSIVE_KINDS, NodeName


@dataclass(frozen=True, slots=True)
class Granted:
    """The contender holds the lock."""


@dataclass(frozen=True, slots=True)
class WaitFor:
    """The contender cannot hold while all of ``nodes`` (child names) exist."""

    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Refused:
    """The contenders under this path disagree about what the path is."""

    reason: str


Decision: TypeAlias = Granted | WaitFor | Refused
GRANTED = Granted()


def decide(me: NodeName, queue: Sequence[NodeName]) -> Decision:
    """The rule for ``me``'s kind applied to the contenders before it."""
    ahead = _ahead_of(me, queue)
    refusal = _mixing(me, queue)
    if refusal is not None:
        return refusal
    if me.kind in EXCLUSIVE_KINDS:
        return _exclusive(ahead)
    if me.kind == "read":
        return _read(ahead)
    return _lease(me, ahead)


def _ahead_of(me: NodeName, queue: Sequence[NodeName]) -> Sequence[NodeName]:
    for index, node in enumerate(queue):
        if node.name == me.name:
            return queue[:index]
    raise ValueError(f"{me.name} is not in the queue")


# What a path is used as, by contender kind; every other kind is a lock. Contenders of
# two uses on one path disagree about what the path is: a lock holder must not count as
# a leader, nor a semaphore permit as a lock. Listed in the order messages name them.
_USES = {"lease": "a semaphore", ELECTION_KIND: "an election"}
_USE_ORDER = ("a semaphore", "an election", "a lock")


def _use(kind: str) -> str:
    return _USES.get(kind, "a lock")


def _mixing(me: NodeName, queue: Sequence[NodeName]) -> Refused | None:
    mine = _use(me.kind)
    for other in queue:
        theirs = _use(other.kind)
        if theirs != mine:
            first, second = sorted((mine, theirs), key=_USE_ORDER.index)
            return Refused(f"this path is used both as {first} and as {second}")
        if me.kind == "lease" and other.permits != me.permits:
            return Refused(
                f"semaphore contenders disagree on permits: {other.permits} (node "
                f"{other.name}) and {me.permits} (ours)"
            )
    return None


def _exclusive(ahead: Sequence[NodeName]) -> Decision:
    if not ahead:
        return GRANTED
    return WaitFor((ahead[-1].name,))


def _read(ahead: Sequence[NodeName]) -> Decision:
    for node in reversed(ahead):
        if node.kind in EXCLUSIVE_KINDS:
            return WaitFor((node.name,))
    return GRANTED


def _lease(me: NodeName, ahead: Sequence[NodeName]) -> Decision:
    permits = me.permits or 1
    if len(ahead) < permits:
        return GRANTED
    return WaitFor(tuple(node.name for node in ahead[-permits:]))


def holders(queue: Sequence[NodeName]) -> list[NodeName]:
    """The contenders of ``queue`` that hold now, in line order."""
    return [node for node in queue if isinstance(decide(node, queue), Granted)]
