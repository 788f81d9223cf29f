"""The peers' layouts under the simulator's faults: zklocks contenders that name, order
and decide as Curator's or kazoo's would, with the same flow (protected create with the
peer's attempt tokens, cleanup on every way out, lease loss), judged by that layout's
true rules."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from zklocks._core.nodes import NodeName
from zklocks._core.strategies import GRANTED, Decision, WaitFor
from zklocks.sim import KNOWN_ISSUES, Options, SimulationFailure, explore, scenario_for

SCHEDULES = 1000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("layout", ["curator", "kazoo"])
def test_peer_layout_schedules_keep_every_invariant(layout: str) -> None:
    options = Options(layout=layout)
    stats = explore(range(SCHEDULES), options=options, known=KNOWN_ISSUES)
    print(stats.summary())
    assert stats.schedules == SCHEDULES
    assert set(stats.families) == {"mutex", "rw"}
    assert {"ExpireSession", "DropRequest", "DeleteNode", "Interrupt"} <= set(stats.faults_fired)
    assert {"granted", "timed out", "interrupted"} <= set(stats.outcomes)
    assert all(scenario_for(seed, layout=layout).start_cversion is None for seed in range(50))


def writer_ignores_readers(me: NodeName, queue: Sequence[NodeName]) -> Decision:
    """kazoo's own trap (its plain ``Lock`` beside a ``ReadLock``), planted everywhere:
    an exclusive contender waits only for earlier exclusive ones."""
    ahead = queue[: [node.name for node in queue].index(me.name)]
    writers = [node for node in ahead if node.kind != "read"]  # readers: right; writers: not
    return WaitFor((writers[-1].name,)) if writers else GRANTED


@pytest.mark.parametrize("layout", ["curator", "kazoo"])
def test_a_planted_rule_is_caught_in_a_peer_layout(layout: str) -> None:
    caught_by = "reader beside a non-lost writer|out of turn"
    with pytest.raises(SimulationFailure, match=caught_by) as caught:
        explore(range(400), options=Options(layout=layout), decide=writer_ignores_readers)
    assert f"--layout {layout}" in str(caught.value)  # the replay command says the layout
