"""``zklocks.metrics``: scraped through prometheus_client's text exposition after real
acquisitions, timeouts, a cancellation and a lease loss on a real ZooKeeper."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import zklocks
import zklocks.metrics
from helpers import expire_session, run
from zklocks.server import ZooKeeperServer


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    registry = CollectorRegistry()
    zklocks.metrics.enable(registry)
    try:
        yield registry
    finally:
        zklocks.metrics.disable()


Scrape = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: CollectorRegistry) -> Scrape:
    """Every sample of the text exposition, by name and labels."""
    text = generate_latest(registry).decode()
    samples: Scrape = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Scrape, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_until(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def unique(name: str) -> str:
    return f"/metrics/{name}-{time.monotonic_ns()}"


def test_metrics_after_acquisitions_timeouts_and_a_loss(
    zk_server: ZooKeeperServer, registry: CollectorRegistry
) -> None:
    path = unique("lock")
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as other:
        lock = holder.lock(path)
        for _ in range(3):
            with lock:
                assert value(scrape(registry), "zklocks_held", kind="lock") == 1
        lease = lock.acquire()
        # a waiter that times out, seen in the waiting gauge meanwhile
        done = threading.Event()
        errors: list[BaseException] = []

        def wait_in_line() -> None:
            try:
                other.lock(path).acquire(timeout=2.0)
            except zklocks.LockTimeout as error:
                errors.append(error)
            done.set()

        threading.Thread(target=wait_in_line).start()
        wait_until(lambda: value(scrape(registry), "zklocks_waiting", kind="lock") == 1)
        assert done.wait(30) and errors
        assert other.lock(path).try_acquire() is None  # a miss counts as a timeout
        with holder.read_write_lock(path + "-rw").read:
            pass
        with holder.semaphore(path + "-sem", permits=2):
            pass
        # a loss: the session expires while the lock is held
        expire_session(holder, zk_server.hosts)
        assert lease.wait_lost(30)
        wait_until(lambda: holder.connected)
        lock.release()
    s = scrape(registry)
    count = "zklocks_acquire_seconds_count"
    assert value(s, count, kind="lock", result="acquired") == 4
    assert value(s, count, kind="lock", result="timeout") == 2
    assert value(s, count, kind="read", result="acquired") == 1
    assert value(s, count, kind="lease", result="acquired") == 1
    assert value(s, "zklocks_acquire_seconds_sum", kind="lock", result="timeout") >= 2.0
    assert value(s, "zklocks_hold_seconds_count", kind="lock") == 4
    assert value(s, "zklocks_held", kind="lock") == 0  # released three times, lost once
    assert value(s, "zklocks_waiting", kind="lock") == 0
    assert value(s, "zklocks_leases_lost_total", reason="session_expired") == 1
    assert value(s, "zklocks_requests_total", op="create") >= 6
    assert value(s, "zklocks_requests_total", op="get_children") >= 6
    # a release is one multi (delete + the lock-delay's mark), and so is a timeout's cleanup
    deletes = value(s, "zklocks_requests_total", op="delete")
    assert deletes + value(s, "zklocks_requests_total", op="multi") >= 5
    assert value(s, "zklocks_reconnects_total") >= 1  # the expired session was replaced
    state = "zklocks_connection_state"
    assert value(s, state, zklocks_connection_state="closed") == 1
    assert value(s, state, zklocks_connection_state="connected") == 0
    assert not any(("path", path) in labels for _, labels in s)  # no path label by default


def test_cancelled_acquire_and_connection_state(
    zk_server: ZooKeeperServer, registry: CollectorRegistry
) -> None:
    path = unique("cancel")

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            assert (
                value(
                    scrape(registry),
                    "zklocks_connection_state",
                    zklocks_connection_state="connected",
                )
                == 1
            )
            async with client.lock(path):
                waiter = asyncio.create_task(client.lock(path).acquire())
                while value(scrape(registry), "zklocks_waiting", kind="lock") != 1:
                    await asyncio.sleep(0.01)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter

    run(scenario())
    s = scrape(registry)
    count = "zklocks_acquire_seconds_count"
    assert value(s, count, kind="lock", result="cancelled") == 1
    assert value(s, count, kind="lock", result="acquired") == 1
    assert value(s, "zklocks_waiting", kind="lock") == 0


def test_path_label_only_when_asked(zk_server: ZooKeeperServer) -> None:
    registry = CollectorRegistry()
    zklocks.metrics.enable(registry, path_label=True)
    try:
        path = unique("labelled")
        with zklocks.Client(zk_server.hosts) as client, client.lock(path):
            pass
        s = scrape(registry)
        assert (
            value(s, "zklocks_acquire_seconds_count", kind="lock", result="acquired", path=path)
            == 1
        )
        assert value(s, "zklocks_hold_seconds_count", kind="lock", path=path) == 1
    finally:
        zklocks.metrics.disable()


def test_enable_twice_with_one_registry_is_harmless(registry: CollectorRegistry) -> None:
    zklocks.metrics.enable(registry)  # would raise "Duplicated timeseries" if registered again
    assert "zklocks_held" in generate_latest(registry).decode()


def test_prometheus_client_is_not_imported_until_enabled() -> None:
    code = (
        "import sys, zklocks, zklocks.metrics\n"
        "assert 'prometheus_client' not in sys.modules\n"
        "from zklocks._core import events as _events\n"
        "assert _events.sink is None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_connection_state_before_any_client_is_not_connected() -> None:
    code = (
        "import prometheus_client, zklocks.metrics\n"
        "registry = prometheus_client.CollectorRegistry()\n"
        "zklocks.metrics.enable(registry)\n"
        "print(prometheus_client.generate_latest(registry).decode())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=60, capture_output=True, text=True
    )
    assert 'zklocks_connection_state{zklocks_connection_state="closed"} 1.0' in done.stdout
    assert 'zklocks_connection_state{zklocks_connection_state="connected"} 0.0' in done.stdout
