"""Lock-delay in the flow (issue 35): the mark a clean release leaves, the listing that
reads it, and the wait after an abnormal loss, stepped by hand on a fake clock.

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
from zklocks._core.lock_delay import LockDelayWait
from zklocks._core.ops import TIMED_OUT, Pipeline, Wait
from zklocks._core.steps import Gone
from zklocks._errors import InvalidArgument, LockTimeout
from zklocks._protocol.errors import NoAuthError, NoNodeError
from zklocks._protocol.records import Children, Delete, Exists, GetChildren, Multi, SetData, Stat
from zklocks._vocabulary import WatchEvent, WatchKind


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def directory(version: int) -> Stat:
    return Stat(czxid=1, version=version)


def _cycle(me: str, **changes: Any) -> Generator[Any, Any, bool]:
    acquired = yield from acquire(spec(**changes))
    assert acquired == Acquired(f"{PATH}/{me}", 100, SESSION)
    return (yield from release(acquired.node, acquired.token, acquired.owner, mark=True))


def test_a_clean_hand_off_with_a_lock_delay_costs_the_same_five_requests() -> None:
    me, holder = mine(2), theirs(1)
    names, round_trips, released = census(
        _cycle(me, lock_delay=15.0, clock=Clock()),
        [
            (created(me), Children([holder, me], directory(4))),  # create + getChildren2
            (PRESENT,),
            (WatchEvent(WatchKind.DELETED, f"{PATH}/{holder}"),),
            Children([me], directory(5)),  # the holder's release counted: no delay
            [None, directory(6)],  # our own release: delete + setData, one multi
        ],
    )
    assert names == ["Create", "GetChildren", "GetData", "GetChildren", "Multi"]
    assert round_trips == 4 and released is True


def test_an_uncontended_acquisition_with_a_lock_delay_takes_three_requests() -> None:
    me = mine(0)
    names, _, released = census(
        _cycle(me, lock_delay=15.0, clock=Clock()),
        [(created(me), Children([me], directory(0))), [None, directory(1)]],
    )
    assert names == ["Create", "GetChildren", "Multi"] and released is True


def test_the_release_mark_is_one_multi_deleting_the_node_and_setting_the_directory() -> None:
    step = Stepper(release(f"{PATH}/{mine(1)}", 100, SESSION, mark=True))
    multi = step.expect(Multi, [None, directory(1)])
    assert multi.ops == (Delete(f"{PATH}/{mine(1)}"), SetData(PATH, b""))
    assert step.done and step.result is True


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
    listing = step.expect(Pipeline, (created(me), Children([holder, me], directory(4))))
    assert isinstance(listing.requests[1], GetChildren) and listing.requests[1].with_stat
    return step


def test_after_an_abnormal_loss_the_grant_waits_out_the_delay_from_when_it_was_seen() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock)
    step.wait(Gone(f"{PATH}/{holder}"))
    clock.now = 1002.0  # we see it gone here
    step.expect(GetChildren, Children([me], directory(4)))  # no release counted: abnormal
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
    step.expect(GetChildren, Children([me], directory(5)))
    assert step.done and step.result == Acquired(f"{PATH}/{me}", 100, SESSION)


def test_the_delay_never_runs_past_the_deadline() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock, timeout_at=1005.0)
    step.wait(Gone(f"{PATH}/{holder}"))
    step.expect(GetChildren, Children([me], directory(4)))
    wait = step.expect(LockDelayWait, TIMED_OUT)
    assert wait.deadline == 1005.0
    with pytest.raises(LockTimeout):
        step.expect(Delete, None)  # the way out deletes our node, then times out


def test_a_node_lost_during_the_delay_joins_the_line_again() -> None:
    clock = Clock()
    me, holder = mine(2), theirs(1)
    step = _second_in_line(clock)
    step.wait(Gone(f"{PATH}/{holder}"))
    step.expect(GetChildren, Children([me], directory(4)))
    step.expect(LockDelayWait, TIMED_OUT)
    step.expect(Exists, None)  # someone deleted our node meanwhile
    step.expect(type(step.op), None)  # SessionId: the same session, so a warning
    step.expect(Pipeline, (created(mine(3), 101), Children([mine(3)], directory(4))))
    assert step.done and step.result == Acquired(f"{PATH}/{mine(3)}", 101, SESSION)


@pytest.mark.parametrize("value", [-1, float("inf"), float("nan"), "15", True])
def test_lock_delay_is_a_finite_number_of_seconds_at_least_zero(value: object) -> None:
    with pytest.raises(InvalidArgument, match="lock_delay"):
        validate.lock_delay(value)


def test_lock_delay_accepts_zero_and_none() -> None:
    assert validate.lock_delay(0) == 0.0 and validate.lock_delay(None) is None
