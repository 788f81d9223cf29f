"""``AsyncElection`` and ``AsyncMultiLock`` on a real ZooKeeper: the sync semantics with
``await``, ``observe()`` as an async iterator, and a cancel that leaves nothing."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from nemesis.proxy import Proxy

import zklocks
from helpers import run_scenario
from zklocks.server import ZooKeeperServer


async def children(client: zklocks.AsyncClient, path: str) -> list[str]:
    (reply,) = await client._session_or_raise().call(
        [zklocks._protocol.records.GetChildren(path)], None
    )
    return sorted(reply) if isinstance(reply, list) else []


@pytest.fixture
def path(request: pytest.FixtureRequest) -> str:
    return f"/async-elections/{request.node.name}-{time.monotonic_ns()}"


def test_tasks_campaign_observe_and_hand_over(zk_server: ZooKeeperServer, path: str) -> None:
    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            seen: asyncio.Queue[str | None] = asyncio.Queue()

            async def observe() -> None:
                async for leader in client.election(path).observe():
                    await seen.put(None if leader is None else leader.identifier)
                await seen.put("ended")

            observer = asyncio.create_task(observe())
            assert await asyncio.wait_for(seen.get(), 10) is None
            a = client.election(path, identifier="a")
            b = client.election(path, identifier="b")
            first = await a.campaign()
            assert a.is_leader and await seen.get() == "a"
            assert (await b.leader()) is not None
            step_down = asyncio.Event()

            async def serve() -> int:
                term = await b.campaign()
                await step_down.wait()
                await b.resign()
                return term.token

            second = asyncio.create_task(serve())
            while len(await b.contenders()) < 2:
                await b.wait_for_change(1)
            with pytest.raises(zklocks.NotHeld):
                await b.resign()  # this task does not lead: the serving task will
            await a.resign()
            assert await asyncio.wait_for(seen.get(), 10) == "b"
            step_down.set()
            assert await asyncio.wait_for(second, 10) > first.token
            assert await seen.get() is None
            await client.stop()
            assert await asyncio.wait_for(seen.get(), 10) == "ended"
            await observer

    run_scenario(scenario)


def test_cancelled_multi_lock_leaves_nothing(zk_server: ZooKeeperServer, path: str) -> None:
    async def scenario() -> None:
        async with (
            zklocks.AsyncClient(zk_server.hosts) as one,
            zklocks.AsyncClient(zk_server.hosts) as two,
        ):
            first, second = f"{path}/a", f"{path}/b"
            blocker = one.lock(second)
            await blocker.acquire()
            multi = two.multi_lock([two.lock(second), two.lock(first)])
            task = asyncio.create_task(multi.acquire())
            while len(await children(one, second)) < 2:  # it holds a, waits for b
                await blocker.wait_for_change(1)
            assert len(await children(one, first)) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await children(one, first) == []
            assert len(await children(one, second)) == 1
            with pytest.raises(zklocks.LockTimeout):
                await multi.acquire(timeout=0.3)
            assert await children(one, first) == []
            await blocker.release()
            async with multi as leases:
                assert [lease.node.rsplit("/", 2)[1] for lease in leases] == ["b", "a"]
                assert multi.held
            assert await children(one, first) == await children(one, second) == []

    run_scenario(scenario)


def test_observer_cut_off_during_a_handover_sees_the_new_leader(
    zk_server: ZooKeeperServer, path: str
) -> None:
    """The leader changes while the observer's connection is down: after it reconnects
    (same session, watches restored) it reports the new leader."""

    async def scenario() -> None:
        async with (
            Proxy("127.0.0.1", zk_server.port) as proxy,
            zklocks.AsyncClient(proxy.hosts) as watching,
            zklocks.AsyncClient(zk_server.hosts) as one,
            zklocks.AsyncClient(zk_server.hosts) as two,
        ):
            seen: asyncio.Queue[str | None] = asyncio.Queue()

            async def observe() -> None:
                async for leader in watching.election(path).observe():
                    await seen.put(None if leader is None else leader.identifier)

            a = one.election(path, identifier="a")
            await a.campaign()
            observer = asyncio.create_task(observe())
            assert await asyncio.wait_for(seen.get(), 10) == "a"
            proxy.reset()  # the observer's connection dies...
            await a.resign()  # ...and the leader changes while it is away
            b = two.election(path, identifier="b")
            await b.campaign()
            assert await asyncio.wait_for(seen.get(), 20) == "b"
            await b.resign()
            assert await asyncio.wait_for(seen.get(), 10) is None
            observer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await observer

    run_scenario(scenario)
