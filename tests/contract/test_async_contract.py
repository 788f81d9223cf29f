"""The lock contract for ``AsyncClient``: each task is a contender. Every case runs on a
real ZooKeeper and on the simulator's model (``zklocks.sim.async_session_factory``).

Every case runs for every lock kind; cancellation is injected at every await point of
an acquire (each request's round trip and the wait), and must leave no node and no task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

import zklocks
from conftest import AsyncBackend
from helpers import KINDS as ANY_CLIENT_KINDS
from helpers import QUEUED_EXCLUSIVE, AsyncTappedSession, blocker_kind, run_scenario
from zklocks._vocabulary import WatchEvent, WatchKind

KINDS: dict[str, Callable[[zklocks.AsyncClient, str], zklocks.AsyncLock]] = dict(ANY_CLIENT_KINDS)
ALL = list(KINDS)


async def children(client: zklocks.AsyncClient, path: str) -> list[str]:
    session = client._session_or_raise()
    (reply,) = await session.call([zklocks._protocol.records.GetChildren(path)], None)
    return sorted(reply) if isinstance(reply, list) else []


class AsyncProbe:
    """Counts waiters entering the wait and deletion wake-ups, as the backend's tapped
    sessions report them."""

    def __init__(self) -> None:
        self.entered = 0
        self.wakeups: list[str] = []
        self.changed = asyncio.Event()

    def watching(self, _task: str) -> None:
        self.entered += 1
        self.changed.set()

    def fired(self, _task: str, event: WatchEvent) -> None:
        if event.kind is WatchKind.DELETED:
            self.wakeups.append(event.path)

    async def until_waiting(self, count: int) -> None:
        while self.entered < count:
            self.changed.clear()
            await self.changed.wait()


@pytest.fixture
def probe(async_backend: AsyncBackend) -> AsyncProbe:
    """A task whose watches are set on nodes that exist is a waiter blocked on them; a
    deletion they fire is its wake-up."""
    found = AsyncProbe()
    async_backend.tap.watching.append(found.watching)
    async_backend.tap.fired.append(found.fired)
    return found


@pytest.mark.parametrize("kind", ALL)
def test_acquire_release_and_tokens(kind: str, async_backend: AsyncBackend, lock_path: str) -> None:
    async def scenario() -> None:
        async with async_backend.client() as client:
            lock = KINDS[kind](client, lock_path)
            tokens = []
            for _ in range(3):
                async with lock as lease:
                    assert lock.held and lease.token > 0 and not lease.lost
                    tokens.append(lease.token)
                assert not lock.held
            assert tokens == sorted(set(tokens))
            assert await children(client, lock_path) == []

    run_scenario(scenario)


@pytest.mark.parametrize("kind", ["fair", "unfair", "write", "semaphore", "election"])
def test_tasks_exclude_each_other(kind: str, async_backend: AsyncBackend, lock_path: str) -> None:
    async def scenario() -> None:
        async with async_backend.client() as client:
            lock = KINDS[kind](client, lock_path)
            inside = most = 0

            async def work() -> None:
                nonlocal inside, most
                for _ in range(5):
                    async with lock:
                        inside += 1
                        most = max(most, inside)
                        await asyncio.sleep(0)  # let other tasks run while we hold
                        inside -= 1

            await asyncio.gather(*(work() for _ in range(4)))
            assert most == 1

    run_scenario(scenario)


@pytest.mark.parametrize("kind", QUEUED_EXCLUSIVE)
def test_fifo_and_one_wake_up_per_release(
    kind: str, async_backend: AsyncBackend, lock_path: str, probe: AsyncProbe
) -> None:
    wakeups = probe.wakeups

    async def scenario() -> None:
        async with async_backend.client() as client:
            lock = KINDS[kind](client, lock_path)
            await lock.acquire()
            order: list[int] = []
            granted = asyncio.Event()
            proceed = asyncio.Event()

            async def take(i: int) -> None:
                async with lock:
                    order.append(i)
                    granted.set()
                    await proceed.wait()
                    proceed.clear()

            tasks = []
            for i in range(5):
                tasks.append(asyncio.create_task(take(i)))
                await probe.until_waiting(i + 1)
            assert wakeups == []
            await lock.release()
            for i in range(5):
                await granted.wait()
                granted.clear()
                assert len(wakeups) == i + 1  # one wake-up per release: no herd
                proceed.set()
            await asyncio.gather(*tasks)
            assert order == [0, 1, 2, 3, 4]

    run_scenario(scenario)


@pytest.mark.parametrize("kind", ALL)
def test_timeout_try_acquire_and_no_node_left(
    kind: str, async_backend: AsyncBackend, lock_path: str
) -> None:
    async def scenario() -> None:
        async with async_backend.client() as holder, async_backend.client() as client:
            held = await KINDS[blocker_kind(kind)](holder, lock_path).acquire()
            lock = KINDS[kind](client, lock_path)
            started = time.monotonic()
            with pytest.raises(zklocks.LockTimeout):
                await lock.acquire(timeout=0.3)
            assert time.monotonic() - started >= 0.3
            assert await lock.try_acquire() is None
            assert await children(client, lock_path) == [held.node.rsplit("/", 1)[1]]

    run_scenario(scenario)


@pytest.mark.parametrize("kind", ALL)
def test_already_held_reentrant_and_not_held(
    kind: str, async_backend: AsyncBackend, lock_path: str
) -> None:
    async def scenario() -> None:
        async with async_backend.client() as client:
            lock = KINDS[kind](client, lock_path)
            with pytest.raises(zklocks.NotHeld):
                await lock.release()
            lease = await lock.acquire()
            with pytest.raises(zklocks.AlreadyHeld):
                await lock.acquire()

            async def other_task() -> None:
                assert not lock.held
                with pytest.raises(zklocks.NotHeld):
                    await lock.release()

            await asyncio.create_task(other_task())
            await lock.release()
            assert not lease.lost  # released, not lost
            again = client.lock(lock_path, reentrant=True)
            if kind != "fair":
                return
            first = await again.acquire()
            assert await again.acquire() is first
            await again.release()
            assert again.held
            await again.release()
            assert not again.held

    run_scenario(scenario)


@pytest.mark.parametrize("kind", ALL)
def test_closed_client_fails_fast(kind: str, async_backend: AsyncBackend, lock_path: str) -> None:
    async def scenario() -> None:
        with pytest.raises(zklocks.ClientClosed):
            await KINDS[kind](async_backend.client(), lock_path).acquire()
        client = await async_backend.client().start()
        lock = KINDS[kind](client, lock_path)
        await client.stop()
        with pytest.raises(zklocks.ClientClosed):
            await lock.acquire()

    run_scenario(scenario)


async def cancel_variants(lock: zklocks.AsyncLock, how: str) -> None:
    if how == "cancel":
        task = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    elif how == "wait_for":
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lock.acquire(), 0.2)
    else:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await lock.acquire()


@pytest.mark.parametrize("how", ["cancel", "wait_for", "asyncio.timeout"])
@pytest.mark.parametrize("kind", ALL)
def test_cancelling_a_waiter_deletes_its_node(
    kind: str, how: str, async_backend: AsyncBackend, lock_path: str
) -> None:
    if how == "asyncio.timeout" and not hasattr(asyncio, "timeout"):
        pytest.fail("asyncio.timeout needs Python 3.11")

    async def scenario() -> None:
        before = asyncio.all_tasks()
        async with async_backend.client() as holder, async_backend.client() as client:
            held = await KINDS[blocker_kind(kind)](holder, lock_path).acquire()
            lock = KINDS[kind](client, lock_path)
            await cancel_variants(lock, how)
            assert await children(client, lock_path) == [held.node.rsplit("/", 1)[1]]
            assert not lock.held
        assert asyncio.all_tasks() - before == set()  # no task leaked

    run_scenario(scenario)


@pytest.mark.parametrize("kind", ALL)
def test_cancel_at_every_await_point_leaves_nothing(
    kind: str, async_backend: AsyncBackend, lock_path: str
) -> None:
    """Cancel the acquiring task during its k-th round trip, for every k it makes."""
    calls: dict[str, Any] = {"count": 0, "cancel_at": -1, "task": None, "waiting": None}

    class Cancelling(AsyncTappedSession):
        """Steps into each round trip of the task under test, and cancels it in one."""

        async def call(self, *args: Any, **kwargs: Any) -> Any:
            task = asyncio.current_task()
            if task is not calls["task"]:
                return await super().call(*args, **kwargs)
            calls["count"] += 1
            pending = asyncio.ensure_future(super().call(*args, **kwargs))
            await asyncio.sleep(0)  # the requests are submitted: now they are in flight
            if calls["count"] == calls["cancel_at"]:
                assert task is not None
                task.cancel()
            if calls["count"] >= 2:  # created (or tried) and now setting its watch: waiting
                calls["waiting"].set()
            return await pending

    async_backend.session_class = Cancelling  # the clients made below run on it

    async def attempt(cancel_at: int) -> bool:
        """True if the cancel was delivered during acquire."""
        async with async_backend.client() as holder, async_backend.client() as client:
            blocking = KINDS[blocker_kind(kind)](holder, lock_path)
            holding, let_go = asyncio.Event(), asyncio.Event()

            async def hold() -> None:
                async with blocking:
                    holding.set()
                    await let_go.wait()

            holder_task = asyncio.create_task(hold())
            await holding.wait()
            lock = KINDS[kind](client, lock_path)

            waiting = asyncio.Event()

            async def release_when_queued() -> None:
                await waiting.wait()
                let_go.set()

            releaser = asyncio.create_task(release_when_queued())
            calls.update(count=0, cancel_at=cancel_at, task=asyncio.current_task(), waiting=waiting)
            cancelled = False
            try:
                await lock.acquire(timeout=10)
            except asyncio.CancelledError:
                cancelled = True
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()  # the cancel was ours: clear it so the test can go on
            calls.update(cancel_at=-1, task=None)
            let_go.set()
            releaser.cancel()
            await asyncio.gather(holder_task, releaser, return_exceptions=True)
            if cancelled:
                assert not lock.held
                assert await children(client, lock_path) == []  # our node is gone too
            else:
                await lock.release()
            return cancelled

    async def scenario() -> None:
        delivered = 0
        for cancel_at in range(1, 12):
            if await attempt(cancel_at):
                delivered += 1
            else:
                break
        assert delivered >= 2  # at least the create's round trip and one more

    if not hasattr(asyncio.Task, "uncancel"):
        pytest.fail("needs Python 3.11 (Task.uncancel)")
    run_scenario(scenario)


@pytest.mark.parametrize("kind", ALL)
def test_expired_session_marks_the_lease_lost(
    kind: str, async_backend: AsyncBackend, lock_path: str
) -> None:
    async def scenario() -> None:
        async with async_backend.client() as client, async_backend.client() as other:
            lock = KINDS[kind](client, lock_path)
            told = asyncio.Event()
            with pytest.raises(zklocks.LockLost):
                async with lock as lease:
                    lease.add_lost_callback(lambda _lease: told.set())
                    # blocking calls: our loop (and so our client) stands still meanwhile
                    async_backend.expire(client)
                    assert await lease.wait_lost(20)
                    assert told.is_set() and not lock.held
            later = await KINDS[kind](other, lock_path).acquire(timeout=20)
            assert later.token > lease.token

    run_scenario(scenario)


def test_a_thousand_waiting_tasks_need_no_threads(
    async_backend: AsyncBackend, lock_path: str, probe: AsyncProbe
) -> None:
    """Many waiters cost watches and objects, never threads."""
    import threading

    async def scenario() -> None:
        async with async_backend.client() as client:
            lock = client.lock(lock_path)
            await lock.acquire()
            threads_before = threading.active_count()
            done = 0

            async def take() -> None:
                nonlocal done
                async with lock:
                    done += 1

            tasks = [asyncio.create_task(take()) for _ in range(1000)]
            await probe.until_waiting(1000)
            assert threading.active_count() == threads_before
            await lock.release()
            await asyncio.gather(*tasks)
            assert done == 1000

    run_scenario(scenario)
