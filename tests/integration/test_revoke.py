"""``client.revoke(path)`` and ``lease.add_revoke_callback``, zklocks to zklocks, on a real
ZooKeeper (Curator in both directions: tests/peers/test_curator_revoke.py)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import zklocks
from helpers import run
from zklocks.server import ZooKeeperServer

WAIT = 10.0


def unique(name: str) -> str:
    return f"/revoke/{name}-{time.monotonic_ns()}"


@pytest.fixture
def holder(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts) as client:
        yield client


@pytest.fixture
def asker(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts) as client:
        yield client


def heard(lease: Any) -> threading.Event:
    event = threading.Event()
    lease.add_revoke_callback(lambda revoked: event.set() if revoked is lease else None)
    return event


def test_a_holder_hears_a_revoke_and_keeps_its_lease_until_it_lets_go(
    holder: zklocks.Client, asker: zklocks.Client, kazoo: Any
) -> None:
    path = unique("basic")
    lease = holder.lock(path, identifier="worker-7").acquire(timeout=5)
    told = heard(lease)
    time.sleep(0.2)  # past the watch's delay: this is the watch-fires path
    assert asker.revoke(path) == 1
    assert told.wait(WAIT)
    assert not lease.lost  # a request, not a loss
    (contender,) = asker.lock(path).contenders()
    assert contender.identifier == "worker-7"  # status still says who holds
    assert json.loads(kazoo.get(lease.node)[0])["revoke"] is True
    lease.release()
    assert asker.lock(path).contenders() == []


def test_a_revoke_sent_right_after_the_grant_still_reaches_the_holder(
    holder: zklocks.Client, asker: zklocks.Client
) -> None:
    """Sent before the holder's own watch is set (it is set a little after the grant),
    and before anyone listens: heard as soon as someone does."""
    path = unique("early")
    lease = holder.lock(path).acquire(timeout=5)
    assert asker.revoke(path) == 1  # a round trip: well inside the watch's delay
    told = heard(lease)
    assert told.wait(WAIT)


def test_a_revoke_written_before_the_watch_reaches_a_listening_holder(
    holder: zklocks.Client, asker: zklocks.Client
) -> None:
    path = unique("early-listening")
    lock = holder.lock(path)
    lease = lock.acquire(timeout=5)
    told = heard(lease)
    assert asker.revoke(path) == 1
    assert told.wait(WAIT)


def test_only_holders_are_asked_and_every_shared_holder_is(
    holder: zklocks.Client, asker: zklocks.Client, kazoo: Any
) -> None:
    path = unique("shared")
    readers = [holder.read_write_lock(path).read for _ in range(2)]
    leases: list[Any] = []
    threads = [threading.Thread(target=lambda r=r: leases.append(r.acquire(5))) for r in readers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    told = [heard(lease) for lease in leases]
    writer = asker.read_write_lock(path).write
    waiting = threading.Thread(target=lambda: writer.acquire(timeout=WAIT) and writer.release())
    waiting.start()
    deadline = time.monotonic() + WAIT
    while len(asker.lock(path).contenders()) < 3:
        assert time.monotonic() < deadline
        asker.lock(path).wait_for_change(timeout=0.5)
    assert asker.revoke(path) == 2
    assert all(event.wait(WAIT) for event in told)
    waiter = next(c for c in asker.lock(path).contenders() if not c.holder)
    assert b"revoke" not in kazoo.get(waiter.node)[0]  # a waiter is not asked
    for lease in leases:
        lease.release()
    waiting.join(WAIT)
    assert not waiting.is_alive()


def test_revoke_of_a_free_or_missing_path_asks_nobody(asker: zklocks.Client) -> None:
    path = unique("free")
    assert asker.revoke(path) == 0
    asker.lock(path).acquire(timeout=5).release()
    assert asker.revoke(path) == 0


def test_a_released_lease_hears_nothing(holder: zklocks.Client, asker: zklocks.Client) -> None:
    path = unique("released")
    calls: list[Any] = []
    lease = holder.lock(path).acquire(timeout=5)
    lease.add_revoke_callback(calls.append)
    lease.release()
    successor = holder.lock(path).acquire(timeout=5)
    told = heard(successor)
    assert asker.revoke(path) == 1
    assert told.wait(WAIT)
    assert calls == []


def test_curator_layout_holders_get_curators_marker(
    holder: zklocks.Client, asker: zklocks.Client, kazoo: Any
) -> None:
    path = unique("curator-layout")
    lease = holder.lock(path, layout="curator").acquire(timeout=5)
    told = heard(lease)
    assert asker.revoke(path) == 1
    assert told.wait(WAIT)
    assert kazoo.get(lease.node)[0] == b"__REVOKE__"


def test_revoke_refuses_a_bad_path(asker: zklocks.Client) -> None:
    with pytest.raises(zklocks.InvalidPath):
        asker.revoke("no-slash")


def test_async_revoke_reaches_an_async_holder(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        async with (
            zklocks.AsyncClient(zk_server.hosts) as holder,
            zklocks.AsyncClient(zk_server.hosts) as asker,
        ):
            path = unique("async")
            lease = await holder.semaphore(path, permits=2).acquire(timeout=5)
            told = asyncio.Event()
            lease.add_revoke_callback(lambda _lease: told.set())
            assert await asker.revoke(path) == 1
            await asyncio.wait_for(told.wait(), WAIT)
            assert not lease.lost
            await lease.release()

    run(scenario())
