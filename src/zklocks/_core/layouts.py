"""Layouts: whose queue a lock stands in, as one value carried by its config and spec.

A layout is a dialect (how nodes are named, read and ordered: ``zklocks._core.dialects``)
with the rules of who blocks whom in that queue (``zklocks._core.strategies``), plus the
kinds it has. ``layout="curator"`` makes a contender that Apache Curator's
``InterProcessMutex``, ``InterProcessReadWriteLock`` and ``InterProcessSemaphoreV2``
treat as one of their own (and that treats them so), and an election candidate that
Curator's ``LeaderLatch`` does; ``layout="curator-selector"`` an election candidate for
Curator's ``LeaderSelector``; ``layout="kazoo"`` the same for kazoo's ``Lock``,
``ReadLock`` and ``WriteLock``. Each layout's rules are the peer's, not
ours: in Curator's, a semaphore is SemaphoreV2's two stages (``two_stage_semaphore``).
A kind a layout lacks (a one-node lock, a kazoo semaphore) is refused when the lock is
made, before any request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from zklocks._core import dialects as _dialects
from zklocks._core import kinds as _kinds
from zklocks._core import nodes as _nodes
from zklocks._core import strategies as _strategies
from zklocks._errors import InvalidArgument


@dataclass(frozen=True, eq=False)
class Layout:
    """A dialect, its rules table, and what it offers."""

    name: str
    dialect: _dialects.Dialect
    rules: _strategies.Rules
    one_node_lock: bool = False  # fair=False
    two_stage_semaphore: bool = False  # Curator SemaphoreV2: inner mutex, then a lease
    # Missing parents are containers (the server deletes an empty lock path), as ours and
    # Curator's are; kazoo makes them persistent and fails if one is reaped under it.
    container_parents: bool = True

    def __repr__(self) -> str:
        return f"<layout {self.name}>"

    def with_rules(self, rules: _strategies.Rules) -> Layout:
        """The same layout deciding by ``rules`` (a seam for the simulator's planted bugs)."""
        return replace(self, rules=rules)


ZKLOCKS = Layout("zklocks", _dialects.ZKLOCKS, _strategies.ZKLOCKS_RULES, one_node_lock=True)
CURATOR = Layout("curator", _dialects.CURATOR, _strategies.CURATOR_RULES, two_stage_semaphore=True)
CURATOR_SELECTOR = Layout("curator-selector", _dialects.CURATOR_SELECTOR, _strategies.CURATOR_RULES)
KAZOO = Layout("kazoo", _dialects.KAZOO, _strategies.KAZOO_RULES, container_parents=False)
LAYOUTS: dict[str, Layout] = {
    layout.name: layout for layout in (ZKLOCKS, CURATOR, KAZOO, CURATOR_SELECTOR)
}
NAMES = tuple(LAYOUTS)


def choose(name: object, kind: _kinds.Kind, *, fair: bool = True) -> Layout:
    """The layout called ``name`` for a lock of ``kind``; ``InvalidArgument`` if there is
    no such layout or it has no such kind."""
    layout = LAYOUTS.get(name) if isinstance(name, str) else None
    if layout is None:
        raise InvalidArgument(f"layout must be one of {', '.join(NAMES)}, not {name!r}")
    if kind.name not in layout.dialect.kinds:
        raise InvalidArgument(f"the {layout.name} layout has no {kind.what}")
    if not fair and not layout.one_node_lock:
        raise InvalidArgument(
            f"the {layout.name} layout has no one-node lock (fair=False): its locks queue"
        )
    return layout


def holders(nodes: Iterable[_nodes.NodeName], children: Iterable[str]) -> set[str]:
    """The names of ``nodes`` (read by ``_dialects.read_any``) that hold, each judged as
    its own layout judges it: in its dialect's line of ``children``, by its rules.

    For people (``contenders()``, ``zklocks status``): a path used by two layouts at once
    can show two holders, because it has them.
    """
    names = list(children)
    nodes = list(nodes)
    ours = _nodes.queue(node.name for node in nodes if node.dialect == ZKLOCKS.name)
    holding = {node.name for node in ZKLOCKS.rules.holders(ours)}
    for node in nodes:
        layout = LAYOUTS[node.dialect]
        if layout is ZKLOCKS:
            continue
        line = layout.dialect.line_up_to(node, names)
        if line is not None and isinstance(layout.rules.decide(node, line), _strategies.Granted):
            holding.add(node.name)
    return holding
