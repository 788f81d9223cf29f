"""``client.transaction()`` on a real ZooKeeper: all or nothing, results per op, the
guard's check decided by the server, and the same contract on both clients.

The pause case (a holder SIGSTOPped past its session, then resumed) is in
test_fencing_pause.py, with the SQL and Redis fences.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import zklocks
from helpers import run
from zklocks._protocol.records import Stat
from zklocks.server import ZooKeeperServer


@pytest.fixture
def base(kazoo: Any, request: pytest.FixtureRequest) -> str:
    """A fresh persistent node for the test's data, and a lock path beside it."""
    name = request.node.name.replace("[", "-").rstrip("]")
    path = f"/txn/{name}-{time.monotonic_ns()}"
    kazoo.ensure_path(path)
    return path


def test_a_plain_transaction_applies_every_op_and_answers_one_result_each(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    kazoo.create(f"{base}/old", b"")
    txn = client.transaction()
    txn.create(f"{base}/a", b"first")
    txn.create(f"{base}/a/seq-", b"", sequential=True)
    txn.set_data(f"{base}/a", b"second", version=0)
    txn.check(f"{base}/a", 1)
    txn.delete(f"{base}/old")
    results = txn.commit()
    assert len(results) == 5
    assert results[0] == f"{base}/a"
    assert results[1] == f"{base}/a/seq-0000000000"
    assert isinstance(results[2], Stat)
    assert results[2].version == 1
    assert results[3:] == [None, None]
    data, stat = kazoo.get(f"{base}/a")
    assert (data, stat.version, stat.ephemeralOwner) == (b"second", 1, 0)  # persistent
    assert kazoo.exists(f"{base}/old") is None


@pytest.mark.parametrize(
    ("failing_op", "index", "reason"),
    [
        (lambda t, b: t.set_data(f"{b}/kept", b"x", version=7), 1, "BadVersion"),
        (lambda t, b: t.delete(f"{b}/missing"), 1, "NoNode"),
        (lambda t, b: t.create(f"{b}/kept"), 1, "NodeExists"),
        (lambda t, b: t.check(f"{b}/kept", 3), 1, "BadVersion"),
    ],
    ids=["bad-version", "no-node", "node-exists", "check"],
)
def test_a_refused_op_applies_nothing_and_is_named(
    client: zklocks.Client, kazoo: Any, base: str, failing_op: Any, index: int, reason: str
) -> None:
    kazoo.create(f"{base}/kept", b"before")
    txn = client.transaction()
    txn.create(f"{base}/new", b"")
    failing_op(txn, base)
    txn.set_data(f"{base}/kept", b"after")
    with pytest.raises(zklocks.TransactionFailed) as raised:
        txn.commit()
    assert (raised.value.index, raised.value.reason) == (index, reason)
    assert isinstance(raised.value, zklocks.LockError)
    assert kazoo.exists(f"{base}/new") is None  # the op before the failure: rolled back
    assert kazoo.get(f"{base}/kept")[0] == b"before"  # the one after: never applied


def test_a_guarded_commit_applies_while_the_lease_holds(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    kazoo.create(f"{base}/balance", b"100")
    with client.lock(f"{base}-lock") as lease:
        txn = client.transaction(guard=lease)
        txn.set_data(f"{base}/balance", b"150")
        txn.create(f"{base}/audit-", str(lease.token).encode(), sequential=True)
        stat, created = txn.commit()
    assert stat is not None and not isinstance(stat, str) and stat.version == 1
    assert kazoo.get(f"{base}/balance")[0] == b"150"
    assert isinstance(created, str) and kazoo.get(created)[0] == str(lease.token).encode()


def test_a_released_lease_guards_nothing(client: zklocks.Client, kazoo: Any, base: str) -> None:
    lock = client.lock(f"{base}-lock")
    lease = lock.acquire()
    lock.release()
    txn = client.transaction(guard=lease)
    txn.create(f"{base}/late")
    with pytest.raises(zklocks.LockLost, match="released"):
        txn.commit()
    assert kazoo.exists(f"{base}/late") is None


def test_a_one_node_lease_guards_while_held_and_not_after_the_next_holder_takes_it(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    """``fair=False`` reuses the node name ``lock``: once the next holder has made it
    again, the old lease must still guard nothing (its own view says released)."""
    with zklocks.Client(zk_server.hosts) as first, zklocks.Client(zk_server.hosts) as second:
        lock = first.lock(f"{base}-lock", fair=False)
        lease = lock.acquire()
        txn = first.transaction(guard=lease)
        txn.create(f"{base}/while-held")
        txn.commit()
        lock.release()
        with second.lock(f"{base}-lock", fair=False) as theirs:
            assert theirs.node == lease.node  # the same name, another holder's node
            late = first.transaction(guard=lease)
            late.create(f"{base}/late")
            with pytest.raises(zklocks.LockLost):
                late.commit()
    assert kazoo.get_children(base) == ["while-held"]


def test_a_lease_whose_node_was_deleted_guards_nothing(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    lock = client.lock(f"{base}-lock")
    lease = lock.acquire()
    kazoo.delete(lease.node)  # an operator's clean-up: the lock is no longer ours
    txn = client.transaction(guard=lease)
    txn.create(f"{base}/late")
    with pytest.raises(zklocks.LockLost):  # the watch's news, or the server's check
        txn.commit()
    assert kazoo.exists(f"{base}/late") is None
    assert lease.wait_lost(10)


def test_the_server_refuses_a_guard_whose_node_is_gone_before_the_lease_knows(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    """The guard's check is ZooKeeper's, not only the lease's own view: here the lease
    has not heard of its node's deletion (the notification waits unread in the socket,
    because the deletion is made while this loop is blocked), so the multi goes out and
    the server's check refuses it."""

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lease = await client.lock(f"{base}-lock").acquire()
            kazoo.delete(lease.node)  # blocking: the loop cannot read the notification
            assert not lease.lost
            txn = client.transaction(guard=lease)
            txn.create(f"{base}/late")
            with pytest.raises(zklocks.LockLost, match="is gone; nothing was applied"):
                await txn.commit()
            assert kazoo.exists(f"{base}/late") is None

    run(scenario())


def test_a_transaction_is_committed_once(client: zklocks.Client, kazoo: Any, base: str) -> None:
    done = client.transaction()
    done.create(f"{base}/once")
    done.commit()
    with pytest.raises(zklocks.InvalidArgument):
        done.commit()
    failed = client.transaction()
    failed.delete(f"{base}/missing")
    with pytest.raises(zklocks.TransactionFailed):
        failed.commit()
    with pytest.raises(zklocks.InvalidArgument):
        failed.commit()
    with pytest.raises(zklocks.InvalidArgument):
        failed.create(f"{base}/after")
    assert kazoo.get_children(base) == ["once"]


def test_created_nodes_get_the_clients_acl(zk_server: ZooKeeperServer, base: str) -> None:
    from kazoo.client import KazooClient

    owner = [("digest", "alice:s3cret")]
    with zklocks.Client(zk_server.hosts, auth=owner, acl="creator") as client:
        txn = client.transaction()
        txn.create(f"{base}/private", b"x")
        txn.commit()
    alice = KazooClient(hosts=zk_server.hosts, auth_data=owner)
    alice.start(timeout=15)
    try:
        acls, _ = alice.get_acls(f"{base}/private")
    finally:
        alice.stop()
        alice.close()
    assert [(acl.id.scheme, acl.id.id.split(":")[0], acl.perms) for acl in acls] == [
        ("digest", "alice", 31)
    ]


def test_commit_on_a_client_not_started_is_client_closed(
    zk_server: ZooKeeperServer, base: str
) -> None:
    txn = zklocks.Client(zk_server.hosts).transaction()
    txn.create(f"{base}/x")
    with pytest.raises(zklocks.ClientClosed):
        txn.commit()


def test_the_async_client_has_the_same_contract(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lock = client.lock(f"{base}-lock")
            lease = await lock.acquire()
            txn = client.transaction(guard=lease)
            txn.create(f"{base}/a", b"1")
            txn.set_data(f"{base}/a", b"2")
            assert isinstance(txn, zklocks.AsyncTransaction)
            path, stat = await txn.commit()
            assert path == f"{base}/a" and stat is not None and not isinstance(stat, str)
            assert stat.version == 1
            with pytest.raises(zklocks.InvalidArgument):
                await txn.commit()
            refused = client.transaction(guard=lease)
            refused.create(f"{base}/b")
            refused.delete(f"{base}/missing")
            with pytest.raises(zklocks.TransactionFailed) as raised:
                await refused.commit()
            assert (raised.value.index, raised.value.reason) == (1, "NoNode")
            await lock.release()
            late = client.transaction(guard=lease)
            late.create(f"{base}/c")
            with pytest.raises(zklocks.LockLost):
                await late.commit()

    run(scenario())
    assert sorted(kazoo.get_children(base)) == ["a"]
    assert kazoo.get(f"{base}/a")[0] == b"2"
