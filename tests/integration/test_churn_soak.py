"""Churn soak: a long-running process that takes and releases locks stays the same size.

Every acquire makes a node with a name never seen before, so anything keyed by node name
(a cache, a watch table, a holdings map) grows for as long as the process lives unless
it is bounded. Three threads churn on one path:
two take turns (each waits behind the other), one keeps trying ``try_acquire``. After a warm-up,
memory (traced Python allocations), file descriptors and threads are measured, the churn
goes on, and they are measured again. At the end nothing of ours is left on the server.

The short run is part of every test run; the 60 s one runs with ``pytest -m soak``.
"""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from typing import Any

import pytest

import zklocks
from zklocks.server import ZooKeeperServer

#: Growth allowed after the warm-up, whatever the duration: bounded caches still filling,
#: allocator noise. A leak of a few hundred bytes per acquire exceeds it within a minute.
BUDGET = 1_000_000


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _churn(client: zklocks.Client, path: str, stop: threading.Event, counts: list[int]) -> None:
    lock = client.lock(path)
    while not stop.is_set():
        with lock:
            counts.append(1)


def _probe(client: zklocks.Client, path: str, stop: threading.Event, counts: list[int]) -> None:
    lock = client.lock(path)
    while not stop.is_set():
        if lock.try_acquire() is not None:  # mostly None: the others hold it
            lock.release()
        counts.append(1)


def _measure() -> tuple[int, int, int]:
    return tracemalloc.get_traced_memory()[0], _fds(), threading.active_count()


@pytest.mark.parametrize(
    "seconds",
    [pytest.param(4.0, id="short"), pytest.param(60.0, id="60s", marks=pytest.mark.soak)],
)
def test_churn_keeps_memory_fds_and_threads_flat(
    zk_server: ZooKeeperServer, kazoo: Any, seconds: float
) -> None:
    path = f"/soak/churn-{seconds:g}-{os.getpid()}"
    stop = threading.Event()
    counts: list[int] = []
    tracemalloc.start()
    try:
        client = zklocks.Client(zk_server.hosts).start()
        workers = [
            threading.Thread(target=target, args=(client, path, stop, counts), daemon=True)
            for target in (_churn, _churn, _probe)
        ]
        for worker in workers:
            worker.start()
        time.sleep(seconds / 3)  # warm-up: the churn runs meanwhile (nothing to await)
        warm_count = len(counts)
        before = _measure()
        time.sleep(seconds * 2 / 3)
        after = _measure()
        churned = len(counts) - warm_count
        stop.set()
        for worker in workers:
            worker.join(30)
        assert not any(worker.is_alive() for worker in workers)
        assert kazoo.get_children(path) == []  # every node deleted by its own release
        client.stop()
    finally:
        stop.set()
        tracemalloc.stop()
    grown = after[0] - before[0]
    print(f"{churned} acquires after warm-up ({warm_count} before): memory {grown:+} bytes")
    assert churned >= 20, "the churn hardly ran: nothing was measured"
    assert grown < BUDGET, f"memory grew {grown} bytes over {churned} acquires"
    assert after[1] <= before[1], "file descriptors"  # (fewer: an earlier test's, collected)
    assert after[2] <= before[2], "threads"
    assert not kazoo.exists(path) or kazoo.get_children(path) == []
