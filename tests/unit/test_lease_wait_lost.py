"""``Lease.wait_lost``: its event is made by the first waiter, and no loss is missed.

Most leases are never waited on, so the event is made lazily; the loss records its reason
under the lease's mutex before waking the event, and a waiter makes or finds the event
under the same mutex, so a loss just before, during or after a wait is always seen.
"""

from __future__ import annotations

import threading

from helpers import ManualClock, lease_on

WAIT = 15.0  # the longest a woken waiter may take to return


def test_a_lease_nobody_waits_on_makes_no_event() -> None:
    held = lease_on()
    held._mark_lost("our node was deleted", "node_deleted")
    assert held._lost_event is None
    assert held.wait_lost(0) is True


def test_a_wait_times_out_while_held_and_then_hears_the_loss() -> None:
    held = lease_on()
    assert held.wait_lost(0.01) is False
    results: list[bool] = []
    waiters = [
        threading.Thread(target=lambda: results.append(held.wait_lost(WAIT))) for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    held._mark_lost("our node was deleted", "node_deleted")
    for waiter in waiters:
        waiter.join(WAIT)
    assert [waiter.is_alive() for waiter in waiters] == [False] * 3
    assert results == [True, True, True]
    assert held.lost_reason == "our node was deleted"


def test_a_loss_by_the_session_clock_ends_the_wait_at_once() -> None:
    clock = ManualClock()
    held = lease_on(clock)
    clock.now = 100.0 + 60.0  # no answer for far longer than the session timeout
    assert held.wait_lost(WAIT) is True
    assert held.lost_reason == "no answer from ZooKeeper for a whole session timeout"
