"""``max_hold=``: a lease held too long is lost, its node deleted, the next waiter granted.

Every test runs on a real ZooKeeper, the holder and the waiter on separate sessions, for
each lock kind that takes the option (fair, one-node "unfair", read/write, semaphore), with the
sync ``Client`` and with ``AsyncClient``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from nemesis.proxy import Proxy
from prometheus_client import CollectorRegistry, generate_latest

import zklocks
import zklocks.metrics
from helpers import KINDS, blocker_kind, run_scenario
from zklocks.server import ZooKeeperServer

BOUND = 0.6  # seconds: long enough to be past the grant, short enough for a test
SLACK = 0.3  # the bound: lost within this much of max_hold
MAX_HOLD_KINDS = ["fair", "unfair", "read", "semaphore"]  # "read": a writer holds, a reader waits


def unique(name: str) -> str:
    return f"/max-hold/{name}-{time.monotonic_ns()}"


def make(client: Any, kind: str, path: str, *, holder: bool, max_hold: float | None) -> Any:
    """The holder's lock (the side that excludes ``kind``: a writer for readers) or the
    waiter's."""
    return KINDS[blocker_kind(kind) if holder else kind](client, path, max_hold=max_hold)


@pytest.fixture
def two_clients(zk_server: ZooKeeperServer) -> Iterator[tuple[zklocks.Client, zklocks.Client]]:
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as waiter:
        yield holder, waiter


@pytest.mark.parametrize("kind", MAX_HOLD_KINDS)
def test_sync_max_hold_loses_the_lease_and_the_waiter_is_granted(
    kind: str, two_clients: tuple[zklocks.Client, zklocks.Client]
) -> None:
    holder, waiter = two_clients
    path = unique(kind)
    lock = make(holder, kind, path, holder=True, max_hold=BOUND)
    before = time.monotonic()
    lease = lock.acquire(timeout=5)
    granted_at = time.monotonic()
    told_at: list[float] = []
    lease.add_lost_callback(lambda _lease: told_at.append(time.monotonic()))

    successor = make(waiter, kind, path, holder=False, max_hold=None).acquire(timeout=10)
    next_at = time.monotonic()

    assert lease.wait_lost(timeout=5)
    assert told_at, "the lost callback never ran"
    assert before + BOUND - 0.005 <= told_at[0] <= granted_at + BOUND + SLACK
    assert lease.lost_reason is not None and "max_hold" in lease.lost_reason
    assert next_at >= told_at[0] and successor.token > lease.token
    # the holder's own release finds its node gone and leaves the successor's alone
    # (the one-node lock's successor has the very same node name)
    lock.release()
    assert not successor.lost
    assert [c.node for c in waiter.lock(path).contenders()] == [successor.node]


@pytest.mark.parametrize("kind", MAX_HOLD_KINDS)
def test_async_max_hold_loses_the_lease_and_the_waiter_is_granted(
    kind: str, zk_server: ZooKeeperServer
) -> None:
    async def scenario() -> None:
        async with (
            zklocks.AsyncClient(zk_server.hosts) as holder,
            zklocks.AsyncClient(zk_server.hosts) as waiter,
        ):
            path = unique(f"async-{kind}")
            lock = make(holder, kind, path, holder=True, max_hold=BOUND)
            before = time.monotonic()
            lease = await lock.acquire(timeout=5)
            granted_at = time.monotonic()
            told_at: list[float] = []
            lease.add_lost_callback(lambda _lease: told_at.append(time.monotonic()))

            waiting = make(waiter, kind, path, holder=False, max_hold=None)
            successor = await waiting.acquire(timeout=10)
            next_at = time.monotonic()

            assert await lease.wait_lost(timeout=5)
            assert told_at, "the lost callback never ran"
            assert before + BOUND - 0.005 <= told_at[0] <= granted_at + BOUND + SLACK
            assert lease.lost_reason is not None and "max_hold" in lease.lost_reason
            assert next_at >= told_at[0] and successor.token > lease.token
            await lock.release()
            assert not successor.lost
            contenders = await waiter.lock(path).contenders()
            assert [c.node for c in contenders] == [successor.node]

    run_scenario(scenario)


def test_a_released_lease_never_takes_back_the_next_holders_node(
    two_clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    """The one-node lock reuses its node name: a bound that outlived its lease would
    delete the next holder's node. Released early, the bound must do nothing."""
    first, second = two_clients
    path = unique("released")
    lease = first.lock(path, fair=False, max_hold=0.3).acquire(timeout=5)
    lease.release()
    successor = second.lock(path, fair=False).acquire(timeout=5)
    assert successor.node == lease.node  # the same name, a later holder
    assert not successor.wait_lost(timeout=0.3 + 0.5)  # well past the first bound
    assert not lease.lost and lease.ended
    assert [c.token for c in second.lock(path).contenders()] == [successor.token]
    successor.release()


def test_each_acquire_gets_its_own_bound(
    two_clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    """A lock object re-acquired: the second lease is timed from its own grant."""
    client, _ = two_clients
    lock = client.lock(unique("again"), max_hold=0.5)
    lock.acquire(timeout=5).release()
    time.sleep(0.3)  # most of the first bound passes with nothing held
    second = lock.acquire(timeout=5)
    granted_at = time.monotonic()
    assert second.wait_lost(timeout=5)
    assert time.monotonic() - granted_at >= 0.5 - 0.005


def test_max_hold_is_lost_on_our_clock_while_cut_off(zk_server: ZooKeeperServer) -> None:
    """Disconnected, the node cannot be deleted: the lease is lost at the bound anyway."""

    async def scenario() -> None:
        async with (
            Proxy("127.0.0.1", zk_server.port) as proxy,
            zklocks.AsyncClient(proxy.hosts, session_timeout=20.0) as holder,
        ):
            before = time.monotonic()
            lease = await holder.lock(unique("cut-off"), max_hold=BOUND).acquire(timeout=5)
            proxy.stall()  # nothing gets through; the session outlives the test
            try:
                assert await lease.wait_lost(timeout=5)
                lost_at = time.monotonic()
                assert lost_at - before <= BOUND + SLACK
                assert lease.lost_reason is not None and "max_hold" in lease.lost_reason
            finally:
                proxy.unstall()

    run_scenario(scenario)


def test_a_paused_holder_sees_the_bound_at_its_first_look(
    two_clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    """``lost`` applies the bound itself: no need for the timer to have run first."""
    client, _ = two_clients
    lease = client.lock(unique("look"), max_hold=0.3).acquire(timeout=5)
    lease._hold_deadline = time.monotonic() - 1  # as if the process had slept past it
    assert lease.lost and "max_hold" in str(lease.lost_reason)


def test_metrics_and_logs_name_max_hold(
    two_clients: tuple[zklocks.Client, zklocks.Client], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = two_clients
    registry = CollectorRegistry()
    zklocks.metrics.enable(registry)
    try:
        with caplog.at_level(logging.WARNING, logger="zklocks"):
            lease = client.lock(unique("metrics"), max_hold=0.3).acquire(timeout=5)
            assert lease.wait_lost(timeout=5)
        text = generate_latest(registry).decode()
    finally:
        zklocks.metrics.disable()
    assert 'zklocks_leases_lost_total{reason="max_hold"} 1.0' in text
    assert any("max_hold" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("bad", [-1, 0, 0.0, float("nan"), float("inf"), True, "5"])
def test_bad_max_hold_is_refused_before_any_request(bad: object) -> None:
    client = zklocks.Client("127.0.0.1:1")  # never started: nothing is sent
    for factory in (
        lambda: client.lock("/x", max_hold=bad),
        lambda: client.read_write_lock("/x", max_hold=bad),
        lambda: client.semaphore("/x", permits=2, max_hold=bad),
    ):
        with pytest.raises(zklocks.InvalidArgument, match="max_hold"):
            factory()
