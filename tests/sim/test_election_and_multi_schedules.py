"""Elections and multi-locks under the simulator's faults: never two leaders (nor two
holders of a path), no client stuck for ever (no missed wake-up, no deadlock), no node
left behind, tokens growing with every holder."""

from __future__ import annotations

import pytest

from zklocks._core import multilock as _multilock
from zklocks._core.strategies import GRANTED
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


MULTI = Options(families=("multi",))


@pytest.mark.timeout(120)
def test_multi_lock_schedules_never_deadlock() -> None:
    """Two locks given in random orders, taken as ``MultiLock`` takes them, under faults:
    one holder per path, every client finishes, nothing left behind."""
    stats = explore(range(600), options=MULTI, known=KNOWN_ISSUES)
    assert dict(stats.families) == {"multi": 600}
    assert stats.with_faults > 300
    assert {"granted", "timed out", "interrupted"} <= set(stats.outcomes)


def test_taken_in_the_given_order_the_simulator_finds_the_deadlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The global order is what prevents it: without it, {A, B} and {B, A} deadlock."""
    monkeypatch.setattr(_multilock, "global_order", lambda parts: list(range(len(parts))))
    with pytest.raises(SimulationFailure, match="deadlock"):
        explore(range(200), options=MULTI)
