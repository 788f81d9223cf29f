"""Lock-delay in the flow (issue 35): the mark a clean departure leaves (a release's, a
give-up's), the listing that reads the directory's counts, the newcomer rule, telling
the one behind, and the wait after an abnormal loss, stepped by hand on a fake clock.

The census half: a clean hand-off costs the same five requests as without a lock-delay
(the takeover's one ``exists`` becomes one listing; the release's delete one multi).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from test_contended_census import PRESENT, census

from flow_support import PATH, SESSION, Stepper, created, mine, spec, theirs
from zklocks._core import validate
from zklocks._core.flow import Acquired, acquire, release
from zklocks._core.lock_delay import LockDelayWait, count_data, unaccounted, unmarked
from zklocks._core.ops import TIMED_OUT, Pipeline, Wait
from zklocks._core.steps import Gone
from zklocks._errors import InvalidArgument, LockTimeout
from zklocks._protocol.errors import BadVersionError, NoAuthError, NoNodeError
from zklocks._protocol.records import (
    Children,
    Delete,
    Exists,
    GetChildren,
    Multi,
    NodeData,
    SetData,
    Stat,
)
from zklocks._vocabulary import WatchEvent, WatchKind


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def directory(children: int, *, marked: int = 0, lost: int = 0, taken_over: int = 0) -> Stat:
    """The lock directory's stat as the server reports it: ``children`` there now, after
    ``marked`` clean departures and ``lost`` unmarked deletions, with data that says
    ``taken_over`` (``cversion`` counts creates and deletes)."""
    deletes = marked + lost
    return Stat(
        czxid=1,
        version=marked,
        cversion=children + 2 * deletes,
        num_children=children,
        data_length=len(count_data(taken_over)),
    )


TOUCHED = Stat(czxid=100, version=1, ephemeral_owner=SESSION)


def _cycle(me: str, **changes: Any) -> Generator[Any, Any, bool]:
    acquired = yield from acquire(spec(**changes))
    assert acquired == Acquired(f"{PATH}/{me}", 100, SESSION)
    return (yield from release(acquired.node, acquired.token, acquired.owner, mark=True))


def test_a_clean_hand_off_with_a_lock_delay_costs_the_same_five_requests() -> None:
    me, holder = mine(2), theirs(1)
    names, round_trips, released = census(
        _cycle(me, lock_delay=15.0, clock=Clock()),
        [
            (created(me), Children([holder, me], directory(2))),  # create + getChildren2
            (PRESENT,),
            (WatchEvent(WatchKind.DELETED, f"{PATH}/{holder}"),),
            Children([me], directory(1, marked=1)),  # the holder's release marked: no delay
            [None, directory(0, marked=2)],  # our own release: delete + setData, one multi
        ],
    )
    assert names == ["Create", "GetChildren", "GetData", "GetChildren", "Multi"]
    assert round_trips == 4 and released is True


def test_an_uncontended_acquisition_with_a_lock_delay_takes_three_requests() -> None:
    me = mine(0)
    names, _, released = census(
        _cycle(me, lock_delay=15.0, clock=Clock()),
        [(created(me), Children([me], directory(1))), [None, directory(0, marked=1)]],
    )
    assert names == ["Create", "GetChildren", "Multi"] and released is True


def test_the_release_mark_is_one_multi_deleting_the_node_and_setting_the_directory() -> None:
    step = Stepper(release(f"{PATH}/{mine(1)}", 100, SESSION, mark=True))
    multi = step.expect(Multi, [None, directory(0, marked=1)])
    assert multi.ops == (Delete(f"{PATH}/{mine(1)}"), SetData(PATH, b""))
    assert step.done and step.result is True


def test_a_release_writes_the_losses_its_latest_listing_counted_as_taken_over() -> None:
    seen = directory(2, marked=5, lost=3, taken_over=1)
    step = Stepper(release(f"{PATH}/{mine(1)}", 100, SESSION, mark=True, seen=seen))
    multi = step.expect(Multi, [None, directory(1, marked=6, lost=3, taken_over=3)])
    assert multi.ops[1] == SetData(PATH, b"003")  # its length says 3, for the stat alone


def test_a_directory_refusing_the_mark_still_lets_the_node_go() -> None:
    step = Stepper(release(f"{PATH}/{mine(1)}", 100, SESSION, mark=True))
    step.expect(Multi, NoAuthError())
    step.expect(Delete, None)
    assert step.done and step.result is True


def test_a_marked_release_of_a_node_already_gone_says_the_lease_was_lost() -> None:
    step = Stepper(release(f"{PATH}/{mine(1)}", 100, SESSION, mark=True))
    step.expect(Multi, NoNodeError())
    assert step.done and step.result is False


def _second_in_line(clock: Clock, timeout_at: float | None = None) -> Stepper:
    """We queue behind a holder (directory version 4); the holder's node goes."""
    me, holder = mine(2), theirs(1)
    step = Stepper(acquire(spec(lock_delay=15.0, clock=clock, deadline=timeout_at)))
    listing = step.expect(Pipeline, (created(me), Children([holder, me], directory(2))))
    assert isinstance(listing.requests[1], GetChildren) and listing.requests[1].with_stat
    return step


def test_after_an_abnormal_loss_the_grant_waits_out_the_delay_from_when_it_was_seen() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock)
    step.wait(Gone(f"{PATH}/{holder}"))
    clock.now = 1002.0  # we see it gone here
    step.expect(GetChildren, Children([me], directory(1, lost=1)))  # no release counted: abnormal
    touch = step.expect(Multi, [TOUCHED])  # tell the one behind us: our node's data again
    assert touch.ops == (SetData(f"{PATH}/{me}", b"d", 0),)
    wait = step.expect(LockDelayWait, (WatchEvent(WatchKind.CHILD, PATH),))  # an event: ignored
    assert isinstance(wait, Wait) and wait.deadline == 1017.0
    again = step.expect(LockDelayWait, TIMED_OUT)
    assert again.deadline == 1017.0 and not step.done
    step.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))  # our node is still there
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_a_clean_release_hands_over_at_once() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock)
    step.wait(Gone(f"{PATH}/{holder}"))
    step.expect(GetChildren, Children([me], directory(1, marked=1)))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_the_delay_never_runs_past_the_deadline() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock, timeout_at=1005.0)
    step.wait(Gone(f"{PATH}/{holder}"))
    step.expect(GetChildren, Children([me], directory(1, lost=1)))
    step.expect(Multi, [TOUCHED])
    wait = step.expect(LockDelayWait, TIMED_OUT)
    assert wait.deadline == 1005.0
    with pytest.raises(LockTimeout):  # the way out: a marked departure, then the timeout
        step.expect(Multi, [None, directory(0, marked=1, lost=1)])


def test_a_node_lost_during_the_delay_joins_the_line_again() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock)
    step.wait(Gone(f"{PATH}/{holder}"))
    step.expect(GetChildren, Children([me], directory(1, lost=1)))
    step.expect(Multi, [TOUCHED])
    step.expect(LockDelayWait, TIMED_OUT)
    step.expect(Exists, None)  # someone deleted our node meanwhile
    step.expect(type(step.op), None)  # SessionId: the same session, so a warning
    step.expect(Pipeline, (created(mine(3), 101), Children([mine(3)], directory(1, lost=2))))
    # a newcomer now: the loss is still not taken over, so the delay is waited again
    step.expect(LockDelayWait, TIMED_OUT)
    step.expect(Exists, Stat(czxid=101, ephemeral_owner=SESSION))
    assert step.done and step.result == Acquired(f"{PATH}/{mine(3)}", 101, SESSION)


def test_a_newcomer_after_a_loss_nobody_took_over_waits_from_its_first_listing() -> None:
    """Issue 35's newcomer: nobody queued when the holder was lost; our first listing
    shows an unmarked deletion that no holder has held after."""
    clock = Clock()
    me = mine(2)
    step = Stepper(acquire(spec(lock_delay=15.0, clock=clock)))
    step.expect(Pipeline, (created(me), Children([me], directory(1, lost=1))))
    wait = step.expect(LockDelayWait, TIMED_OUT)
    assert wait.deadline == 1015.0
    step.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


@pytest.mark.parametrize(
    "stat",
    [directory(1, marked=3), directory(1, marked=3, lost=2, taken_over=2)],
    ids=["clean-releases", "loss-taken-over"],
)
def test_a_newcomer_after_clean_releases_or_a_loss_taken_over_is_granted_at_once(
    stat: Stat,
) -> None:
    step = Stepper(acquire(spec(lock_delay=15.0, clock=Clock())))
    step.expect(Pipeline, (created(mine(5)), Children([mine(5)], stat)))
    assert step.done and step.result == Acquired(f"{PATH}/{mine(5)}", 100, SESSION)


def test_a_waiter_giving_up_ahead_of_a_newcomer_does_not_restart_its_delay() -> None:
    """The starvation of issue 35: a waiter ahead that gives up leaves marked, so the
    newcomer behind it keeps the delay it counted from its first listing."""
    clock = Clock()
    me, waiter = mine(3), theirs(2)
    step = Stepper(acquire(spec(lock_delay=15.0, clock=clock)))
    step.expect(Pipeline, (created(me), Children([waiter, me], directory(2, lost=1))))
    step.wait(Gone(f"{PATH}/{waiter}"))
    clock.now = 1010.0  # the waiter ahead gave up: one mark more, no unmarked deletion
    step.expect(GetChildren, Children([me], directory(1, marked=1, lost=1)))
    wait = step.expect(LockDelayWait, TIMED_OUT)
    assert wait.deadline == 1015.0  # from our first listing, not from the give-up
    step.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_a_waiter_behind_giving_up_does_not_hide_a_loss_ahead() -> None:
    """One mark and one gone node ahead between two listings: the mark is a waiter's
    behind us, the holder ahead was lost. The unmarked count says so."""
    clock = Clock()
    me, holder, behind = mine(2), theirs(1), theirs(3)
    step = Stepper(acquire(spec(lock_delay=15.0, clock=clock)))
    step.expect(Pipeline, (created(me), Children([holder, me, behind], directory(3))))
    step.wait(Gone(f"{PATH}/{holder}"))
    clock.now = 1001.0
    step.expect(GetChildren, Children([me], directory(1, marked=1, lost=1)))
    step.expect(Multi, BadVersionError())  # a revoke wrote our node meanwhile: no telling
    wait = step.expect(LockDelayWait, TIMED_OUT)
    assert wait.deadline == 1016.0
    step.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_a_waiter_told_by_the_one_ahead_counts_the_loss_from_then() -> None:
    """Issue 35's starvation, queued before the loss: we watch only the waiter ahead,
    which saw the holder lost and wrote its node's data again. Its watch fires CHANGED:
    we list, see the loss, tell the one behind us, and keep that sighting when the
    waiter ahead gives up (marked): our grant comes a delay after the holder's loss was
    told, not a delay after the give-up."""
    clock = Clock()
    holder, ahead, me = theirs(1), theirs(2), mine(3)
    step = Stepper(acquire(spec(lock_delay=15.0, clock=clock)))
    step.expect(Pipeline, (created(me), Children([holder, ahead, me], directory(3))))
    watch = step.expect(Pipeline, (NodeData(b"x", Stat(czxid=2)),))
    assert [r.path for r in watch.requests] == [f"{PATH}/{ahead}"]
    clock.now = 1001.0
    step.expect(Wait, (WatchEvent(WatchKind.CHANGED, f"{PATH}/{ahead}"),))
    step.expect(GetChildren, Children([ahead, me], directory(2, lost=1)))
    touch = step.expect(Multi, [TOUCHED])  # and we tell the one behind us in turn
    assert touch.ops == (SetData(f"{PATH}/{me}", b"d", 0),)
    step.expect(Pipeline, (NodeData(b"x", Stat(czxid=2)),))  # wait for the one ahead again
    clock.now = 1010.0
    step.expect(Wait, (WatchEvent(WatchKind.DELETED, f"{PATH}/{ahead}"),))
    step.expect(GetChildren, Children([me], directory(1, marked=1, lost=1)))  # it gave up
    wait = step.expect(LockDelayWait, TIMED_OUT)
    assert wait.deadline == 1016.0  # from when we were told, not from the give-up
    step.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_a_holder_that_took_the_loss_over_lets_the_newcomer_behind_it_in_at_once() -> None:
    """The newcomer queued behind the first holder after a loss counts the loss as seen;
    that holder's release says it was taken over, and the grant comes at once."""
    clock = Clock()
    me, holder = mine(3), theirs(2)
    step = Stepper(acquire(spec(lock_delay=15.0, clock=clock)))
    step.expect(Pipeline, (created(me), Children([holder, me], directory(2, lost=1))))
    step.wait(Gone(f"{PATH}/{holder}"))
    clock.now = 1001.0
    step.expect(GetChildren, Children([me], directory(1, marked=1, lost=1, taken_over=1)))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_a_waiter_that_gives_up_writes_back_the_count_it_saw() -> None:
    step = Stepper(acquire(spec(deadline=5.0)))
    step.expect(
        Pipeline,
        (created(mine(9)), Children([theirs(8), mine(9)], directory(2, lost=4, taken_over=4))),
    )
    step.wait(TIMED_OUT)
    assert step.op.ops == (Delete(f"{PATH}/{mine(9)}"), SetData(PATH, b"0004"))
    with pytest.raises(LockTimeout):
        step.expect(Multi, [None, directory(1, marked=1, lost=4, taken_over=4)])


def test_the_unmarked_count_follows_the_server_across_the_32_bit_wrap() -> None:
    # 2**31 + 5 creates, 2**31 + 3 deletes, 2**31 marks: cversion and version wrapped
    wrapped = Stat(
        czxid=1,
        cversion=((2 * (2**31 + 5) - 2) + 2**31) % 2**32 - 2**31,
        num_children=2,
        version=0 - 2**31,
        data_length=3,
    )
    assert unmarked(wrapped) == 3 and unaccounted(wrapped) == 0
    assert unmarked(directory(4, marked=7, lost=2)) == 2
    assert unaccounted(directory(4, marked=7, lost=2, taken_over=1)) == 1


@pytest.mark.parametrize("value", [-1, float("inf"), float("nan"), "15", True])
def test_lock_delay_is_a_finite_number_of_seconds_at_least_zero(value: object) -> None:
    with pytest.raises(InvalidArgument, match="lock_delay"):
        validate.lock_delay(value)


def test_lock_delay_accepts_zero_and_none() -> None:
    assert validate.lock_delay(0) == 0.0 and validate.lock_delay(None) is None
