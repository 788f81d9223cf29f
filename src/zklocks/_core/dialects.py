"""Node names as dialects: ours, Apache Curator's and kazoo's.

A lock path is a queue only if every contender in it names its node so that the others
can place it, and orders the line as they do. Three clients name nodes three ways
(measured against Curator 5.4 and kazoo 2.11; docs/interop.md, ``../shared/LAYOUTS.md``):

================  ========================================  ================================
dialect           names (ZooKeeper appends 10 digits)       whose children, in what order
================  ========================================  ================================
zklocks           ``lock-<hex32>-``, ``lease-<N>-<hex32>-``  ours only, by sequence (serial
                                                             arithmetic, right across the
                                                             32-bit wrap)
curator           ``_c_<uuid>-lock-``, ``…-__READ__``,       **every** child, by the text
                  ``…-__WRIT__``, ``…-lease-``               after the last marker (the whole
                                                             name if none), as strings
kazoo             ``<hex32>__lock__``, ``<hex32>__rlock__``  those ending in a marker and 10
                                                             digits, by those digits as text
================  ========================================  ================================

A dialect answers: what name to create for a kind (:meth:`Dialect.prefix`), what a name
of its own says (:meth:`Dialect.read`: kind, attempt token, sequence), and the line as a
contender of this dialect sees it (:meth:`Dialect.line_up_to`). The line is the peer's,
not ours: Curator counts a child it cannot read as a contender, sorted by its whole name,
so a Curator-layout contender must too, or it disagrees with Curator about who is first.

Reading for people (``contenders()``, ``zklocks status``) understands every dialect:
:func:`read_any`. The attempt token of a Curator node is its protected-create UUID, of a
kazoo node its uuid4 hex: both are per attempt, so protected create works in either.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import replace

from zklocks._core import kinds as _kinds
from zklocks._core import nodes as _nodes
from zklocks._core.nodes import NodeName


class Dialect:
    """How one client family names, reads and orders the nodes of a lock path."""

    name: str = ""
    kinds: frozenset[str] = frozenset()  # the kinds it can create

    def prefix(self, kind: str, attempt: str, permits: int | None = None) -> str:
        """The name to create for ``kind`` (ZooKeeper appends the sequence)."""
        raise NotImplementedError

    def read(self, name: str) -> NodeName | None:
        """The contender ``name`` denotes in this dialect, or None."""
        raise NotImplementedError

    def line_up_to(self, me: NodeName, children: Iterable[str]) -> list[NodeName] | None:
        """The line in this dialect's order, as ``me`` sees it; None if ``me`` is gone."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


class ZklocksDialect(Dialect):
    """Our own names (``zklocks._core.nodes``): the only dialect with a one-node lock.

    An election's line also carries, at its end, every child that is another client's
    candidate (``foreign_candidate``), so that the rules refuse the path: those clients
    ignore our nodes as we would ignore theirs, and each side would elect its own leader.
    """

    name = "zklocks"
    kinds = frozenset(_kinds.NAMES)

    def prefix(self, kind: str, attempt: str, permits: int | None = None) -> str:
        return _nodes.sequential_prefix(kind, attempt, permits)

    def read(self, name: str) -> NodeName | None:
        return _nodes.parse(name)

    def line_up_to(self, me: NodeName, children: Iterable[str]) -> list[NodeName] | None:
        names = list(children)
        line = _nodes.line_up_to(me, names)
        if line is None or me.kind != _kinds.ELECT.name:
            return line
        for name in names:
            whose = foreign_candidate(name)
            if whose is not None:
                line.append(NodeName(name, "foreign", "", 0, dialect=whose))
        return line


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_CURATOR = re.compile(
    rf"^(?:_c_({_UUID})-)?(lock-|__READ__|__WRIT__|lease-|latch-)(-?[0-9]{{9,10}})$"
)
# Curator's markers: ``lease-`` is SemaphoreV2's (the same word as our permit prefix),
# ``latch-`` LeaderLatch's (an election candidate).
_CURATOR_KIND = {
    "lock-": _kinds.LOCK.name,
    "__READ__": _kinds.READ.name,
    "__WRIT__": _kinds.WRITE.name,
    "lease-": _kinds.PERMIT.name,
    "latch-": _kinds.ELECT.name,
}
_CURATOR_MARKER = {kind: marker for marker, kind in _CURATOR_KIND.items()}
_TRAILING_NUMBER = re.compile(r"(-?[0-9]{9,10})$")


def _after_last(text: str, marker: str) -> str:
    """Curator's ``standardFixForSorting``: the text after the last ``marker``, else all."""
    index = text.rfind(marker)
    return text if index < 0 else text[index + len(marker) :]


def curator_mutex_key(name: str) -> str:
    """How ``InterProcessMutex`` orders a child: the text after the last ``lock-``."""
    return _after_last(name, "lock-")


def curator_latch_key(name: str) -> str:
    """How ``LeaderLatch`` orders a child: the text after the last ``latch-``."""
    return _after_last(name, "latch-")


def curator_read_write_key(name: str) -> str:
    """How ``InterProcessReadWriteLock`` orders a child: after ``__READ__``, then ``__WRIT__``."""
    return _after_last(_after_last(name, "__READ__"), "__WRIT__")


class CuratorDialect(Dialect):
    """Apache Curator's lock recipes (5.x): protected, container parents, string order.

    In the line every child counts. A child that is not Curator's own is placed where
    Curator places it (by its whole name, usually behind every Curator node) and takes
    the kind Curator gives it: a writer if its name contains ``__WRIT__`` (what a
    Curator reader checks), otherwise ``foreign`` (it blocks writers and mutex holders
    behind it, never readers). String order equals the servers' numeric order until the
    parent's counter wraps (2**31 child creations).
    """

    name = "curator"
    kinds = frozenset(_CURATOR_KIND.values())

    def prefix(self, kind: str, attempt: str, permits: int | None = None) -> str:
        if kind not in _CURATOR_MARKER:
            raise ValueError(f"Curator has no contender kind {kind!r}")
        return f"_c_{uuid.UUID(hex=attempt)}-{_CURATOR_MARKER[kind]}"

    def read(self, name: str) -> NodeName | None:
        match = _CURATOR.match(name)
        if match is None:
            return None
        token, marker, text = match.groups()
        attempt = token.replace("-", "") if token else ""
        return NodeName(name, _CURATOR_KIND[marker], attempt, int(text), dialect=self.name)

    def line_up_to(self, me: NodeName, children: Iterable[str]) -> list[NodeName] | None:
        names = list(children)
        if me.name not in names:
            return None
        if me.kind == _kinds.PERMIT.name:  # SemaphoreV2's leases: every child counts, in no order
            return [self._seen(name) for name in sorted(names)]
        key = curator_mutex_key
        if me.kind in (_kinds.READ.name, _kinds.WRITE.name):
            key = curator_read_write_key
        elif me.kind == _kinds.ELECT.name:
            key = curator_latch_key
        names.sort(key=key)  # stable, like Java's sort of the same listing
        return [self._seen(name) for name in names]

    def _seen(self, name: str) -> NodeName:
        node = self.read(name)
        if node is not None:
            return node
        match = _TRAILING_NUMBER.search(name)
        kind = _kinds.WRITE.name if "__WRIT__" in name else "foreign"
        return NodeName(name, kind, "", int(match.group(1)) if match else 0, dialect=self.name)


class CuratorSelectorDialect(CuratorDialect):
    """Apache Curator's ``LeaderSelector``: a candidate is an ``InterProcessMutex``
    contender on the election path (``_c_<uuid>-lock-<seq>``), and it leads while it
    holds the mutex: the first of every child in ``lock-`` order (LAYOUTS.md, section 9).
    Only elections: its nodes are Curator's mutex nodes, read as candidates here."""

    name = "curator-selector"
    kinds = frozenset({_kinds.ELECT.name})

    def prefix(self, kind: str, attempt: str, permits: int | None = None) -> str:
        if kind != _kinds.ELECT.name:
            raise ValueError(f"Curator's LeaderSelector has no contender kind {kind!r}")
        return super().prefix(_kinds.LOCK.name, attempt)

    def read(self, name: str) -> NodeName | None:
        node = super().read(name)
        if node is None or node.kind != _kinds.LOCK.name:
            return None
        return replace(node, kind=_kinds.ELECT.name, dialect=self.name)

    def line_up_to(self, me: NodeName, children: Iterable[str]) -> list[NodeName] | None:
        names = list(children)
        if me.name not in names:
            return None
        return [self._seen(name) for name in sorted(names, key=curator_mutex_key)]

    def _seen(self, name: str) -> NodeName:
        node = self.read(name)
        return node if node is not None else super()._seen(name)


_KAZOO = re.compile(r"^([0-9a-f]{32})(__lock__|__rlock__)(-?[0-9]{9,10})$")
_KAZOO_CONTENDER = re.compile(r"(__lock__|__rlock__)(-?[0-9]{10})$")  # kazoo's own search
_KAZOO_KIND = {"__lock__": _kinds.WRITE.name, "__rlock__": _kinds.READ.name}


class KazooDialect(Dialect):
    """kazoo's ``Lock``, ``ReadLock`` and ``WriteLock`` (2.x): uuid4 hex, string order.

    kazoo's ``Lock`` and ``WriteLock`` create the same ``__lock__`` node, so a
    ``__lock__`` node reads as a ``write`` (what it is to a reader): our exclusive lock
    in this layout waits for every earlier node, readers included, as a ``WriteLock``
    does. (kazoo's plain ``Lock`` ignores readers: do not mix it with ``ReadLock``.)
    The line is what kazoo's regex finds, ordered by the digits as text.
    """

    name = "kazoo"
    kinds = frozenset({_kinds.LOCK.name, _kinds.READ.name, _kinds.WRITE.name})

    def prefix(self, kind: str, attempt: str, permits: int | None = None) -> str:
        if kind not in self.kinds:
            raise ValueError(f"kazoo has no contender kind {kind!r}")
        return f"{attempt}{'__rlock__' if kind == 'read' else '__lock__'}"

    def read(self, name: str) -> NodeName | None:
        match = _KAZOO.match(name)
        if match is None:
            return None
        attempt, marker, text = match.groups()
        return NodeName(name, _KAZOO_KIND[marker], attempt, int(text), dialect=self.name)

    def line_up_to(self, me: NodeName, children: Iterable[str]) -> list[NodeName] | None:
        found = False
        keyed: list[tuple[str, NodeName]] = []
        for name in children:
            match = _KAZOO_CONTENDER.search(name)
            if match is None:
                continue
            found = found or name == me.name
            node = self.read(name) or NodeName(
                name, _KAZOO_KIND[match.group(1)], "", int(match.group(2)), dialect=self.name
            )
            keyed.append((match.group(2), node))
        if not found:
            return None
        keyed.sort(key=lambda pair: pair[0])
        return [node for _, node in keyed]


ZKLOCKS = ZklocksDialect()
CURATOR = CuratorDialect()
CURATOR_SELECTOR = CuratorSelectorDialect()
KAZOO = KazooDialect()
DIALECTS: dict[str, Dialect] = {d.name: d for d in (ZKLOCKS, CURATOR, CURATOR_SELECTOR, KAZOO)}


def curator_election_line(children: Iterable[str], dialect: Dialect) -> list[NodeName]:
    """The line of a Curator election as its ``getLeader()`` reads it: every child, in
    ``latch-`` order (``LeaderLatch``) or ``lock-`` order (``LeaderSelector``)."""
    if isinstance(dialect, CuratorSelectorDialect):
        return [dialect._seen(name) for name in sorted(children, key=curator_mutex_key)]
    return [CURATOR._seen(name) for name in sorted(children, key=curator_latch_key)]


# Curator's LeaderLatch: a protected ``latch-`` node (LAYOUTS.md, section 9). Its
# LeaderSelector stands in an InterProcessMutex, whose ``lock-`` nodes CURATOR reads.
_CURATOR_LATCH = re.compile(rf"^(?:_c_{_UUID}-)?latch-(-?[0-9]{{9,10}})$")


def foreign_candidate(name: str) -> str | None:
    """Whose candidate (or lock contender) ``name`` is when it is another client's: a
    phrase for an error message; None for ours and for children that are nobody's."""
    if _nodes.parse(name) is not None:
        return None
    if _CURATOR_LATCH.match(name):
        return "Curator's LeaderLatch"
    node = CURATOR.read(name)
    if node is not None:
        if node.kind == _kinds.LOCK.name:
            return "Curator's LeaderSelector or InterProcessMutex"
        return "Curator's lock recipes"
    if KAZOO.read(name) is not None:
        return "kazoo's Election or Lock"
    return None


def read_any(name: str) -> NodeName | None:
    """The contender ``name`` denotes in any known dialect (ours first), or None."""
    for dialect in (ZKLOCKS, CURATOR, KAZOO):
        node = dialect.read(name)
        if node is not None:
            return node
    return None


def line_of_any(children: Iterable[str]) -> list[NodeName]:
    """Every contender among ``children`` in any dialect, in creation order (the
    sequence, one counter per parent whoever created the child), ours first on a tie."""
    found = [node for node in map(read_any, children) if node is not None]
    if not found:
        return found
    reference = found[0].sequence - (1 << 31)

    def key(node: NodeName) -> tuple[int, str]:
        if node.single:
            return (-1, "")
        return ((node.sequence - reference) % (1 << 32), node.name)

    return sorted(found, key=key)


def with_permits(node: NodeName, permits: int | None) -> NodeName:
    """``node`` knowing ``permits``: a Curator lease's name does not carry its count."""
    return node if node.permits is not None or permits is None else replace(node, permits=permits)
