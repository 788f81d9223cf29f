"""The simulator with operations: leases bounded by ``max_hold`` and operators' revokes.

Every invariant holds over many schedules with both (and faults), both are exercised
(leases lost to the bound, revokes heard), and a planted revoke that deletes the
holders' nodes instead of asking them is caught and replays from its seed and plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

from zklocks._core.contenders import read_line
from zklocks._core.ops import Op
from zklocks._protocol.records import Delete
from zklocks.sim import SimulationFailure, explore, replay
from zklocks.sim.runner import Options, plan_for
from zklocks.sim.scheduler import Simulation

OPERATIONS = Options(operations=True)
BUDGET = 2_000


def test_schedules_with_max_hold_and_revokes_keep_every_invariant() -> None:
    stats = explore(range(BUDGET), options=OPERATIONS)
    assert stats.schedules == BUDGET
    assert stats.faults_fired["Revoke"] > BUDGET // 2


def test_the_bound_and_the_revokes_are_exercised() -> None:
    seen: Counter[str] = Counter()
    for seed in range(200):
        sim = Simulation(seed, plan_for(seed, OPERATIONS), operations=True)
        sim.run()
        for holding in sim.grants:
            lease = holding.lease
            seen["max_hold"] += "max_hold" in (lease._lost_reason or "")
            seen["revoked"] += lease._revoked
    assert seen["max_hold"] >= 20 and seen["revoked"] >= 20, seen


def test_default_scenarios_are_unchanged_by_operations() -> None:
    """Operations are drawn apart: without them a seed's scenario and plan are as before."""
    for seed in range(50):
        plain = plan_for(seed)
        assert plan_for(seed, OPERATIONS)[: len(plain)] == plain


def revoke_by_deleting(path: str) -> Generator[Op, Any, int]:
    """The planted bug: "revoke" that deletes every holder's node instead of asking."""
    read, holding = yield from read_line(path)
    for node, _ in read:
        if node.name in holding:
            yield Delete(f"{path}/{node.name}")
    return len(holding)


def test_a_planted_revoke_that_deletes_without_asking_is_caught() -> None:
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), options=OPERATIONS, revoke=revoke_by_deleting)
    failure = caught.value
    assert "revoke deleted" in failure.violation
    assert failure.schedules_run < 50  # every schedule with a holder at the revoke shows it
    with pytest.raises(SimulationFailure):
        replay(failure.seed, failure.plan, options=OPERATIONS, revoke=revoke_by_deleting)
    replay(failure.seed, failure.plan, options=OPERATIONS)  # the real revoke passes there
