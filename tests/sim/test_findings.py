"""Bugs the simulator found in the flows, pinned by seed and plan (see docs/simulation.md).

While an issue is listed in ``zklocks.sim.KNOWN_ISSUES`` its test xfails if the schedule
still shows exactly that violation, and fails if it shows another one or none (then the
bug is fixed: remove the entry, so the 10,000-schedule run checks it everywhere). Once
the entry is gone, each test is a plain regression test: the schedule must pass.
"""

from __future__ import annotations

import pytest

from zklocks.sim import (
    KNOWN_ISSUES,
    Options,
    SimulationFailure,
    parse_plan,
    replay,
    scenario_for,
)

SINGLE = Options(families=("single",))
ALL = Options()


def check(issue_name: str, seed: int, plan: str, options: Options = ALL) -> None:
    family = scenario_for(seed, families=options.families).family
    try:
        replay(seed, parse_plan(plan), options=options)
        violation = ""
    except SimulationFailure as failure:
        violation = failure.violation
    issue = next((k for k in KNOWN_ISSUES if k.name == issue_name), None)
    if issue is None:
        assert violation == "", f"regression of the fixed issue {issue_name!r}"
    elif issue.matches(family, violation):
        pytest.xfail(f"known issue: {issue_name}")
    else:
        pytest.fail(
            f"seed {seed} no longer shows the known issue {issue_name!r} "
            f"({violation or 'it passes'}); if it is fixed, remove it from KNOWN_ISSUES"
        )


@pytest.mark.parametrize(
    ("seed", "plan"),
    [
        # c0's session expires while it holds; c3 takes the lock; c0's release (its lease
        # already lost, and known lost) deletes c3's node; c0 acquires again: two holders.
        (280, "expire:client=0,at=0.049"),
        # c0's release Delete is applied but the reply is lost; c3 takes the lock; c0's
        # retried Delete deletes c3's node.
        (684, "drop:client=0,request=5,applied=1,outage=0.146"),
    ],
)
def test_one_node_lock_release_never_deletes_another_holders_node(seed: int, plan: str) -> None:
    check("single-node release deletes another's node", seed, plan, SINGLE)


def test_acquire_retries_when_the_session_expires_while_making_the_lock_path() -> None:
    # c1's create finds no lock path; the connection drops for longer than its session
    # timeout; the creates of the lock path that follow (then a ``CreateParents``
    # operation) are answered SessionExpiredError, and the acquire raised LockError
    # instead of going on in the new session, as every other step of the flow does
    # after an expiry.
    check(
        "CreateParents refused by an expired session raises LockError",
        419,
        "drop:client=1,request=1,applied=0,outage=0.613",
    )


def test_an_interrupt_during_the_cleanup_delete_still_deletes_our_node() -> None:
    # c2's acquire times out; KeyboardInterrupt lands while its cleanup Delete has not
    # reached the server (waiting for a connection, or lost to a drop): the flow re-raises
    # at once and its node stays until the session ends, blocking everyone behind it.
    check(
        "an interrupt during the cleanup Delete leaves the node",
        213,
        "interrupt:client=2,op=3,sent=0",  # op=2 while a wait was one operation
    )


def test_a_late_end_of_an_older_session_does_not_make_a_waiter_leave_its_node() -> None:
    """c0 (Curator's semaphore) waits on a lease with a watch set in its first session,
    which expires; it starts over in a new session and waits again. The old watch's
    ``SESSION_LOST`` reaches the inbox only then: taken for the end of the new session,
    it made c0 start over again and leave its live lease node behind."""
    plan = "expire:client=0,at=0.542; drop:client=3,request=7,applied=1,outage=0.222"
    check("late session end", 15640, plan, Options(layout="curator"))


def test_a_late_deletion_of_an_earlier_one_node_lock_grants_no_queued_waiter() -> None:
    """c0 (a fair lock) waits on c1's one-node ``lock`` and times out; c1 takes ``lock``
    again; c0 waits on it anew. The deletion event of the first ``lock`` arrives late,
    on the same name: taken as a takeover, c0 held beside c1."""
    check("late lock deletion", 96020, "delay:client=0,event=0,delay=0.245")


def test_curators_semaphore_never_waits_for_a_lease_beside_the_mutex_holder() -> None:
    """c2 holds the mutex; its session expires while its lease's create is retried; the
    lease node is made in the new session, without the mutex, and waits beside the new
    mutex holder's: with one permit, both wait for ever."""
    plan = "drop:client=2,request=8,applied=1,outage=0.768"
    check("stray lease", 57567, plan, Options(layout="curator", families=("semaphore",)))
