"""Locks across network faults: a reset while waiting, a stall while holding."""

from __future__ import annotations

import asyncio
import time

import pytest
from nemesis.proxy import Proxy

import zklocks
from helpers import (
    KINDS,
    AsyncTappedSession,
    SessionTap,
    blocker_kind,
    native_async_sessions,
    run_scenario,
    tapped_factory,
)
from zklocks.server import ZooKeeperServer


def upstream(server: ZooKeeperServer) -> tuple[str, int]:
    return "127.0.0.1", server.port


@pytest.mark.parametrize("kind", ["fair", "unfair", "read", "semaphore"])
def test_a_waiter_queued_before_a_reset_still_gets_the_lock(
    kind: str, zk_server: ZooKeeperServer
) -> None:
    waiting = asyncio.Event()
    tap = SessionTap(watching=[lambda _task: waiting.set()])  # its watches are set: it waits
    waiter_sessions = tapped_factory(native_async_sessions(), tap, AsyncTappedSession)
    path = f"/faults/reset-{kind}-{time.monotonic_ns()}"

    async def scenario() -> None:
        async with (
            Proxy(*upstream(zk_server)) as proxy,
            zklocks.AsyncClient(zk_server.hosts) as holder,
            zklocks.AsyncClient(proxy.hosts, session_factory=waiter_sessions) as waiter,
        ):
            held = KINDS[blocker_kind(kind)](holder, path)
            await held.acquire()
            lock = KINDS[kind](waiter, path)

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

    run_scenario(scenario)


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

    run_scenario(scenario)
