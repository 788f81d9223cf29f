"""The tickTime bound from the servers' session bounds, the cross-check against a given or
learnt tickTime, "no lease can be kept", and the liveness rule that moves off a silent
member before the lease's proof runs out (issue 32). No I/O: the real-server side is
tests/integration/test_stock_ensemble.py."""

from __future__ import annotations

import asyncio
import logging

import pytest

from zklocks import InvalidArgument
from zklocks._transport import lease_proofs
from zklocks._transport.lease_rule import OPTION, SyncChain, Timing
from zklocks._transport.liveness import Liveness
from zklocks._transport.session_bounds import SessionBounds, learn_bounds


def test_default_bounds_name_the_tick_exactly() -> None:
    bounds = SessionBounds(4000, 40000, "zk1:2181")
    assert bounds.agree and bounds.tick_bound == 2.0


@pytest.mark.parametrize(
    ("shortest", "longest", "bound", "agree"),
    [
        (8000, 40000, 4.0, False),  # min raised: over-states the tick (safe)
        (4000, 120000, 6.0, False),  # max raised
        (1000, 40000, 2.0, False),  # min lowered, max default: max/20 is exact
        (4000, 10000, 2.0, False),  # max lowered, min default: min/2 is exact
        (8000, 80000, 4.0, True),  # both raised in step: taken as exact (over-states)
    ],
)
def test_the_larger_bound_is_safe_unless_both_were_lowered(
    shortest: int, longest: int, bound: float, agree: bool
) -> None:
    bounds = SessionBounds(shortest, longest, "zk1:2181")
    assert bounds.tick_bound == bound and bounds.agree is agree


def test_a_tick_time_option_below_agreeing_bounds_is_refused_naming_both() -> None:
    bounds = SessionBounds(4000, 40000, "zk1:2181")
    with pytest.raises(InvalidArgument) as refused:
        lease_proofs._choose(Timing(0.5, OPTION), bounds)
    assert "tick_time=0.5 s" in str(refused.value) and "2 s" in str(refused.value)
    # at or above the bound: the option wins (it is the user's knowledge)
    assert lease_proofs._choose(Timing(2.0, OPTION), bounds) == Timing(2.0, OPTION)
    assert lease_proofs._choose(Timing(3.0, OPTION), bounds) == Timing(3.0, OPTION)
    # bounds that disagree prove nothing exact: an option below them stands
    loose = SessionBounds(1000, 40000, "zk1:2181")
    assert lease_proofs._choose(Timing(0.5, OPTION), loose) == Timing(0.5, OPTION)


def test_a_learnt_tick_below_agreeing_bounds_gives_way_to_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An AdminServer on port 8080 may be another server's: the larger, safe value wins."""
    bounds = SessionBounds(4000, 40000, "zk1:2181")
    chosen = lease_proofs._choose(Timing(0.2, "the AdminServer of zk1"), bounds)
    assert chosen is not None and chosen.tick == 2.0 and "session bounds" in chosen.source
    assert any("0.2 s" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert lease_proofs._choose(None, bounds) == chosen
    assert lease_proofs._choose(None, None) is None


def test_the_problem_names_cause_and_fix() -> None:
    short = SyncChain(4.0, 0.01, Timing(2.0, "session bounds of zk1:2181: 4 s to 40 s"))
    problem = lease_proofs._problem(short, "zk1:2181")
    assert problem is not None
    assert "4 s session" in problem and "tickTime 2 s" in problem
    assert "session_timeout of at least 8.5" in problem
    assert lease_proofs._problem(SyncChain(10.0, 0.01, Timing(2.0, OPTION)), "zk1:2181") is None
    raised = SessionBounds(4000, 60000, "zk1:2181")  # maxSessionTimeout raised to 60 s
    loose = SyncChain(10.0, 0.01, Timing(raised.tick_bound, raised.describe()))
    problem = lease_proofs._problem(loose, "zk1:2181", raised)
    assert problem is not None and "tickTime 3 s" in problem and "tick_time=" in problem
    assumed = SyncChain(10.0, 0.01, Timing(5.0, "assumed"))
    problem = lease_proofs._problem(assumed, "zk1:2181")
    assert problem is not None and "tick_time=" in problem


def test_a_clamped_handshake_saves_a_probe_and_nothing_answering_gives_none() -> None:
    """The user's own grant, clamped, is one bound; the other is asked (here: of a port
    where nothing listens, so the answer is None, never an exception)."""

    async def scenario() -> SessionBounds | str:
        return await learn_bounds(("127.0.0.1", 1), None, 1.0, 1000, 4000)

    assert "127.0.0.1:1" in str(asyncio.run(scenario()))


# ------------------------------------------------------------------- the liveness rule


def _live(now: float) -> Liveness:
    liveness = Liveness(session_timeout=10.0)  # reserve 0.6 s, quiet 0.4 s
    liveness.connected(now)
    return liveness


def test_a_silent_member_is_left_before_the_proof_runs_out() -> None:
    liveness = _live(100.0)
    lease_end = 105.0
    liveness.sent(103.0)  # a renewing sync, never answered (the member is paused)
    assert liveness.silent_before_lease_ends(104.0, lease_end) is None  # time enough
    waited = liveness.silent_before_lease_ends(104.4, lease_end)
    assert waited == pytest.approx(1.4)
    assert liveness.silent_before_lease_ends(105.0, lease_end) is None  # too late: lost


def test_a_member_that_answers_is_never_left_this_way() -> None:
    """The stalled-follower case: it answers (locally) though the proof runs out."""
    liveness = _live(100.0)
    lease_end = 105.0
    liveness.sent(104.2)
    liveness.heard(104.25)
    assert liveness.silent_before_lease_ends(104.6, lease_end) is None
    liveness.sent(104.5)  # answered within quiet: not silence yet
    assert liveness.silent_before_lease_ends(104.7, lease_end) is None


def test_a_probe_asks_once_when_nothing_is_outstanding() -> None:
    liveness = _live(100.0)
    lease_end = 105.0  # the window opens at 104.0
    assert not liveness.probe_due(103.9, lease_end)
    assert liveness.probe_due(104.0, lease_end)
    liveness.sent(104.0)  # the probe
    assert not liveness.probe_due(104.1, lease_end)
    liveness.heard(104.01)  # answered: no second probe in this window
    assert not liveness.probe_due(104.2, lease_end)
    assert not liveness.probe_due(106.0, lease_end)  # run out: asking is no use
    assert not liveness.probe_due(104.5, None)  # a standalone server: never
