"""A lock cycle leaves nothing for the garbage collector.

Every object a cycle makes must be freed by its last reference going away. A lease
that holds its front end's callbacks, which hold the lease, or a watcher that holds
itself through its own closure, leaves a reference cycle per lease; under load the
collector's passes over them cost the asyncio client about a fifth of its CPU.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import Iterator

import pytest

import zklocks
from zklocks.server import ZooKeeperServer

CYCLES = 30


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector stopped (what it finds is what the test counts), then restarted."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _path() -> str:
    return f"/test-garbage-{uuid.uuid4().hex[:8]}/lock"


@pytest.mark.parametrize("fair", [True, False])
def test_sync_cycles_leave_no_reference_cycles(
    zk_server: ZooKeeperServer, collector_off: None, fair: bool
) -> None:
    with zklocks.Client(zk_server.hosts) as client:
        lock = client.lock(_path(), fair=fair)
        for _ in range(3):  # first uses: the lock's directory, caches
            with lock:
                pass
        gc.collect()
        for _ in range(CYCLES):
            with lock:
                pass
        found = gc.collect()
    assert found == 0, f"{CYCLES} cycles left {found} objects in reference cycles"


def test_asyncio_cycles_leave_no_reference_cycles(
    zk_server: ZooKeeperServer, collector_off: None
) -> None:
    async def main() -> int:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lock = client.lock(_path())
            for _ in range(3):
                async with lock:
                    pass
            gc.collect()
            for _ in range(CYCLES):
                async with lock:
                    pass
            return gc.collect()

    found = asyncio.run(main())
    assert found == 0, f"{CYCLES} cycles left {found} objects in reference cycles"
