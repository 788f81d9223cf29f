"""The peers' layouts under the simulator's faults: zklocks contenders that name, order
and decide as Curator's or kazoo's would, with the same flow (protected create with the
peer's attempt tokens, cleanup on every way out, lease loss), judged by that layout's
true rules."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from zklocks._core.nodes import NodeName
from zklocks._core.strategies import GRANTED, Decision, WaitFor
from zklocks.sim import (
    KNOWN_ISSUES,
    Options,
    SimulationFailure,
    explore,
    parse_plan,
    plan_for,
    replay,
    scenario_for,
)
from zklocks.sim.scenario import LAYOUT_FAMILIES

SCHEDULES = 1000


@pytest.mark.timeout(120)
@pytest.mark.parametrize("layout", ["curator", "kazoo"])
def test_peer_layout_schedules_keep_every_invariant(layout: str) -> None:
    options = Options(layout=layout)
    stats = explore(range(SCHEDULES), options=options, known=KNOWN_ISSUES)
    print(stats.summary())
    assert stats.schedules == SCHEDULES
    assert set(stats.families) == set(LAYOUT_FAMILIES[layout])
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


SEMAPHORE_V2 = Options(layout="curator", families=("semaphore",))


@pytest.mark.timeout(120)
def test_semaphore_v2_schedules_keep_every_invariant() -> None:
    """Both stages under faults. This found a lease node left behind when an interrupt
    came while the mutex node was deleted after the grant, and a grant whose node an
    expired session had taken meanwhile."""
    stats = explore(range(SCHEDULES), options=SEMAPHORE_V2, known=KNOWN_ISSUES)
    assert dict(stats.families) == {"semaphore": SCHEDULES}
    assert {"ExpireSession", "DropRequest", "Interrupt"} <= set(stats.faults_fired)


@pytest.mark.parametrize(
    ("seed", "plan"),
    [
        (2380, None),  # a lease stage that rejoined alone after its session expired: deadlock
        (1, "interrupt:client=0,op=3,sent=0"),  # interrupted after the grant: lease left
        (177, "drop:client=2,request=15,applied=1,outage=0.572"),  # grant of a gone node
    ],
)
def test_seeds_that_found_the_semaphore_v2_bugs_pass(seed: int, plan: str | None) -> None:
    drawn = plan_for(seed, SEMAPHORE_V2) if plan is None else parse_plan(plan)
    replay(seed, drawn, options=SEMAPHORE_V2)
