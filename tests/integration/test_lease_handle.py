"""A lease is a handle on its hold: ``with lock.acquire() as lease``, ``async with await
lock.acquire() as lease``, and ``lease.release()`` from any thread or task.

Each test looks at the server (``contenders()`` from a second client, or kazoo) to see
the node go, not only at the lease's own flags.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import zklocks
from helpers import run
from zklocks.server import ZooKeeperServer


def unique(name: str) -> str:
    return f"/lease-handle/{name}-{time.monotonic_ns()}"


@pytest.fixture
def observer(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    """A second session: what everyone else sees of the lock."""
    with zklocks.Client(zk_server.hosts) as client:
        yield client


def nodes(observer: zklocks.Client, path: str) -> list[str]:
    return [c.node for c in observer.lock(path).contenders()]


def await_contenders(observer: zklocks.Client, path: str, count: int) -> None:
    """Until ``path`` has ``count`` contenders: woken by a child watch (the short bound
    covers a node made between a listing and the next watch)."""
    deadline = time.monotonic() + 20
    lock = observer.lock(path)
    while len(lock.contenders()) < count:
        assert time.monotonic() < deadline, f"{path} never had {count} contenders"
        lock.wait_for_change(timeout=0.5)


class Boom(Exception):
    pass


def test_sync_lease_as_context_manager_releases_on_exit(
    client: zklocks.Client, observer: zklocks.Client
) -> None:
    path = unique("with")
    lock = client.lock(path)
    with lock.acquire(timeout=5) as lease:
        assert isinstance(lease, zklocks.Lease)
        assert nodes(observer, path) == [lease.node]
        assert lock.held
    assert nodes(observer, path) == []
    assert not lock.held and lease.ended
    with pytest.raises(zklocks.NotHeld):
        lock.release()  # the block released it: nothing left to release


def test_sync_lease_as_context_manager_releases_on_exception(
    client: zklocks.Client, observer: zklocks.Client
) -> None:
    path = unique("with-raise")
    lock = client.lock(path)
    with pytest.raises(Boom), lock.acquire(timeout=5) as lease:
        assert nodes(observer, path) == [lease.node]
        raise Boom
    assert nodes(observer, path) == []
    assert lock.try_acquire() is not None  # free again, for this thread too
    lock.release()


def test_async_lease_as_context_manager_releases_on_exit_and_on_exception(
    zk_server: ZooKeeperServer, observer: zklocks.Client
) -> None:
    path = unique("async-with")

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lock = client.lock(path)
            async with await lock.acquire(timeout=5) as lease:
                assert isinstance(lease, zklocks.AsyncLease)
                assert await asyncio.to_thread(nodes, observer, path) == [lease.node]
            assert await asyncio.to_thread(nodes, observer, path) == []
            with pytest.raises(Boom):
                async with await lock.acquire(timeout=5) as lease:
                    assert await asyncio.to_thread(nodes, observer, path) == [lease.node]
                    raise Boom
            assert await asyncio.to_thread(nodes, observer, path) == []
            assert not lock.held

    run(scenario())


def test_release_from_another_thread_frees_the_lock_for_a_waiter(
    client: zklocks.Client, observer: zklocks.Client
) -> None:
    path = unique("other-thread")
    lock = client.lock(path)
    lease = lock.acquire(timeout=5)
    waiter_got: list[zklocks.Lease] = []
    waiter_client = zklocks.Client(client.hosts).start()
    try:
        waiting = threading.Thread(
            target=lambda: waiter_got.append(waiter_client.lock(path).acquire(timeout=30))
        )
        waiting.start()
        await_contenders(observer, path, 2)  # the waiter is in line
        releaser = threading.Thread(target=lease.release)  # not the thread that acquired
        releaser.start()
        releaser.join(10)
        waiting.join(30)
        assert waiter_got, "the waiter never got the lock after the release"
        assert waiter_got[0].token > lease.token
        assert not lock.held  # the acquiring thread no longer holds it either
        assert nodes(observer, path) == [waiter_got[0].node]
    finally:
        waiter_client.stop()


def test_release_from_another_thread_counts_one_hold_of_a_reentrant_lock(
    client: zklocks.Client, observer: zklocks.Client
) -> None:
    path = unique("reentrant")
    lock = client.lock(path, reentrant=True)
    lease = lock.acquire()
    assert lock.acquire() is lease  # held twice by this thread
    other = threading.Thread(target=lease.release)
    other.start()
    other.join(10)
    assert lock.held and nodes(observer, path) == [lease.node]  # one hold left
    lease.release()
    assert not lock.held and nodes(observer, path) == []
    with pytest.raises(zklocks.NotHeld, match="released already"):
        lease.release()


def test_with_block_after_an_explicit_release_does_not_raise(
    client: zklocks.Client, observer: zklocks.Client
) -> None:
    path = unique("released-inside")
    with client.lock(path).acquire() as lease:
        done = threading.Thread(target=lease.release)
        done.start()
        done.join(10)
        assert nodes(observer, path) == []
    assert lease.ended


def test_with_lease_lost_inside_the_block_raises_lock_lost(
    client: zklocks.Client, kazoo: Any
) -> None:
    path = unique("lost")
    lock = client.lock(path)
    with pytest.raises(zklocks.LockLost), lock.acquire() as lease:
        kazoo.delete(lease.node)  # someone else deletes our node
        assert lease.wait_lost(10)
    assert not lock.held


def test_release_from_another_task_frees_the_lock(
    zk_server: ZooKeeperServer, observer: zklocks.Client
) -> None:
    path = unique("other-task")

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lock = client.lock(path)
            held = asyncio.Event()
            leases: list[zklocks.AsyncLease] = []

            async def holder() -> None:
                leases.append(await lock.acquire(timeout=5))
                held.set()

            await asyncio.create_task(holder())  # that task has ended, still holding
            await held.wait()
            lease = leases[0]
            assert await asyncio.to_thread(nodes, observer, path) == [lease.node]
            waiter = asyncio.create_task(lock.acquire(timeout=30))  # a third task waits
            await asyncio.to_thread(await_contenders, observer, path, 2)
            await lease.release()  # from this task, not the holder's
            second = await waiter
            assert second.token > lease.token
            assert await asyncio.to_thread(nodes, observer, path) == [second.node]
            with pytest.raises(zklocks.NotHeld):
                await lease.release()
            await second.release()
            assert await asyncio.to_thread(nodes, observer, path) == []

    run(scenario())


def test_a_released_lease_says_so_and_is_never_suspended(zk_server: ZooKeeperServer) -> None:
    client = zklocks.Client(zk_server.hosts)
    with client:
        lease = client.lock(unique("released")).acquire()
        assert repr(lease).endswith(" held>")
        lease.release()
        assert lease.ended and repr(lease).endswith(" released>")
    assert not client.connected
    assert lease.ended and not lease.suspended and not lease.lost
    assert repr(lease).endswith(" released>")
