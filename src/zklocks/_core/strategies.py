"""Who blocks whom: one pure rule per contender kind.

``decide(me, queue)`` looks at the contenders queued before ``me`` (``queue`` is in line
order and contains ``me``; only SemaphoreV2's count looks at the whole directory) and
answers:

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

The rules are a table ``{kind: rule}`` (:class:`Rules`), one per layout, handed to the
flow in its spec: ours above (``ZKLOCKS_RULES``), and the peers' own for a contender that
stands in a Curator or kazoo queue (``CURATOR_RULES``, ``KAZOO_RULES``: a Curator reader
is blocked only by nodes named ``__WRIT__``; a SemaphoreV2 lease holds while the lease
directory has at most N children, its own included). A kind the table lacks raises
``UnknownKind``: no kind silently borrows another's rule.

Every rule is monotone: removing predecessors never turns ``Granted`` into waiting. The
flow relies on that to decide again without re-listing after a watched node is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from zklocks._core import kinds as _kinds
from zklocks._core.nodes import NodeName


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

Rule: TypeAlias = Callable[[NodeName, Sequence[NodeName]], Decision]
"""``rule(me, queue)``: the decision for ``me`` from the whole line (``me`` included)."""


class UnknownKind(LookupError):
    """A rules table has no rule for a contender's kind (a programming error)."""


@dataclass(frozen=True, eq=False)
class Rules:
    """Who blocks whom, by contender kind: one table per layout, passed to the flow."""

    name: str
    table: Mapping[str, Rule]

    def decide(self, me: NodeName, queue: Sequence[NodeName]) -> Decision:
        """The rule for ``me``'s kind applied to ``queue``; ``UnknownKind`` if none."""
        rule = self.table.get(me.kind)
        if rule is None:
            raise UnknownKind(f"the {self.name} rules have no rule for kind {me.kind!r}")
        return rule(me, queue)

    def holders(self, queue: Sequence[NodeName]) -> list[NodeName]:
        """The contenders of ``queue`` this table grants, in line order."""
        return [node for node in queue if isinstance(self.decide(node, queue), Granted)]

    @classmethod
    def everywhere(cls, name: str, rule: Rule, kinds: Sequence[str]) -> Rules:
        """One ``rule`` for every kind in ``kinds`` (the simulator plants bugs so)."""
        return cls(name, {kind: rule for kind in kinds})


def _ours(kind_rule: Callable[[NodeName, Sequence[NodeName]], Decision]) -> Rule:
    """Our rule for a kind: refuse a path used two ways first, then the kind's rule."""

    def rule(me: NodeName, queue: Sequence[NodeName]) -> Decision:
        refusal = _mixing(me, queue)
        return refusal if refusal is not None else kind_rule(me, _ahead_of(me, queue))

    return rule


def _exclusive_rule(me: NodeName, ahead: Sequence[NodeName]) -> Decision:
    return _exclusive(ahead)


def _read_rule(me: NodeName, ahead: Sequence[NodeName]) -> Decision:
    return _read(ahead)


ZKLOCKS_RULES = Rules(
    "zklocks",
    {
        _kinds.LOCK.name: _ours(_exclusive_rule),
        _kinds.WRITE.name: _ours(_exclusive_rule),
        _kinds.ELECT.name: _ours(_exclusive_rule),
        _kinds.READ.name: _ours(_read_rule),
        _kinds.PERMIT.name: _ours(lambda me, ahead: _permit(me, ahead)),
    },
)


def decide(me: NodeName, queue: Sequence[NodeName]) -> Decision:
    """Our rule for ``me``'s kind applied to the contenders before it."""
    return ZKLOCKS_RULES.decide(me, queue)


def _ahead_of(me: NodeName, queue: Sequence[NodeName]) -> Sequence[NodeName]:
    for index, node in enumerate(queue):
        if node.name == me.name:
            return queue[:index]
    raise ValueError(f"{me.name} is not in the queue")


# Contenders of two uses on one path (``Kind.use``) disagree about what the path is: a
# lock holder must not count as a leader, nor a semaphore permit as a lock.
def _mixing(me: NodeName, queue: Sequence[NodeName]) -> Refused | None:
    mine = _kinds.use_of(me.kind)
    for other in queue:
        if other.kind == "foreign":  # an election's line: another client's candidate
            return Refused(
                f"{other.name} is a candidate of {other.dialect}, which ignores ours as we "
                "ignore its: each would elect a leader. A zklocks election shares its "
                "path with zklocks candidates only (docs/interop.md)"
            )
        theirs = _kinds.use_of(other.kind)
        if theirs != mine:
            first, second = sorted((mine, theirs), key=_kinds.USE_ORDER.index)
            return Refused(f"this path is used both as {first} and as {second}")
        if me.kind == _kinds.PERMIT.name and other.permits != me.permits:
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
        if node.kind in _kinds.EXCLUSIVE:
            return WaitFor((node.name,))
    return GRANTED


def _permit(me: NodeName, ahead: Sequence[NodeName]) -> Decision:
    permits = me.permits or 1
    if len(ahead) < permits:
        return GRANTED
    return WaitFor(tuple(node.name for node in ahead[-permits:]))


def holders(queue: Sequence[NodeName]) -> list[NodeName]:
    """The contenders of ``queue`` that hold now by our rules, in line order."""
    return ZKLOCKS_RULES.holders(queue)


# -- the peers' rules ------------------------------------------------------------------


def _first(me: NodeName, queue: Sequence[NodeName]) -> Decision:
    """Curator's mutex and write lock, kazoo's lock: hold when first of the whole line."""
    return _exclusive(_ahead_of(me, queue))


def _curator_read(me: NodeName, queue: Sequence[NodeName]) -> Decision:
    """A Curator reader holds unless a ``__WRIT__`` node is before it; it waits for the
    nearest one (Curator watches the first; either is correct, the nearest wakes once)."""
    for node in reversed(_ahead_of(me, queue)):
        if node.kind == _kinds.WRITE.name:
            return WaitFor((node.name,))
    return GRANTED


def _curator_lease(me: NodeName, queue: Sequence[NodeName]) -> Decision:
    """SemaphoreV2: the lease holds while the lease directory has at most N children
    (every child, ours included); it waits until any other one goes. A lease node's
    name does not say N: one read from a listing (``contenders()``) counts as holding."""
    _ahead_of(me, queue)  # me must be in it
    if me.permits is None or len(queue) <= me.permits:
        return GRANTED
    return WaitFor(tuple(node.name for node in queue if node.name != me.name))


CURATOR_RULES = Rules(
    "curator",
    {
        _kinds.LOCK.name: _first,
        _kinds.WRITE.name: _first,
        _kinds.READ.name: _curator_read,
        _kinds.PERMIT.name: _curator_lease,
        _kinds.ELECT.name: _first,  # LeaderLatch: first of every child in latch- order leads
    },
)
KAZOO_RULES = Rules(
    "kazoo",
    {_kinds.WRITE.name: _first, _kinds.READ.name: lambda me, queue: _read(_ahead_of(me, queue))},
)
