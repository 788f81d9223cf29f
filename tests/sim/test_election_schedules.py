"""Elections under the simulator's faults: never two leaders, no candidate stuck for
ever, no node left behind, tokens growing with every leader."""

from __future__ import annotations

import pytest

from zklocks._strategies import GRANTED
from zklocks.sim import KNOWN_ISSUES, Options, SimulationFailure, explore, scenario_for

ELECTIONS = Options(families=("election",))
SCHEDULES = 1500


@pytest.mark.timeout(120)
def test_election_schedules_keep_every_invariant() -> None:
    stats = explore(range(SCHEDULES), options=ELECTIONS, known=KNOWN_ISSUES)
    print(stats.summary())
    assert stats.schedules == SCHEDULES
    assert dict(stats.families) == {"election": SCHEDULES}
    assert stats.with_faults > SCHEDULES / 2
    assert {"ExpireSession", "Pause", "Interrupt", "DropRequest"} <= set(stats.faults_fired)
    assert {"granted", "timed out", "interrupted"} <= set(stats.outcomes)


def test_a_planted_second_leader_is_caught() -> None:
    """Every candidate "leads" at once: the one-leader invariant must say so."""
    assert scenario_for(0, families=ELECTIONS.families).family == "election"
    with pytest.raises(SimulationFailure, match=r"out of turn|two non-lost leaders"):
        explore(range(200), options=ELECTIONS, decide=lambda me, queue: GRANTED)
