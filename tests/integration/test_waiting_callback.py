"""``lease.add_waiting_callback(fn)`` on a real ZooKeeper (issue 35): the holder hears
how many queue behind it, each time that count rises; holders beside it do not count;
a lease without a callback watches nothing more.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import zklocks
from helpers import SessionTap, TappedSession, native_sessions, run_scenario, tapped_factory
from zklocks._protocol.records import GetChildren
from zklocks._vocabulary import Watcher
from zklocks.server import ZooKeeperServer

WAIT = 10.0


def unique(name: str) -> str:
    return f"/waiting/{name}-{time.monotonic_ns()}"


@pytest.fixture
def clients(zk_server: ZooKeeperServer) -> Iterator[tuple[zklocks.Client, zklocks.Client]]:
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as waiter:
        yield holder, waiter


def _queue_in_thread(lock: Any, timeout: float) -> threading.Thread:
    """A contender that waits in line (and gives up after ``timeout``)."""

    def take() -> None:
        try:
            lock.acquire(timeout=timeout)
            lock.release()
        except (zklocks.LockTimeout, zklocks.ClientClosed):  # gave up, or its client stopped
            pass

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_sync_the_holder_hears_each_rise_in_the_count_of_waiters(
    clients: tuple[zklocks.Client, zklocks.Client], zk_server: ZooKeeperServer
) -> None:
    holder, waiter = clients
    path = unique("rise")
    lock = holder.lock(path)
    lease = lock.acquire(timeout=5)
    heard: queue.Queue[tuple[Any, int]] = queue.Queue()
    lease.add_waiting_callback(lambda lease_, waiting: heard.put((lease_, waiting)))
    leaving = zklocks.Client(zk_server.hosts).start()
    first = _queue_in_thread(leaving.lock(path), timeout=30)
    assert heard.get(timeout=WAIT) == (lease, 1)
    second = _queue_in_thread(waiter.lock(path), timeout=30)
    assert heard.get(timeout=WAIT) == (lease, 2)
    # The first leaves with its session (not by a timeout, which a loaded machine could
    # run out before the second queued): the count falls to 1, which is no news. The
    # holder must have read the fall before the third queues, or a fall and a rise
    # between two of its reads are no change at all.
    leaving.stop()
    first.join(WAIT)
    deadline = time.monotonic() + WAIT
    while lease._waiting._last != 1:  # the holder's last count (no event says it)
        assert time.monotonic() < deadline, "the holder never read the fall to 1"
        time.sleep(0.01)
    third = _queue_in_thread(waiter.lock(path), timeout=30)
    assert heard.get(timeout=WAIT) == (lease, 2)  # it rose again
    lock.release()
    second.join(WAIT)
    third.join(WAIT)
    assert heard.empty()


def test_sync_registration_with_someone_already_waiting_calls_once(
    clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    holder, waiter = clients
    path = unique("already")
    lock = holder.lock(path)
    lease = lock.acquire(timeout=5)
    thread = _queue_in_thread(waiter.lock(path), timeout=30)
    deadline = time.monotonic() + WAIT
    while len(lock.contenders()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    heard: queue.Queue[int] = queue.Queue()
    lease.add_waiting_callback(lambda _lease, waiting: heard.put(waiting))
    assert heard.get(timeout=WAIT) == 1
    later: queue.Queue[int] = queue.Queue()
    lease.add_waiting_callback(lambda _lease, waiting: later.put(waiting))
    assert later.get(timeout=WAIT) == 1  # the count is known now: at once
    lock.release()
    thread.join(WAIT)
    assert heard.empty() and later.empty()


def test_sync_readers_holding_beside_do_not_count(
    clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    holder, waiter = clients
    path = unique("readers")
    read = holder.read_write_lock(path).read
    lease = read.acquire(timeout=5)
    heard: queue.Queue[int] = queue.Queue()
    lease.add_waiting_callback(lambda _lease, waiting: heard.put(waiting))
    beside = waiter.read_write_lock(path).read
    beside.acquire(timeout=5)  # a second reader holds beside us: not waiting
    writer = _queue_in_thread(waiter.read_write_lock(path).write, timeout=30)
    assert heard.get(timeout=WAIT) == 1  # the writer only
    beside.release()
    read.release()
    writer.join(WAIT)
    assert heard.empty()


class _Listings(TappedSession):
    """A session that notes each listing its client sends with a watch."""

    watched_listings: list[str]

    def call(
        self, requests: Sequence[Any], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Any]:
        if watcher is not None:
            self.watched_listings.extend(r.path for r in requests if isinstance(r, GetChildren))
        return super().call(requests, deadline, watcher)


def test_sync_without_a_callback_the_holder_lists_nothing(zk_server: ZooKeeperServer) -> None:
    """Zero cost unless asked: someone queues behind a holder with no waiting callback,
    and the holder sends no watched listing; once a callback is added, it does."""
    listings: list[str] = []
    _Listings.watched_listings = listings
    factory = tapped_factory(native_sessions(), SessionTap(), _Listings)
    with (
        zklocks.Client(zk_server.hosts, session_factory=factory) as holder,
        zklocks.Client(zk_server.hosts) as waiter,
    ):
        path = unique("cost")
        lock = holder.lock(path)
        lease = lock.acquire(timeout=5)
        thread = _queue_in_thread(waiter.lock(path), timeout=30)
        deadline = time.monotonic() + WAIT
        while len(waiter.lock(path).contenders()) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert listings == []
        heard: queue.Queue[int] = queue.Queue()
        lease.add_waiting_callback(lambda _lease, waiting: heard.put(waiting))
        assert heard.get(timeout=WAIT) == 1
        assert listings == [path]
        lock.release()
        thread.join(WAIT)


def test_async_the_holder_hears_who_queues(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        async with (
            zklocks.AsyncClient(zk_server.hosts) as holder,
            zklocks.AsyncClient(zk_server.hosts) as waiter,
        ):
            path = unique("async")
            lock = holder.lock(path)
            lease = await lock.acquire(timeout=5)
            heard: asyncio.Queue[int] = asyncio.Queue()
            lease.add_waiting_callback(lambda _lease, waiting: heard.put_nowait(waiting))
            waiting = asyncio.ensure_future(waiter.lock(path).acquire(timeout=30))
            assert await asyncio.wait_for(heard.get(), WAIT) == 1
            await lock.release()
            successor = await waiting
            await successor.release()
            assert heard.empty()

    run_scenario(scenario)
