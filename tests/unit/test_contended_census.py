"""The requests of a contended acquisition, counted on the flow itself (issue 28).

docs/locks.md ("Who wakes whom") gives the reason for each of the five; these tests keep
the count from growing unnoticed and show which request the wake-up costs: the ``exists``
of our own node when we were second in line, a fresh listing when others were ahead.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from flow_support import PATH, SESSION, created, mine, spec, theirs
from zklocks._core.flow import Acquired, acquire, release
from zklocks._core.ops import Pipeline, Request, SessionId, Wait, inline_cleanups
from zklocks._protocol.records import NodeData, Stat
from zklocks._vocabulary import WatchEvent, WatchKind

PRESENT = NodeData(b"", Stat(czxid=1, ephemeral_owner=SESSION + 1))  # a watched blocker


def census(flow: Generator[Any, Any, Any], replies: Sequence[Any]) -> tuple[list[str], int, Any]:
    """Run ``flow`` on ``replies`` (one per operation, in order): the names of the requests
    it sent, how many round trips they took, and what it returned."""
    steps = inline_cleanups(flow)
    names: list[str] = []
    round_trips = 0
    op = next(steps)
    for reply in replies:
        if isinstance(op, Pipeline):
            names += [type(request).__name__ for request in op.requests]
            round_trips += 1
        elif isinstance(op, Request):
            names.append(type(op).__name__)
            round_trips += 1
        else:
            assert isinstance(op, Wait | SessionId), op
        try:
            op = steps.send(reply)
        except StopIteration as stop:
            return names, round_trips, stop.value
    raise AssertionError(f"the flow wants more than the script: {op!r}")


def _cycle(me: str) -> Generator[Any, Any, bool]:
    """Acquire (granted on ``me``), then release."""
    acquired = yield from acquire(spec())
    assert acquired == Acquired(f"{PATH}/{me}", 100, SESSION)
    return (yield from release(acquired.node, acquired.token, acquired.owner))


def test_second_in_line_proves_its_grant_with_one_exists_of_its_own_node() -> None:
    me, holder = mine(2), theirs(1)
    names, round_trips, released = census(
        _cycle(me),
        [
            (created(me), [holder, me]),  # create + getChildren: the holder is ahead
            (PRESENT,),  # getData with a watch on the holder
            (WatchEvent(WatchKind.DELETED, f"{PATH}/{holder}"),),  # the one wake-up
            Stat(czxid=100, ephemeral_owner=SESSION),  # exists: our node is still there
            None,  # delete at release
        ],
    )
    assert names == ["Create", "GetChildren", "GetData", "Exists", "Delete"]
    assert round_trips == 4 and released is True


def test_a_waiter_behind_several_lists_again_once_its_predecessor_goes() -> None:
    """Its listing showed others ahead of its predecessor; the predecessor's deletion
    says nothing about them (it may have given up, not held): the fresh listing does,
    and it shows our node too."""
    me, holder, waiter = mine(3), theirs(1), theirs(2)
    names, round_trips, released = census(
        _cycle(me),
        [
            (created(me), [holder, waiter, me]),
            (PRESENT,),
            (WatchEvent(WatchKind.DELETED, f"{PATH}/{waiter}"),),
            [me],  # getChildren: everyone ahead has gone
            None,
        ],
    )
    assert names == ["Create", "GetChildren", "GetData", "GetChildren", "Delete"]
    assert round_trips == 4 and released is True


def test_an_uncontended_acquisition_takes_three_requests_in_two_round_trips() -> None:
    me = mine(0)
    names, round_trips, released = census(_cycle(me), [(created(me), [me]), None])
    assert names == ["Create", "GetChildren", "Delete"]
    assert round_trips == 2 and released is True
