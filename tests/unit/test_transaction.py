"""The transaction flow, stepped by hand: what it sends (one multi, the guard's check
first) and what each reply means (results, LockLost, TransactionFailed with the caller's
index, an unknown outcome), and the builder's checks before anything is sent.

Failed multis are built by the protocol's own ``_multi_reply`` from per-op results, as
the server answers them: rolled back before the failed op, skipped after it.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import zklocks
from helpers import ManualClock as Clock
from helpers import lease_on
from zklocks._core.lease import Lease
from zklocks._frontend.transaction import TransactionBuilder
from zklocks._protocol.errors import (
    BadVersionError,
    ClientClosedError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import Check, Create, CreatedPath, Delete, Multi, SetData, Stat
from zklocks._protocol.session import Session

NODE = "/locks/orders/lock-" + "a" * 32 + "-0000000007"


def lease(clock: Clock | None = None) -> Lease:
    """A lease whose session was last answered at 100.0, with a 10 s timeout."""
    return lease_on(clock, NODE)


def failed_multi(results: list[Any]) -> ZooKeeperError:
    reply = Session._multi_reply(None, results)
    assert not reply.ok
    assert isinstance(reply.value, ZooKeeperError)
    return reply.value


def builder(guard: object = None) -> TransactionBuilder:
    return TransactionBuilder(guard, None)


def sample_ops(txn: TransactionBuilder) -> None:
    txn.create("/orders/42", b"new")
    txn.set_data("/orders/total", b"9", version=3)
    txn.delete("/orders/old")
    txn.check("/orders", 5)


def start(txn: TransactionBuilder) -> tuple[Any, Multi]:
    flow = txn._commit_flow()
    multi = next(flow)
    assert isinstance(multi, Multi)
    return flow, multi


def finish(flow: Any, reply: Any) -> Any:
    with pytest.raises(StopIteration) as stop:
        flow.send(reply)
    return stop.value.value


def test_a_guarded_commit_is_one_multi_that_checks_the_lease_node_first() -> None:
    txn = builder(lease())
    sample_ops(txn)
    _, multi = start(txn)
    assert multi.ops == (
        Check(NODE, -1),
        Create("/orders/42", b"new", ephemeral=False),
        SetData("/orders/total", b"9", 3),
        Delete("/orders/old", version=-1),
        Check("/orders", 5),
    )


def test_results_are_one_per_op_of_the_caller() -> None:
    txn = builder(lease())
    sample_ops(txn)
    flow, _ = start(txn)
    stat = Stat(czxid=3, version=4)
    # the codec reads a create inside a multi as a CreatedPath, with a Stat from 3.8.2 on
    reply = [None, CreatedPath("/orders/42", Stat(czxid=9)), stat, None, None]
    results = finish(flow, reply)
    assert results == ["/orders/42", stat, None, None]
    assert isinstance(results[0], CreatedPath) and results[0].stat == Stat(czxid=9)


def test_a_plain_multi_has_no_check_of_its_own() -> None:
    txn = builder()
    txn.create("/a/s-", sequential=True, ephemeral=True)
    flow, multi = start(txn)
    assert multi.ops == (Create("/a/s-", b"", ephemeral=True, sequential=True),)
    (created,) = finish(flow, [CreatedPath("/a/s-0000000003")])  # 3.8.0: no Stat
    assert created == "/a/s-0000000003" and isinstance(created, CreatedPath)
    assert created.stat is None


def test_the_guard_check_failing_is_lock_lost_with_nothing_applied() -> None:
    txn = builder(lease())
    sample_ops(txn)
    flow, _ = start(txn)
    gone = failed_multi([NoNodeError()] + [RuntimeInconsistencyError() for _ in range(4)])
    with pytest.raises(zklocks.LockLost, match="is gone; nothing was applied") as raised:
        flow.send(gone)
    assert raised.value.__cause__ is gone


@pytest.mark.parametrize(
    ("failing", "error", "reason"),
    [
        (0, NodeExistsError, "NodeExists"),
        (1, BadVersionError, "BadVersion"),
        (2, NoNodeError, "NoNode"),
    ],
)
@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_another_op_failing_names_its_index_among_the_callers_ops(
    failing: int, error: type[ZooKeeperError], reason: str, guarded: bool
) -> None:
    txn = builder(lease() if guarded else None)
    sample_ops(txn)
    flow, multi = start(txn)
    offset = len(multi.ops) - 4
    results: list[Any] = [RolledBackError() for _ in range(offset + failing)]
    results.append(error())
    results += [RuntimeInconsistencyError() for _ in range(len(multi.ops) - len(results))]
    with pytest.raises(zklocks.TransactionFailed) as raised:
        flow.send(failed_multi(results))
    assert (raised.value.index, raised.value.reason) == (failing, reason)
    assert raised.value.path == multi.ops[offset + failing].path
    assert "nothing was applied" in str(raised.value)
    assert b"new" not in str(raised.value).encode()  # the ops' data stay out of messages


def test_a_dropped_connection_says_the_outcome_is_unknown() -> None:
    txn = builder(lease())
    txn.create("/x")
    flow, _ = start(txn)
    with pytest.raises(zklocks.LockError, match="may or may not have applied") as raised:
        flow.send(ConnectionLossError())
    assert not isinstance(raised.value, zklocks.LockLost | zklocks.TransactionFailed)


def test_a_session_that_expired_before_sending_loses_the_guard() -> None:
    txn = builder(lease())
    txn.create("/x")
    flow, _ = start(txn)
    with pytest.raises(zklocks.LockLost, match="before the transaction was sent"):
        flow.send(SessionExpiredError())


def test_a_stopped_client_is_client_closed() -> None:
    txn = builder()
    txn.create("/x")
    flow, _ = start(txn)
    with pytest.raises(zklocks.ClientClosed):
        flow.send(ClientClosedError())


def test_a_released_lease_guards_nothing_and_nothing_is_sent() -> None:
    held = lease()
    held._end()
    txn = builder(held)
    txn.create("/x")
    with pytest.raises(zklocks.LockLost, match="released"):
        next(txn._commit_flow())


def test_a_lease_lost_on_its_own_clock_guards_nothing_and_nothing_is_sent() -> None:
    clock = Clock()
    held = lease(clock)
    txn = builder(held)
    txn.create("/x")
    clock.now = 110.0  # a whole session timeout since the last answer: may have expired
    with pytest.raises(zklocks.LockLost, match="lost"):
        next(txn._commit_flow())


def test_an_empty_plain_transaction_sends_nothing() -> None:
    flow = builder()._commit_flow()
    with pytest.raises(StopIteration) as stop:
        next(flow)
    assert stop.value.value == []


def test_an_empty_guarded_transaction_still_checks_the_lease() -> None:
    flow, multi = start(builder(lease()))
    assert multi.ops == (Check(NODE, -1),)
    assert finish(flow, [None]) == []


def test_committing_twice_or_adding_after_commit_is_refused() -> None:
    txn = builder()
    txn.create("/x")
    txn._commit_flow()
    with pytest.raises(zklocks.InvalidArgument, match="committed once"):
        txn._commit_flow()
    with pytest.raises(zklocks.InvalidArgument, match="was committed"):
        txn.delete("/x")


@pytest.mark.parametrize(
    ("add", "error"),
    [
        (lambda t: t.create("relative"), zklocks.InvalidPath),
        (lambda t: t.create("/a//b"), zklocks.InvalidPath),
        (lambda t: t.create("/a", "text"), zklocks.InvalidArgument),
        (lambda t: t.create("/a", ephemeral=1), zklocks.InvalidArgument),
        (lambda t: t.set_data("/a", b"", version=True), zklocks.InvalidArgument),
        (lambda t: t.set_data("/a", b"", version=-2), zklocks.InvalidArgument),
        (lambda t: t.delete("/a", version=2**31), zklocks.InvalidArgument),
        (lambda t: t.check("/a", "1"), zklocks.InvalidArgument),
    ],
)
def test_arguments_are_checked_where_the_op_is_added(add: Any, error: type[Exception]) -> None:
    txn = builder()
    with pytest.raises(error):
        add(txn)
    assert txn._ops == []


def test_a_sequential_create_may_name_its_parent_with_a_trailing_slash() -> None:
    txn = builder()
    txn.create("/queue/", sequential=True)
    assert txn._ops == [Create("/queue/", b"", ephemeral=False, sequential=True)]


def test_the_guard_must_be_a_lease() -> None:
    with pytest.raises(zklocks.InvalidArgument, match="guard must be a lease"):
        builder(object())


def test_the_client_acl_goes_on_every_create() -> None:
    from zklocks._core.security import acl_policy, credentials

    policy = acl_policy("creator", credentials([("digest", "user:secret")]))
    assert policy is not None
    txn = TransactionBuilder(None, policy)
    txn.create("/x")
    (op,) = txn._ops
    assert isinstance(op, Create) and op.acl == policy.wire and op.acl


def test_transaction_failed_keeps_its_fields_across_pickling() -> None:
    error = zklocks.TransactionFailed("m", index=2, reason="NoNode", path="/x")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.index, copy.reason, copy.path, str(copy)) == (2, "NoNode", "/x", "m")
    assert isinstance(copy, zklocks.LockError)
