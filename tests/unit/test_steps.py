"""The rules that end a wait and make the lock path: steps of the flow, stepped by hand.

They were the drivers' (``_core/drive.py`` and a loop in each driver); now a driver only
sends requests and hands over watch events, and these steps decide what they mean.
"""

from __future__ import annotations

import pytest

from flow_support import Stepper, watched
from zklocks._core.ops import TIMED_OUT, Pipeline, SessionId, Wait, too_late
from zklocks._core.steps import Gone, await_children_change, await_deletion, make_parents
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Create, Created, Exists, GetChildren, GetData, NodeData, Stat
from zklocks._vocabulary import WatchEvent, WatchKind

A, B = "/locks/x/lock-a-0000000001", "/locks/x/lock-b-0000000002"
THERE = NodeData(b"", Stat(czxid=1, ephemeral_owner=9))


def event(kind: WatchKind, path: str) -> tuple[WatchEvent, ...]:
    return (WatchEvent(kind, path),)


# -- waiting for a deletion ----------------------------------------------------------------


def test_the_watches_are_getdata_watches_on_every_blocker_then_a_wait() -> None:
    s = Stepper(await_deletion((A, B), 5.0))
    op = s.expect(Pipeline, (THERE, THERE))
    assert watched(op) == (A, B)
    assert all(isinstance(r, GetData) and r.deadline == 5.0 and not r.retry for r in op.requests)
    wait = s.expect(Wait, event(WatchKind.DELETED, B))
    assert wait == Wait(5.0)
    assert s.done and s.result == Gone(B)


@pytest.mark.parametrize("missing", [NoNodeError(), None])
def test_a_blocker_gone_before_its_watch_ends_the_wait_without_waiting(missing: object) -> None:
    s = Stepper(await_deletion((A, B), None))
    s.expect(Pipeline, (THERE, missing))
    assert s.done and s.result == Gone(B)


@pytest.mark.parametrize(
    "failure", [ConnectionLossError(), SessionExpiredError(), NoAuthError(), TIMED_OUT]
)
def test_a_failed_watch_is_the_answer_for_the_flow_to_judge(failure: object) -> None:
    s = Stepper(await_deletion((A,), 5.0))
    s.expect(Pipeline, (failure,))
    assert s.done and s.result is failure


@pytest.mark.parametrize(
    ("kind", "answer"),
    [(WatchKind.SESSION_LOST, SessionExpiredError), (WatchKind.CLOSED, ClientClosedError)],
)
def test_the_sessions_end_reaching_a_watch_ends_the_wait(kind: WatchKind, answer: type) -> None:
    s = Stepper(await_deletion((A,), None))
    s.expect(Pipeline, (THERE,))
    s.expect(Wait, event(kind, A))
    assert s.done and isinstance(s.result, answer)


def test_the_deadline_ends_the_wait() -> None:
    s = Stepper(await_deletion((A,), 5.0))
    s.expect(Pipeline, (THERE,))
    s.expect(Wait, TIMED_OUT)
    assert s.done and s.result is TIMED_OUT


def test_a_change_is_not_a_deletion_the_watches_are_set_again_and_not_as_a_retry() -> None:
    s = Stepper(await_deletion((A, B), 5.0, retry=True))
    first = s.expect(Pipeline, (THERE, THERE))
    assert first.retry  # the flow's retry after a lost connection: not sent past 5.0
    s.expect(Wait, event(WatchKind.CHANGED, A))  # used A's watch up
    again = s.expect(Pipeline, (THERE, THERE))
    assert watched(again) == (A, B) and not again.retry
    s.expect(Wait, event(WatchKind.DELETED, A))
    assert s.done and s.result == Gone(A)


def test_events_of_an_earlier_waits_watches_change_nothing_and_cost_no_request() -> None:
    """One inbox per flow run: a watch set by an earlier wait may fire now."""
    old = "/locks/x/lock-c-0000000000"
    s = Stepper(await_deletion((A,), None))
    s.expect(Pipeline, (THERE,))
    s.expect(Wait, event(WatchKind.DELETED, old) + event(WatchKind.CHANGED, old))
    s.expect(Wait, event(WatchKind.DELETED, A))  # still waiting, no watch set again
    assert s.done and s.result == Gone(A)


def test_a_deletion_among_other_events_is_found() -> None:
    s = Stepper(await_deletion((A, B), None))
    s.expect(Pipeline, (THERE, THERE))
    s.expect(Wait, event(WatchKind.CHANGED, A) + event(WatchKind.DELETED, B))
    assert s.done and s.result == Gone(B)


# -- making the lock path --------------------------------------------------------------------


def test_the_lock_path_and_its_ancestors_are_containers_in_one_pipeline() -> None:
    s = Stepper(make_parents("/a/b/c", (), 7.0, retry=True))
    op = s.expect(Pipeline, (NodeExistsError(), NodeExistsError(), Created("/a/b/c", THERE.stat)))
    assert [c.path for c in op.requests] == ["/a", "/a/b", "/a/b/c"]
    assert all(
        isinstance(c, Create) and c.container and not c.ephemeral and c.deadline == 7.0 and c.retry
        for c in op.requests
    )
    assert not op.watch
    assert s.done and s.result is None  # existing ancestors are fine


@pytest.mark.parametrize(
    ("replies", "answer"),
    [
        ((NodeExistsError(), NoNodeError()), NoNodeError),  # an ancestor reaped meanwhile
        ((TIMED_OUT, TIMED_OUT), type(TIMED_OUT)),
        ((NoAuthError(), ConnectionLossError()), NoAuthError),  # the first error
    ],
)
def test_making_the_path_answers_its_first_failure(
    replies: tuple[object, ...], answer: type
) -> None:
    s = Stepper(make_parents("/a/b", (), None))
    s.expect(Pipeline, replies)
    assert s.done and isinstance(s.result, answer)


# -- what a driver answers without sending -------------------------------------------------


def test_a_retry_past_its_deadline_is_never_sent() -> None:
    late = GetChildren("/a", deadline=5.0, retry=True)
    assert too_late(late, 5.0) is TIMED_OUT
    assert too_late(late, 4.9) is None
    assert too_late(GetChildren("/a", deadline=5.0), 9.0) is None  # a first try goes out
    assert too_late(GetChildren("/a", retry=True), 9.0) is None  # no deadline: cleanup
    pipeline = Pipeline((GetChildren("/a", deadline=8.0), GetData("/b", deadline=5.0, retry=True)))
    assert pipeline.deadline == 5.0 and pipeline.retry
    assert too_late(pipeline, 6.0) == (TIMED_OUT, TIMED_OUT)
    assert too_late(SessionId(), 1e9) is None


def test_a_wait_past_its_deadline_times_out_at_once() -> None:
    assert too_late(Wait(5.0), 5.0) is TIMED_OUT
    assert too_late(Wait(5.0), 4.0) is None
    assert too_late(Wait(None), 1e9) is None


# -- waiting for the line to change (``wait_for_change``, ``zklocks status --watch``) ---------


def test_a_child_watch_on_the_path_and_any_event_is_a_change() -> None:
    s = Stepper(await_children_change("/locks/x", 5.0))
    op = s.expect(Pipeline, (["lock-a-0000000001"],))
    assert op.watch and op.requests == (GetChildren("/locks/x", deadline=5.0),)
    s.expect(Wait, event(WatchKind.CHILD, "/locks/x"))
    assert s.done and s.result is True


def test_with_no_path_yet_its_creation_is_the_change() -> None:
    s = Stepper(await_children_change("/locks/x", None))
    s.expect(Pipeline, (NoNodeError(),))
    op = s.expect(Pipeline, (None,))
    assert op.watch and op.requests == (Exists("/locks/x"),)
    s.expect(Wait, TIMED_OUT)
    assert s.done and s.result is False
