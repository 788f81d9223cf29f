"""The acquire flow stepped by hand: every rule of its theory of operation, one by one."""

from __future__ import annotations

import pytest

from flow_support import (
    ATTEMPT,
    MARKED,
    OTHER,
    PATH,
    SESSION,
    Stepper,
    created,
    left,
    mine,
    spec,
    theirs,
    watched,
)
from zklocks._core import nodes as _nodes
from zklocks._core.flow import CLEANUP_GRACE, Acquired, acquire, release
from zklocks._core.ops import TIMED_OUT, Cleanup, Pipeline, SessionId, Wait, inline_cleanups
from zklocks._core.steps import Gone
from zklocks._errors import InvalidArgument, LockTimeout
from zklocks._protocol.errors import (
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import (
    Create,
    Created,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    NodeData,
    Stat,
)

PRESENT = NodeData(b"", Stat(czxid=1, ephemeral_owner=SESSION + 1))  # a blocker, watched


def test_uncontended_is_one_pipelined_round_trip() -> None:
    s = Stepper(acquire(spec()))
    op = s.expect(Pipeline, (created(mine(0), czxid=42), [mine(0)]))
    create, listing = op.requests
    assert isinstance(create, Create) and create.sequential and create.ephemeral
    assert create.path == f"{PATH}/lock-{ATTEMPT}-"
    assert isinstance(listing, GetChildren) and listing.path == PATH
    assert s.done and s.result == Acquired(f"{PATH}/{mine(0)}", 42, SESSION)


def test_missing_parent_is_created_then_retried() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (NoNodeError(), NoNodeError()))
    op = s.expect(Pipeline, (NodeExistsError(), Created(PATH, Stat(czxid=3))))  # containers
    assert [(c.path, c.container) for c in op.requests] == [("/locks", True), (PATH, True)]
    s.expect(Pipeline, (created(mine(0)), [mine(0)]))
    assert s.done


def test_waiter_watches_only_its_predecessor_and_takes_over_without_relisting() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(3)), [theirs(1), theirs(2), mine(3), "foreign"]))
    op, _ = s.wait(Gone(f"{PATH}/{theirs(2)}"))
    assert watched(op) == (f"{PATH}/{theirs(2)}",)
    # theirs(1) is still in our (stale) line: list again, then hold.
    s.expect(GetChildren, [mine(3)])
    assert s.done and isinstance(s.result, Acquired)


def test_second_in_line_holds_after_its_predecessor_goes_once_our_node_is_shown() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(Gone(f"{PATH}/{theirs(1)}"))
    # no re-listing: one exists of our own node is the grant's proof
    op = s.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert op.path == f"{PATH}/{mine(2)}"
    assert s.done and s.result == Acquired(f"{PATH}/{mine(2)}", 100, SESSION)


def test_a_stale_line_grants_nothing_once_our_session_has_changed() -> None:
    """Found by the simulator (seed 188): a waiter paused past its session timeout sees
    its predecessor's deletion first and its own session's expiry only after."""
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(Gone(f"{PATH}/{theirs(1)}"))
    s.expect(Exists, SessionExpiredError())  # our node went with the old session
    s.expect(SessionId, SESSION + 1)
    s.expect(Pipeline, (created(mine(3), czxid=120), [mine(3)]))
    assert s.done and s.result == Acquired(f"{PATH}/{mine(3)}", 120, SESSION)


def test_a_waiter_whose_node_was_deleted_joins_the_line_again_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 11, item 1: H holds, we wait on H, C waits on us; someone deletes our node
    (C re-lists and waits on H). H's deletion must not grant us: our node is gone."""
    deadline = 1234.5
    s = Stepper(acquire(spec(deadline=deadline)))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(Gone(f"{PATH}/{theirs(1)}"))
    s.expect(Exists, None)  # deleted by another client
    with caplog.at_level("WARNING", logger="zklocks.lock"):
        s.expect(SessionId, SESSION)  # same session: not an expiry
    assert "was deleted by another client" in caplog.text and mine(2) in caplog.text
    # at the back of the line, behind C, with the same deadline
    op = s.expect(Pipeline, (created(mine(4)), [theirs(3), mine(4)]))
    assert op.requests[0].deadline == deadline
    op, wait = s.wait(Gone(f"{PATH}/{theirs(3)}"))
    assert watched(op) == (f"{PATH}/{theirs(3)}",) and op.deadline == wait.deadline == deadline
    s.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert s.done and s.result.node == f"{PATH}/{mine(4)}"


def test_a_takeover_check_lost_to_a_dropped_connection_is_asked_again() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(Gone(f"{PATH}/{theirs(1)}"))
    s.expect(Exists, ConnectionLossError())
    s.expect(Exists, Stat(czxid=100, ephemeral_owner=SESSION))
    assert s.done and isinstance(s.result, Acquired)


def test_a_takeover_check_past_the_deadline_times_out_and_deletes_our_node() -> None:
    s = Stepper(acquire(spec(deadline=5.0)))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(Gone(f"{PATH}/{theirs(1)}"))
    s.expect(Exists, TIMED_OUT)
    delete = s.op
    assert left(delete) == f"{PATH}/{mine(2)}"
    with pytest.raises(LockTimeout):
        s.flow.send(MARKED)


def test_timeout_deletes_then_raises() -> None:
    flow = inline_cleanups(acquire(spec(deadline=5.0)))
    next(flow)
    flow.send((created(mine(2)), [theirs(1), mine(2)]))
    assert isinstance(flow.send((PRESENT,)), Wait)  # the watch is set: wait
    delete = flow.send(TIMED_OUT)
    assert left(delete) == f"{PATH}/{mine(2)}"
    with pytest.raises(LockTimeout):
        flow.send(MARKED)


def test_cleanup_keeps_the_caller_a_grace_past_its_deadline_at_most() -> None:
    """Issue 21: the way out is one ``Cleanup``; the driver runs its steps apart from the
    caller, who waits for them ``CLEANUP_GRACE`` past the call's deadline at most."""
    flow = acquire(spec(deadline=5.0))
    next(flow)
    flow.send((created(mine(2)), [theirs(1), mine(2)]))
    flow.send((PRESENT,))
    cleanup = flow.send(TIMED_OUT)
    assert isinstance(cleanup, Cleanup) and cleanup.deadline == 5.0 + CLEANUP_GRACE
    delete = next(cleanup.steps)
    assert left(delete) == f"{PATH}/{mine(2)}"
    assert delete.deadline is None  # the steps themselves wait as long as they must
    with pytest.raises(StopIteration):
        cleanup.steps.send(MARKED)
    with pytest.raises(LockTimeout):
        flow.send(None)  # whatever became of the steps: the caller's error, now
    # Without a deadline (interrupted, or refused) the caller waits for the end.
    flow = acquire(spec())
    next(flow)
    flow.send((created(mine(2)), [theirs(1), mine(2)]))
    flow.send((PRESENT,))
    cleanup = flow.throw(KeyboardInterrupt())
    assert isinstance(cleanup, Cleanup) and cleanup.deadline is None


def test_cleanup_delete_is_retried_after_connection_loss() -> None:
    flow = inline_cleanups(acquire(spec(deadline=5.0)))
    next(flow)
    flow.send((created(mine(2)), [theirs(1), mine(2)]))
    flow.send((PRESENT,))
    first = flow.send(TIMED_OUT)
    again = flow.send(ConnectionLossError())
    assert left(first) and again == first and again.deadline is None
    with pytest.raises(LockTimeout):
        flow.send(NoNodeError())


def test_non_blocking_miss_deletes_our_node_and_returns_none() -> None:
    s = Stepper(acquire(spec(blocking=False)))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.expect(Multi, MARKED)
    assert s.done and s.result is None


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), RuntimeError("boom")])
def test_interrupt_while_waiting_deletes_our_node_then_propagates(
    interrupt: BaseException,
) -> None:
    flow = inline_cleanups(acquire(spec()))
    next(flow)
    watch = flow.send((created(mine(2)), [theirs(1), mine(2)]))
    assert watched(watch) == (f"{PATH}/{theirs(1)}",)
    assert isinstance(flow.send((PRESENT,)), Wait)  # blocked in the wait
    delete = flow.throw(interrupt)
    assert left(delete) == f"{PATH}/{mine(2)}"
    with pytest.raises(type(interrupt)):
        flow.send(MARKED)


def test_interrupt_with_create_in_flight_finds_our_node_by_token() -> None:
    flow = inline_cleanups(acquire(spec()))
    assert isinstance(next(flow), Pipeline)
    listing = flow.throw(KeyboardInterrupt())
    assert isinstance(listing, GetChildren)
    exists = flow.send([theirs(1), mine(2)])
    assert isinstance(exists, Exists) and exists.path == f"{PATH}/{mine(2)}"
    assert isinstance(flow.send(Stat(czxid=5, ephemeral_owner=SESSION)), SessionId)
    delete = flow.send(SESSION)
    assert left(delete) == f"{PATH}/{mine(2)}"
    with pytest.raises(KeyboardInterrupt):
        flow.send(MARKED)


def test_protected_create_adopts_our_node_after_connection_loss() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (ConnectionLossError(), ConnectionLossError()))
    s.expect(GetChildren, ConnectionLossError())  # still reconnecting: ask again
    s.expect(GetChildren, [mine(1)])
    s.expect(Exists, Stat(czxid=9, ephemeral_owner=SESSION))
    s.expect(SessionId, SESSION)
    assert s.done and s.result == Acquired(f"{PATH}/{mine(1)}", 9, SESSION)


def test_protected_create_does_not_adopt_a_node_of_an_older_session() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (ConnectionLossError(), ConnectionLossError()))
    s.expect(GetChildren, [mine(1)])
    s.expect(Exists, Stat(czxid=9, ephemeral_owner=SESSION - 1))
    s.expect(SessionId, SESSION)
    op = s.expect(Delete, None)
    assert op.path == f"{PATH}/{mine(1)}"
    s.expect(Pipeline, (created(mine(2), czxid=11), [mine(2)]))
    assert s.done and s.result == Acquired(f"{PATH}/{mine(2)}", 11, SESSION)


def test_protected_create_retries_when_the_create_never_landed() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (ConnectionLossError(), ConnectionLossError()))
    s.expect(GetChildren, [theirs(1)])
    s.expect(Pipeline, (created(mine(2)), [mine(2)]))
    assert s.done


def test_session_expiry_while_waiting_starts_over() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(2)), [theirs(1), mine(2)]))
    s.wait(SessionExpiredError())
    s.expect(SessionId, SESSION + 1)  # the driver has a new session: ours ended
    s.expect(Pipeline, (created(mine(5), czxid=300), [mine(5)]))
    assert s.done and s.result == Acquired(f"{PATH}/{mine(5)}", 300, SESSION)


def test_our_node_vanishing_from_the_listing_starts_over() -> None:
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (created(mine(3)), [theirs(1), theirs(2), mine(3)]))
    s.wait(Gone(f"{PATH}/{theirs(2)}"))
    s.expect(GetChildren, [theirs(1)])  # someone deleted our node
    s.expect(SessionId, SESSION)
    s.expect(Pipeline, (created(mine(4)), [mine(4)]))
    assert s.done


def test_semaphore_refusal_deletes_our_node_and_raises() -> None:
    flow = inline_cleanups(acquire(spec(kind="permit", permits=2)))
    first = next(flow)
    assert first.requests[0].path == f"{PATH}/lease-2-{ATTEMPT}-"
    other = f"lease-3-{OTHER}-0000000001"
    delete = flow.send(
        (created(f"lease-2-{ATTEMPT}-0000000002"), [other, f"lease-2-{ATTEMPT}-0000000002"])
    )
    assert left(delete)
    with pytest.raises(InvalidArgument, match="permits"):
        flow.send(MARKED)


def test_single_node_lock_uncontended_is_one_round_trip() -> None:
    s = Stepper(acquire(spec(fair=False)))
    op = s.expect(Pipeline, (created("lock", czxid=50), ["lock", "foreign"]))
    create, listing = op.requests
    assert create.path == f"{PATH}/lock" and not create.sequential and create.ephemeral
    assert isinstance(listing, GetChildren) and listing.path == PATH
    assert s.done and s.result == Acquired(f"{PATH}/lock", 50, SESSION)


def test_single_node_lock_waits_for_deletion_then_retries() -> None:
    s = Stepper(acquire(spec(fair=False)))
    s.expect(Pipeline, (NodeExistsError(), ["lock"]))
    op, _ = s.wait(Gone(f"{PATH}/lock"))
    assert watched(op) == (f"{PATH}/lock",)
    s.expect(Pipeline, (created("lock", czxid=60), ["lock"]))
    assert s.done and s.result.token == 60


def test_single_node_lock_adopts_after_connection_loss_only_if_ours() -> None:
    data = _nodes.encode_payload(_nodes.Payload("me", attempt=ATTEMPT))
    s = Stepper(acquire(spec(fair=False)))
    s.expect(Pipeline, (ConnectionLossError(), ConnectionLossError()))
    s.expect(GetData, NodeData(data, Stat(czxid=70, ephemeral_owner=SESSION)))
    s.expect(SessionId, SESSION)
    s.expect(GetChildren, ["lock"])  # no queued contender either
    assert s.done and s.result.token == 70

    foreign = _nodes.encode_payload(_nodes.Payload("them", attempt=OTHER))
    s = Stepper(acquire(spec(fair=False, blocking=False)))
    s.expect(Pipeline, (ConnectionLossError(), ConnectionLossError()))
    s.expect(GetData, NodeData(foreign, Stat(czxid=70, ephemeral_owner=SESSION)))
    s.expect(SessionId, SESSION)
    s.expect(Pipeline, (NodeExistsError(), ["lock"]))
    assert s.done and s.result is None


def test_single_node_lock_beside_a_queued_contender_deletes_its_node_and_refuses() -> None:
    """Issue 11, item 4: a fair holder is there; the one-node lock must not barge in."""
    s = Stepper(acquire(spec(fair=False)))
    s.expect(Pipeline, (created("lock", czxid=80), ["lock", theirs(1)]))
    # our node is deleted only while it is still ours (read it first)
    s.expect(GetData, NodeData(b"d", Stat(czxid=80, ephemeral_owner=SESSION)))
    s.expect(SessionId, SESSION)
    delete = s.op
    assert isinstance(delete, Delete) and delete.path == f"{PATH}/lock"
    with pytest.raises(InvalidArgument, match="one-node lock"):
        s.flow.send(None)


def test_single_node_lock_refuses_a_path_with_queued_contenders_even_while_waiting() -> None:
    for blocking in (True, False):
        s = Stepper(acquire(spec(fair=False, blocking=blocking)))
        with pytest.raises(InvalidArgument, match="queued contenders"):
            s.expect(Pipeline, (NodeExistsError(), ["lock", theirs(1, "read")]))


def test_single_node_lock_whose_node_vanished_before_the_listing_tries_again() -> None:
    s = Stepper(acquire(spec(fair=False)))
    s.expect(Pipeline, (created("lock", czxid=80), []))
    s.expect(Pipeline, (created("lock", czxid=90), ["lock"]))
    assert s.done and s.result.token == 90


def test_release_reports_whether_the_node_was_there() -> None:
    s = Stepper(release(f"{PATH}/{mine(1)}", 5))
    s.expect(Delete, ConnectionLossError())
    s.expect(Delete, None)
    assert s.done and s.result is True
    s = Stepper(release(f"{PATH}/{mine(1)}", 5))
    s.expect(Delete, NoNodeError())
    assert s.done and s.result is False


def test_single_node_release_never_deletes_the_next_holders_node() -> None:
    """Found by the simulator (seeds 280 and 684): the path is shared by every holder."""
    node = f"{PATH}/lock"
    ours = NodeData(b"", Stat(czxid=50, ephemeral_owner=SESSION))
    theirs_now = NodeData(b"", Stat(czxid=90, ephemeral_owner=SESSION + 1))
    s = Stepper(release(node, 50))
    s.expect(GetData, ours)
    s.expect(SessionId, SESSION)
    s.expect(Delete, ConnectionLossError())  # applied or not? check again
    s.expect(GetData, theirs_now)  # it was applied, and someone else holds now
    s.expect(SessionId, SESSION)
    assert s.done and s.result is False  # no second Delete
    s = Stepper(release(node, 50))
    s.expect(GetData, NodeData(b"", Stat(czxid=50, ephemeral_owner=SESSION)))
    s.expect(SessionId, SESSION + 7)  # our session expired: the node is not ours now
    assert s.done and s.result is False


def test_a_second_interrupt_during_cleanup_does_not_leave_the_node() -> None:
    """Found by the simulator (seed 213): cleanup finishes, then the interrupt is raised."""
    flow = inline_cleanups(acquire(spec(deadline=5.0)))
    next(flow)
    flow.send((created(mine(2)), [theirs(1), mine(2)]))
    flow.send((PRESENT,))
    first = flow.send(TIMED_OUT)
    assert left(first)
    again = flow.throw(KeyboardInterrupt())  # Ctrl-C while the delete waits
    assert again == first  # the delete is sent again, not abandoned
    with pytest.raises(KeyboardInterrupt):
        flow.send(MARKED)  # deleted: now the interruption goes on up


def test_create_parents_retries_after_session_expiry() -> None:
    """Found by the simulator (seed 419): expiry here is not an error, just try again."""
    s = Stepper(acquire(spec()))
    s.expect(Pipeline, (NoNodeError(), NoNodeError()))
    s.expect(Pipeline, (SessionExpiredError(), SessionExpiredError()))  # make the path
    s.expect(Pipeline, (NoNodeError(), NoNodeError()))
    op = s.expect(Pipeline, (NodeExistsError(), NoNodeError()))  # /locks reaped meanwhile
    assert all(isinstance(c, Create) and c.retry for c in op.requests)
    s.expect(Pipeline, (created(mine(0)), [mine(0)]))
    assert s.done
