"""Issue 11, item 4: a fair lock and a one-node (``fair=False``) lock on one path.

Mixing them is a misuse, but it must never break mutual exclusion: the one-node acquirer
that finds queued contenders refuses (``InvalidArgument``) and leaves nothing behind;
queued contenders wait for a one-node holder.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import zklocks
from helpers import run
from zklocks.server import ZooKeeperServer

WAIT = 15.0


def test_a_one_node_lock_refuses_a_path_a_fair_lock_holds(
    zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    path = f"/mixed/fair-first-{time.monotonic_ns()}"
    with zklocks.Client(zk_server.hosts) as fair_client, zklocks.Client(zk_server.hosts) as other:
        fair = fair_client.lock(path)
        lease = fair.acquire(timeout=WAIT)
        unfair = other.lock(path, fair=False)
        with pytest.raises(zklocks.InvalidArgument, match="queued contenders"):
            unfair.acquire(timeout=WAIT)
        with pytest.raises(zklocks.InvalidArgument, match="queued contenders"):
            unfair.try_acquire()
        assert not unfair.held
        # nothing left behind: the one-node lock deleted its ``lock`` node again
        assert kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]
        # and ``status`` sees the real holder as the holder
        (only,) = other.lock(path).contenders()
        assert only.holder and only.node == lease.node
        assert not lease.lost and fair.held
        fair.release()


def test_a_one_node_lock_refuses_a_path_where_fair_contenders_wait(
    zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    """One-node first, then a fair waiter queues behind it (it waits, as it must); a
    second one-node acquirer then refuses instead of racing the fair waiter."""
    path = f"/mixed/one-node-first-{time.monotonic_ns()}"
    with (
        zklocks.Client(zk_server.hosts) as first,
        zklocks.Client(zk_server.hosts) as queued,
        zklocks.Client(zk_server.hosts) as second,
    ):
        one_node = first.lock(path, fair=False)
        one_node.acquire(timeout=WAIT)
        fair = queued.lock(path)
        with pytest.raises(zklocks.LockTimeout):
            fair.acquire(timeout=0.5)  # the one-node holder is ahead of everyone
        granted = threading.Event()
        let_go = threading.Event()
        leases: list[zklocks.Lease] = []

        def wait_in_line() -> None:
            leases.append(fair.acquire(timeout=WAIT * 2))
            granted.set()
            let_go.wait(WAIT * 2)
            fair.release()  # held by this thread

        waiter = threading.Thread(target=wait_in_line, daemon=True)
        waiter.start()
        _wait_for(kazoo, path, lambda children: len(children) == 2)
        with pytest.raises(zklocks.InvalidArgument, match="queued contenders"):
            second.lock(path, fair=False).acquire(timeout=WAIT)
        assert not granted.is_set()
        one_node.release()
        assert granted.wait(WAIT)
        assert kazoo.get_children(path) == [leases[0].node.rsplit("/", 1)[1]]
        assert not leases[0].lost
        let_go.set()
        waiter.join(WAIT)
        assert not waiter.is_alive() and kazoo.get_children(path) == []


def test_an_async_one_node_lock_refuses_too(zk_server: ZooKeeperServer, kazoo: Any) -> None:
    path = f"/mixed/async-{time.monotonic_ns()}"

    async def scenario() -> None:
        async with (
            zklocks.AsyncClient(zk_server.hosts) as one,
            zklocks.AsyncClient(zk_server.hosts) as two,
        ):
            fair = one.lock(path)
            lease = await fair.acquire(timeout=WAIT)
            with pytest.raises(zklocks.InvalidArgument, match="queued contenders"):
                await two.lock(path, fair=False).acquire(timeout=WAIT)
            assert kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]
            await fair.release()

    run(scenario())


def _wait_for(kazoo: Any, path: str, done: Any) -> list[str]:
    changed = threading.Event()
    deadline = time.monotonic() + WAIT
    while True:
        changed.clear()
        children: list[str] = kazoo.get_children(path, watch=lambda event: changed.set())
        if done(children):
            return children
        remaining = deadline - time.monotonic()
        assert remaining > 0 and changed.wait(remaining), f"{path}: stuck at {children}"
