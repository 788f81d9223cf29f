"""Issue 28, item 2: may a waiter skip the ``exists`` of its own node on a takeover when
no reconnect happened since its watches were set?

Not with the watches it sets today. Within one connection ZooKeeper delivers a client's
events in zxid order, but that proves our node still exists only if we hold a watch on
our own node: the waiter watches its predecessor alone, so the deletion of our node by
another client (issue 11) reaches nobody but the contender behind us. The planted flow
below skips the check whenever it saw no sign of a lost connection; the simulator finds
two holders with deletion faults alone, no connection fault needed. docs/locks.md ("Who
wakes whom") gives the reason for every request of a contended acquisition.
"""

from __future__ import annotations

from typing import Any

import pytest

from flow_support import wrapped_flow
from zklocks._core import flow as _flow
from zklocks._core.ops import Pipeline, Wait
from zklocks._protocol.errors import ConnectionLossError, SessionExpiredError
from zklocks._protocol.records import Created, Exists
from zklocks.sim import KNOWN_ISSUES, DeleteNode, SimulationFailure, explore, replay

BUDGET = 10_000  # the CI budget of test_schedules.py: the planted flow must fail well within


def one_connection_takeover(spec: _flow.AcquireSpec) -> _flow.Flow:
    """The real flow, except that a takeover on a wake-up trusts the wake-up, unless a
    reply since the watches were set showed a lost connection or session."""
    created: list[Created] = []
    cut_off = [False]  # a reply since the last watch pipeline showed the connection broke

    def rewrite(op: Any, last: tuple[Any, Any]) -> Any:
        previous, reply = last
        if isinstance(previous, Pipeline):
            if isinstance(reply[0], Created):
                created[:] = [reply[0]]
            if previous.watch:
                cut_off[0] = False
        replies = reply if isinstance(reply, tuple) else (reply,)
        if any(isinstance(r, ConnectionLossError | SessionExpiredError) for r in replies):
            cut_off[0] = True
        woke = isinstance(previous, Wait) and isinstance(reply, tuple)  # watch events
        ours = isinstance(op, Exists) and created and op.path == created[0].path
        if not (woke and ours) or cut_off[0]:
            return None
        return _answer(created[0].stat)

    return wrapped_flow(_flow.acquire(spec), rewrite)


def _answer(reply: Any) -> _flow.Flow:
    return reply
    yield  # a generator that yields nothing: the reply without a request


def test_a_takeover_without_a_reconnect_still_needs_proof_that_our_node_exists() -> None:
    with pytest.raises(SimulationFailure) as caught:
        explore(range(BUDGET), acquire=one_connection_takeover, known=KNOWN_ISSUES)
    failure = caught.value
    print(f"found after {failure.schedules_run} schedules\n{failure}")
    assert failure.schedules_run < BUDGET / 5
    assert "a grant's node does not exist at the grant" in failure.violation
    # shrunk: another client's delete is the whole plan, the connection never broke
    assert failure.plan and all(isinstance(fault, DeleteNode) for fault in failure.plan)
    # the real flow, with its exists, keeps the invariants on the same schedule
    assert replay(failure.seed, failure.plan).steps > 0
