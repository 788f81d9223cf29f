"""A call's timeout bounds it whatever fails; a missing chroot is named at start.

Issue 11, item 5: round trips that fail fast (a chroot that does not exist, a server
that answers every request with a protocol error) used to keep ``acquire(timeout=T)``
looping for ever, sending requests and reconnecting hundreds of times a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

import zklocks
from broken_server import BrokenServer
from zklocks.server import ZooKeeperServer

SLACK = 3.0  # a loaded machine's scheduling, on top of what the rule allows


def bounded(fn: Callable[[], Any], limit: float) -> tuple[Any, float]:
    """Run ``fn`` in a thread; (what it returned or raised, seconds), or fail past ``limit``."""
    outcome: list[Any] = []
    began = time.monotonic()

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # reported to the test below
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still running after {limit} s"
    return outcome[0], time.monotonic() - began


def test_missing_chroot_is_named_at_start(zk_server: ZooKeeperServer) -> None:
    chroot = f"/app-not-there-{uuid.uuid4().hex[:8]}"
    client = zklocks.Client(zk_server.hosts + chroot, session_timeout=4.0)
    error, took = bounded(client.start, 20.0)
    assert isinstance(error, zklocks.InvalidArgument)
    assert f"chroot {chroot} does not exist on the server" in str(error)
    assert took < 2.0 + SLACK
    client.stop()


def test_missing_chroot_is_named_at_start_async(zk_server: ZooKeeperServer) -> None:
    chroot = f"/app-not-there-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        client = zklocks.AsyncClient(zk_server.hosts + chroot, session_timeout=4.0)
        with pytest.raises(zklocks.InvalidArgument, match=f"chroot {chroot} does not exist"):
            await asyncio.wait_for(client.start(), 20.0)
        await client.stop()

    asyncio.run(main())


def test_an_existing_chroot_starts(zk_server: ZooKeeperServer, kazoo: KazooClient) -> None:
    chroot = f"/app-{uuid.uuid4().hex[:8]}"
    kazoo.create(chroot)
    with zklocks.Client(zk_server.hosts + chroot, session_timeout=4.0) as client:
        lock = client.lock("/inside")
        lock.acquire(timeout=10)
        assert kazoo.get_children(chroot + "/inside")
        lock.release()


def test_acquire_timeout_holds_when_the_chroot_vanishes(
    zk_server: ZooKeeperServer, kazoo: KazooClient
) -> None:
    # Every create then fails at once with NoNode, and so does making the parents.
    chroot = f"/app-{uuid.uuid4().hex[:8]}"
    kazoo.create(chroot)
    with zklocks.Client(zk_server.hosts + chroot, session_timeout=4.0) as client:
        kazoo.delete(chroot)
        lock = client.lock("/x")
        error, took = bounded(lambda: lock.acquire(timeout=1.0), 1.0 + 20.0)
        assert isinstance(error, zklocks.LockTimeout)
        assert took < 1.0 + SLACK
    async_error, _ = bounded(lambda: asyncio.run(_async_acquire(zk_server, chroot)), 30.0)
    assert isinstance(async_error, zklocks.LockTimeout)


async def _async_acquire(zk_server: ZooKeeperServer, chroot: str) -> None:
    kazoo = KazooClient(hosts=zk_server.hosts)
    kazoo.start()
    try:
        kazoo.create(chroot)
        async with zklocks.AsyncClient(zk_server.hosts + chroot, session_timeout=4.0) as client:
            kazoo.delete(chroot)
            began = time.monotonic()
            try:
                await asyncio.wait_for(client.lock("/x").acquire(timeout=1.0), 20.0)
            finally:
                assert time.monotonic() - began < 1.0 + SLACK
    finally:
        kazoo.stop()
        kazoo.close()


def test_acquire_timeout_holds_against_a_broken_server() -> None:
    with BrokenServer() as server:
        client = zklocks.Client(server.hosts, session_timeout=4.0)
        client.start()
        try:
            began = server.accepted
            error, took = bounded(lambda: client.lock("/x").acquire(timeout=3.0), 30.0)
            assert isinstance(error, zklocks.LockTimeout), error
            # The timeout, then at most CLEANUP_RETRIES + 1 reconnects (backed off, at
            # most a second apart) to find a node whose create's fate is unknown.
            assert took < 3.0 + 3 * 1.0 + SLACK
            # Backed off: a dozen connections, where it used to be hundreds a second.
            reconnects = server.accepted - began
            assert reconnects <= 20, f"{reconnects} connections in {took:.1f} s"
        finally:
            client.stop()


def test_a_broken_server_costs_almost_no_cpu() -> None:
    with BrokenServer() as server:
        client = zklocks.Client(server.hosts, session_timeout=4.0)
        client.start()
        try:
            lock = client.lock("/x")
            worker = threading.Thread(target=_acquire_quietly, args=(lock,), daemon=True)
            cpu, wall = time.process_time(), time.monotonic()
            worker.start()
            worker.join(4.0)  # the deadline of the acquire is 3 s
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
            assert cpu < 0.5 * wall, f"{cpu:.2f} s of CPU in {wall:.2f} s"
        finally:
            client.stop()


def _acquire_quietly(lock: zklocks.Lock) -> None:
    with contextlib.suppress(zklocks.LockError):
        lock.acquire(timeout=3.0)
