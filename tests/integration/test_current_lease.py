"""``zklocks.current_lease()``: the lease of the innermost ``with lock``, ``with lease`` or
``exclusive`` call of this thread or task, None outside; sync and async."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Iterator

import pytest

import zklocks
from helpers import run
from zklocks import _exclusive
from zklocks.server import ZooKeeperServer


def unique(name: str) -> str:
    return f"/current/{name}-{time.monotonic_ns()}"


@pytest.fixture
def hosts(zk_server: ZooKeeperServer) -> Iterator[str]:
    yield zk_server.hosts
    _exclusive._clients.stop_all()  # exclusive's clients, made on first call


def test_with_lock_and_with_lease_nest_and_end_with_their_blocks(client: zklocks.Client) -> None:
    assert zklocks.current_lease() is None
    with client.lock(unique("outer")) as outer:
        assert zklocks.current_lease() is outer
        with client.lock(unique("inner")).acquire() as inner:
            assert zklocks.current_lease() is inner
            assert inner is not outer
        assert zklocks.current_lease() is outer
    assert zklocks.current_lease() is None


def test_a_block_left_by_an_exception_is_left_by_current_lease_too(client: zklocks.Client) -> None:
    with pytest.raises(KeyError), client.lock(unique("raises")):
        raise KeyError("out")
    assert zklocks.current_lease() is None


def test_each_thread_sees_only_its_own_blocks(client: zklocks.Client) -> None:
    seen: list[object] = []
    inside = threading.Event()
    done = threading.Event()

    def other() -> None:
        inside.wait(10)
        seen.append(zklocks.current_lease())
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with client.lock(unique("threads")) as lease:
        inside.set()
        assert done.wait(10)
        assert zklocks.current_lease() is lease
    thread.join()
    assert seen == [None]


def test_an_exclusive_function_reaches_its_token(hosts: str, zk_server: ZooKeeperServer) -> None:
    path = unique("exclusive")

    @zklocks.exclusive(path, hosts=hosts, on_busy="skip")
    def job() -> tuple[int, str]:
        lease = zklocks.current_lease()
        assert isinstance(lease, zklocks.Lease)
        return lease.token, lease.node

    result = job()
    assert result is not None
    token, node = result
    assert node.startswith(f"{path}/") and token > 0
    assert zklocks.current_lease() is None


def test_async_with_lock_and_exclusive_set_it_per_task(hosts: str) -> None:
    path = unique("async-exclusive")

    @zklocks.exclusive(path, hosts=hosts)
    async def job() -> zklocks.AsyncLease | zklocks.Lease | None:
        return zklocks.current_lease()

    async def main() -> None:
        async with zklocks.AsyncClient(hosts) as client:
            lock = client.lock(unique("async"))
            other_saw: list[object] = []
            async with lock as lease:
                assert zklocks.current_lease() is lease
                # a task started apart from the block (no context of its) sees nothing
                await asyncio.get_running_loop().create_task(
                    _look(other_saw), context=contextvars.Context()
                )
            assert other_saw == [None]
            assert zklocks.current_lease() is None
        from_job = await job()
        assert isinstance(from_job, zklocks.AsyncLease)
        assert from_job.node.startswith(f"{path}/")
        assert zklocks.current_lease() is None

    run(main())


async def _look(into: list[object]) -> None:
    into.append(zklocks.current_lease())
