"""Locks across network faults: a reset while waiting, a stall while holding."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nemesis.proxy import Proxy

import zklocks
from zklocks._asyncio import driver
from zklocks._core.ops import Wait
from zklocks.server import ZooKeeperServer


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


def upstream(server: ZooKeeperServer) -> tuple[str, int]:
    return "127.0.0.1", server.port


@pytest.mark.parametrize("kind", ["fair", "unfair", "read", "semaphore"])
def test_a_waiter_queued_before_a_reset_still_gets_the_lock(
    kind: str, zk_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting = asyncio.Event()
    original = driver.execute

    async def entering(op: Any, session: Any, inbox: Any) -> Any:
        if isinstance(op, Wait):
            waiting.set()  # the waiter's watches are set: it waits
        return await original(op, session, inbox)

    monkeypatch.setattr(driver, "execute", entering)
    path = f"/faults/reset-{kind}-{time.monotonic_ns()}"

    def make(client: zklocks.AsyncClient, writer: bool = False) -> zklocks.AsyncLock:
        if kind == "unfair":
            return client.lock(path, fair=False)
        if kind == "read":
            rw = client.read_write_lock(path)
            return rw.write if writer else rw.read
        if kind == "semaphore":
            return client.semaphore(path, permits=1)
        return client.lock(path)

    async def scenario() -> None:
        async with (
            Proxy(*upstream(zk_server)) as proxy,
            zklocks.AsyncClient(zk_server.hosts) as holder,
            zklocks.AsyncClient(proxy.hosts) as waiter,
        ):
            held = make(holder, writer=True)
            await held.acquire()
            lock = make(waiter)

            async def wait_for_it() -> int:
                lease = await lock.acquire(timeout=30)
                assert lock.held and not lease.lost
                await lock.release()
                return lease.token

            task = asyncio.create_task(wait_for_it())
            await waiting.wait()  # its watch is set: it is waiting
            proxy.reset()  # the waiter's connection dies mid-wait
            await held.release()  # ...and the release happens while it is away
            assert await task > 0

    run(scenario)


def test_a_stalled_holder_is_told_before_anyone_else_is_granted(
    zk_server: ZooKeeperServer,
) -> None:
    """The clock rule fires the lost-callback no later than another client's grant."""
    path = f"/faults/stall-{time.monotonic_ns()}"

    async def scenario() -> None:
        async with (
            Proxy(*upstream(zk_server)) as proxy,
            zklocks.AsyncClient(proxy.hosts, session_timeout=1.0) as holder,
            zklocks.AsyncClient(zk_server.hosts) as other,
        ):
            lease = await holder.lock(path).acquire()
            told_at: list[float] = []
            lease.add_lost_callback(lambda _lease: told_at.append(time.monotonic()))
            proxy.stall()  # the network silently eats everything
            granted = await other.lock(path).acquire(timeout=30)
            granted_at = time.monotonic()
            assert told_at and told_at[0] <= granted_at
            assert lease.lost and granted.token > lease.token
            proxy.unstall()

    run(scenario)
