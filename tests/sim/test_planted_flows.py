"""Plant the acquire flows of before issue 11; the simulator must find each, with the
faults and invariants added for it.

A planted flow is the real one, wrapped: the wrapper rewrites a few operations or
replies so that the flow behaves as the old one did. It is handed to the simulator as an
argument (``explore(acquire=...)``): nothing in the shipped code is patched.
"""

from __future__ import annotations

from typing import Any

import pytest

from flow_support import wrapped_flow
from zklocks._core import flow as _flow
from zklocks._core import nodes as _nodes
from zklocks._core.ops import Pipeline, SessionId, Wait
from zklocks._protocol.records import Created, Exists, GetChildren
from zklocks.sim import (
    KNOWN_ISSUES,
    DeleteNode,
    Options,
    SimulationFailure,
    explore,
    format_plan,
    parse_plan,
    replay,
    scenario_for,
)

BUDGET = 10_000  # the CI budget of test_schedules.py: a planted bug must fall well within


def trusting_takeover(spec: _flow.AcquireSpec) -> _flow.Flow:
    """Before issue 11: a waiter that takes over on its blocker's deletion trusts that
    its own node still exists, if its session is still the one that made it."""
    created: list[Created] = []

    def rewrite(op: Any, last: tuple[Any, Any]) -> Any:
        previous, reply = last
        if isinstance(previous, Pipeline) and isinstance(reply[0], Created):
            created[:] = [reply[0]]
        woke = isinstance(previous, Wait) and isinstance(reply, tuple)  # watch events
        if not (woke and isinstance(op, Exists) and created and op.path == created[0].path):
            return None

        def answer() -> _flow.Flow:
            session = yield SessionId()  # the old check, answered locally
            ours = created[0].stat
            return ours if session == ours.ephemeral_owner else None

        return answer()

    return wrapped_flow(_flow.acquire(spec), rewrite)


def blind_one_node(spec: _flow.AcquireSpec) -> _flow.Flow:
    """Before issue 11: the one-node lock never looked at the queue under its path."""
    if spec.fair:
        return _flow.acquire(spec)

    def without_queued(children: Any) -> Any:
        if not isinstance(children, list):
            return children
        return [name for name in children if (_nodes.parse(name) or _SINGLE).single]

    def rewrite(op: Any, last: tuple[Any, Any]) -> Any:
        if isinstance(op, GetChildren):
            return _answer(without_queued, op)
        if isinstance(op, Pipeline) and isinstance(op.requests[-1], GetChildren):
            return _answer(lambda r: (*r[:-1], without_queued(r[-1])), op)
        return None

    return wrapped_flow(_flow.acquire(spec), rewrite)


_SINGLE = _nodes.NodeName(_nodes.SINGLE_NODE, "lock", "", 0)


def _answer(change: Any, op: Any) -> _flow.Flow:
    return change((yield op))


def _found(failure: SimulationFailure, name: str) -> None:
    print(f"{name}: found after {failure.schedules_run} schedules\n{failure}")
    assert failure.schedules_run < BUDGET / 5  # well within the CI budget


def test_the_simulator_finds_a_grant_that_trusts_the_wake_up() -> None:
    """Issue 11, item 1: someone deletes a waiter's node; its blocker leaves; the old
    flow granted it anyway, beside the contender that was behind it."""
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), acquire=trusting_takeover, known=KNOWN_ISSUES)
    failure = caught.value
    _found(failure, "trusting_takeover")
    assert "a grant's node does not exist at the grant" in failure.violation
    assert any(isinstance(fault, DeleteNode) for fault in failure.plan)  # the new fault
    assert scenario_for(failure.seed).family != "single"
    # the same seed and plan replay the violation, and the real flow passes them
    with pytest.raises(SimulationFailure) as again:
        replay(failure.seed, failure.plan, acquire=trusting_takeover)
    assert again.value.violation == failure.violation
    assert replay(failure.seed, failure.plan).steps > 0


def test_the_simulator_finds_a_one_node_lock_barging_in_on_a_fair_holder() -> None:
    """Issue 11, item 4: a fair lock and a ``fair=False`` lock on one path."""
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), acquire=blind_one_node, known=KNOWN_ISSUES)
    failure = caught.value
    _found(failure, "blind_one_node")
    assert scenario_for(failure.seed).family == "mixed"
    # the one-node holder barged in: seen as two holders, as the queued contender's
    # grant landing behind a ``lock`` that is held, or as the grants' fencing tokens
    # out of order (a holder that barged in ahead of an earlier grant)
    violation = failure.violation
    assert (
        "two non-lost exclusive holders" in violation
        or "out of turn; the line is ['lock'," in violation
        or "fencing token went backwards" in violation
    )
    assert replay(failure.seed, failure.plan).steps > 0


def test_mixed_scenarios_can_be_explored_alone() -> None:
    mixed = Options(families=("mixed",))
    stats = explore(range(200), options=mixed)
    assert set(stats.families) == {"mixed"}
    assert stats.outcomes["refused"] > 0 and stats.outcomes["granted"] > 0
    with pytest.raises(SimulationFailure) as caught:
        explore(range(200), acquire=blind_one_node, options=mixed)
    assert "--families mixed" in str(caught.value)


def test_a_delete_fault_reads_back_from_its_text() -> None:
    plan = (DeleteNode(client=2, at=0.4),)
    assert format_plan(plan) == "delete:client=2,at=0.4"
    assert parse_plan(format_plan(plan)) == plan
