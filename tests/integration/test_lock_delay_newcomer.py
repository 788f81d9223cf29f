"""Lock-delay's newcomer half and the marked give-up (issue 35), on a real ZooKeeper.

A newcomer (its first listing comes after the holder was lost, with nobody queued) waits
``lock_delay`` from that first listing, after an expiry, a break or a ``max_hold``
take-back; after a clean release, or after a loss that a later holder took over, it is
granted at once. A waiter that gives up leaves marked, so a newcomer behind it keeps the
delay it counted and does not start a new one. The formula the flows read from the lock
directory's stat is pinned on the server itself (ZooKeeper 3.8 here, 3.9 in
``make test-trixie``).

The test's clock is ``time.monotonic()``: a newcomer starts after the loss is complete
(the node gone, seen by kazoo), so its first listing comes after ``started``, and a grant
before ``started + DELAY`` would break the rule.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from test_lock_delay import DELAY_KINDS, _giving_up, _requests, _wait_queued, make, unique

import zklocks
import zklocks.metrics
from helpers import expire_session, run_scenario
from zklocks._core.lock_delay import unaccounted, unmarked
from zklocks._protocol.records import Stat
from zklocks.server import ZooKeeperServer

DELAY = 1.0
SOON = 0.5  # a grant with nothing to wait for takes milliseconds on a local server


def _stat(kazoo: Any, path: str) -> Stat:
    """The lock directory's stat, as the flows read it (kazoo's ``ZnodeStat`` names)."""
    found = kazoo.exists(path)
    return Stat(
        czxid=found.czxid,
        version=found.version,
        cversion=found.cversion,
        num_children=found.numChildren,
        data_length=found.dataLength,
    )


def _gone(kazoo: Any, path: str) -> None:
    """Wait until the lock directory has no child left (the loss is complete)."""
    deadline = time.monotonic() + 20
    while kazoo.exists(path) is not None and kazoo.get_children(path):
        assert time.monotonic() < deadline, "the lost holder's node never went"
        time.sleep(0.01)


def _lose(
    cause: str, zk_server: ZooKeeperServer, holder: zklocks.Client, kazoo: Any, kind: str = "fair"
) -> str:
    """A holder of a fresh lock (of the kind that excludes ``kind``) is lost by
    ``cause``; nobody queued. Its path."""
    path = unique(f"newcomer-{cause}-{kind}")
    max_hold = 0.3 if cause == "max_hold" else None
    lease = make(holder, kind, path, holder=True, max_hold=max_hold).acquire(timeout=5)
    if cause == "expiry":
        expire_session(holder, zk_server.hosts)
    elif cause == "break":
        kazoo.delete(lease.node)  # what `zklocks break` sends: a plain delete
    _gone(kazoo, path)
    return path


def test_the_unmarked_count_is_the_servers_own(zk_server: ZooKeeperServer, kazoo: Any) -> None:
    """``(cversion - numChildren) / 2 - version`` counts the deletions that left no mark:
    here a release (marked), a waiter's give-up (marked), a break and an expiry (not)."""
    path = unique("formula")
    with zklocks.Client(zk_server.hosts) as one, zklocks.Client(zk_server.hosts) as other:
        lock = one.lock(path)
        lock.acquire(timeout=5)
        with pytest.raises(zklocks.LockTimeout):
            other.lock(path).acquire(timeout=0.2)  # gives up: marked
        lock.release()  # marked
        broken = other.lock(path).acquire(timeout=5)
        kazoo.delete(broken.node)  # unmarked
        lock.acquire(timeout=5)
        expire_session(one, zk_server.hosts)  # unmarked
        _gone(kazoo, path)
    stat = _stat(kazoo, path)
    assert (stat.cversion, stat.num_children, stat.version) == (8, 0, 2), stat
    assert unmarked(stat) == 2 and unaccounted(stat) == 2
    # a holder after those losses releases: it writes that it took both over
    with zklocks.Client(zk_server.hosts) as later:
        later.lock(path).acquire(timeout=5).release()
    assert kazoo.get(path)[0] == b"02"
    stat = _stat(kazoo, path)
    assert unmarked(stat) == 2 and unaccounted(stat) == 0 and stat.version == 3


@pytest.mark.parametrize("kind", DELAY_KINDS)
@pytest.mark.parametrize("cause", ["expiry", "break", "max_hold"])
def test_sync_newcomer_waits_out_the_delay_from_its_first_listing(
    cause: str, kind: str, zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as newcomer:
        path = _lose(cause, zk_server, holder, kazoo, kind)
        started = time.monotonic()
        lease = make(newcomer, kind, path, holder=False, lock_delay=DELAY).acquire(timeout=20)
        granted = time.monotonic()
        assert started + DELAY <= granted <= started + DELAY + 3.0, granted - started
        assert not lease.lost


@pytest.mark.parametrize("cause", ["expiry", "break"])
def test_async_newcomer_waits_out_the_delay_from_its_first_listing(
    cause: str, zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    with zklocks.Client(zk_server.hosts) as holder:
        path = _lose(cause, zk_server, holder, kazoo)

        async def scenario() -> None:
            async with zklocks.AsyncClient(zk_server.hosts) as newcomer:
                started = time.monotonic()
                lease = await newcomer.lock(path, lock_delay=DELAY).acquire(timeout=20)
                granted = time.monotonic()
                assert started + DELAY <= granted <= started + DELAY + 3.0, granted - started
                await lease.release()

        run_scenario(scenario)


def test_newcomer_after_a_clean_release_or_a_loss_taken_over_is_granted_at_once(
    zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    with (
        zklocks.Client(zk_server.hosts) as holder,
        zklocks.Client(zk_server.hosts) as later,
        zklocks.Client(zk_server.hosts) as newcomer,
    ):
        clean = unique("newcomer-clean")
        holder.lock(clean).acquire(timeout=5).release()
        started = time.monotonic()
        newcomer.lock(clean, lock_delay=DELAY).acquire(timeout=20).release()
        assert time.monotonic() - started < SOON
        taken_over = _lose("break", zk_server, holder, kazoo)
        later.lock(taken_over).acquire(timeout=5).release()  # held after the loss
        started = time.monotonic()
        newcomer.lock(taken_over, lock_delay=DELAY).acquire(timeout=20).release()
        assert time.monotonic() - started < SOON


def test_a_waiter_giving_up_ahead_of_a_newcomer_does_not_restart_its_delay(
    zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    """Issue 35's starvation: A (timeout shorter than the delay) waits behind H; H's
    session expires; B arrives behind A and counts the loss from its first listing; A
    gives up. A's departure is marked, so B is granted a delay after its first listing,
    not a delay after A left (before the fix: A's plain delete was a new loss to B)."""
    long = 3.0
    with (
        zklocks.Client(zk_server.hosts) as holder,
        zklocks.Client(zk_server.hosts) as first,
        zklocks.Client(zk_server.hosts) as second,
    ):
        path = unique("starvation")
        holder.lock(path).acquire(timeout=5)
        giving_up, gave_up = _giving_up(first.lock(path, lock_delay=long), 2.0)
        _wait_queued(second, path, 2)
        expire_session(holder, zk_server.hosts)
        deadline = time.monotonic() + 10
        while len(kazoo.get_children(path)) != 1:  # only the first waiter is left
            assert time.monotonic() < deadline, "the holder's node never went"
            time.sleep(0.01)
        started = time.monotonic()
        lease = second.lock(path, lock_delay=long).acquire(timeout=20)
        granted = time.monotonic()
        giving_up.join(20)
        assert not lease.lost
    assert gave_up and started < gave_up[0] < started + long, gave_up[0] - started
    assert started + long <= granted < gave_up[0] + long - 0.5, (
        granted - started,
        gave_up[0] - started,
    )


def test_a_waiter_that_times_out_leaves_with_one_multi_and_the_same_request_count(
    zk_server: ZooKeeperServer,
) -> None:
    """Its way out is the marked departure: the same five requests as before the marked
    give-up (measured then: one ``delete`` where the ``multi`` is now)."""
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as waiter:
        path = unique("give-up-census")
        holder.lock(path).acquire(timeout=5)
        registry = CollectorRegistry()
        zklocks.metrics.enable(registry)
        try:
            with pytest.raises(zklocks.LockTimeout):
                waiter.lock(path).acquire(timeout=0.3)
            counts = _requests(registry)
        finally:
            zklocks.metrics.disable()
    assert counts == {"create": 1, "get_children": 1, "get_data": 2, "multi": 1}, counts


def test_the_async_newcomer_census_is_three_requests_without_a_loss(
    zk_server: ZooKeeperServer,
) -> None:
    """The newcomer rule reads nothing more: the stat comes with the listing."""

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lock = client.lock(unique("census"), lock_delay=DELAY)
            await (await lock.acquire(timeout=5)).release()  # the lock path exists now
            registry = CollectorRegistry()
            zklocks.metrics.enable(registry)
            try:
                await (await lock.acquire(timeout=5)).release()
                counts = _requests(registry)
            finally:
                zklocks.metrics.disable()
            assert sum(counts.values()) == 3 and counts.get("multi") == 1, counts

    run_scenario(scenario)
