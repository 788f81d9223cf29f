"""Plant known bugs in a copy of a strategy; the simulator must find each within the budget.

The simulator runs the real flows with ``decide`` swapped for the planted copy; the
invariants judge with the true rules, so a planted rule cannot vouch for itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from zklocks._core import strategies as _strategies
from zklocks._core.kinds import EXCLUSIVE
from zklocks._core.lease import LeaseBase
from zklocks._core.lease_keeper import LeaseKeeper
from zklocks._core.nodes import NodeName
from zklocks.sim import (
    KNOWN_ISSUES,
    SimulationFailure,
    explore,
    parse_plan,
    replay,
    scenario_for,
)
from zklocks.sim.invariants import Checker

Strategy = Callable[[NodeName, Sequence[NodeName]], _strategies.Decision]
BUDGET = 10_000  # the CI budget of test_schedules.py: a planted bug must fall well within


def read_watches_later_writer(me: NodeName, queue: Sequence[NodeName]) -> _strategies.Decision:
    """kazoo #649: a reader looks for writers in the whole line, so it may wait for a
    writer queued *after* it, which waits for the reader: a deadlock."""
    if me.kind != "read":
        return _strategies.decide(me, queue)
    writers = [node for node in queue if node.kind in EXCLUSIVE]
    if writers:
        return _strategies.WaitFor((writers[-1].name,))
    return _strategies.GRANTED


def semaphore_watches_n_ahead(me: NodeName, queue: Sequence[NodeName]) -> _strategies.Decision:
    """Curator's old semaphore: watch only the node N places ahead. When another earlier
    node leaves first, the waiter may hold but is not woken."""
    if me.kind != "permit":
        return _strategies.decide(me, queue)
    ahead = [node for node in queue[: [n.name for n in queue].index(me.name)]]
    permits = me.permits or 1
    if len(ahead) < permits:
        return _strategies.GRANTED
    return _strategies.WaitFor((ahead[-permits].name,))


@pytest.mark.parametrize(
    ("planted", "family"),
    [(read_watches_later_writer, "rw"), (semaphore_watches_n_ahead, "semaphore")],
)
def test_the_simulator_finds_a_planted_missed_wake_up(planted: Strategy, family: str) -> None:
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), decide=planted, known=KNOWN_ISSUES)
    failure = caught.value
    print(f"{planted.__name__}: found after {failure.schedules_run} schedules\n{failure}")
    assert failure.schedules_run < BUDGET / 20  # found early, not by luck at the end
    assert scenario_for(failure.seed).family == family
    assert "missed wake-up" in failure.violation
    message = str(failure)
    assert f"seed {failure.seed}" in message and "fault plan:" in message
    assert f"--seed {failure.seed}" in message
    # the printed seed and plan replay the same violation, and the real rule passes them
    plan = parse_plan(message.split("fault plan: ", 1)[1].split("\n", 1)[0].replace("(none)", ""))
    assert plan == failure.plan
    with pytest.raises(SimulationFailure) as again:
        replay(failure.seed, plan, decide=planted)
    assert again.value.violation == failure.violation
    assert replay(failure.seed, plan).steps > 0


def test_a_deadlock_is_caught_at_quiescence_even_without_the_wake_up_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The per-step waiter check finds #649 at once; the end-of-run check must too."""
    monkeypatch.setattr(Checker, "_check_waiter", lambda self, client: None)
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), decide=read_watches_later_writer, known=KNOWN_ISSUES)
    failure = caught.value
    print(f"found after {failure.schedules_run} schedules\n{failure}")
    assert failure.schedules_run < BUDGET / 20
    assert "missed wake-up or deadlock: nothing can happen any more" in failure.violation
    assert "waits for ever" in failure.violation


def test_a_lease_that_ignores_the_clock_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A paused holder whose session expired must see its lease lost (``LeaseBase._check``)."""
    monkeypatch.setattr(LeaseBase, "_check", lambda self: self._lost_reason is not None)
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), known=KNOWN_ISSUES)
    failure = caught.value
    print(f"found after {failure.schedules_run} schedules\n{failure}")
    assert failure.schedules_run < BUDGET / 10
    assert "clock rule failed" in failure.violation or "non-lost" in failure.violation


def test_a_keeper_that_misses_loss_notices_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Session expiry and node deletion must reach the lease (``LeaseKeeper``)."""
    monkeypatch.setattr(LeaseKeeper, "track", lambda self, lease, watch_node: None)
    monkeypatch.setattr(LeaseKeeper, "on_state", lambda self, state: None)
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), known=KNOWN_ISSUES)
    failure = caught.value
    print(f"found after {failure.schedules_run} schedules\n{failure}")
    assert failure.schedules_run < BUDGET / 2  # within the CI budget, with room to spare
    assert "missed loss notice" in failure.violation or "non-lost" in failure.violation
