"""``LockTimeout`` names the holder it waited for, as ``zklocks run`` does: identifier,
pid, host and token, from the data its watch read (no request more), sync and async."""

from __future__ import annotations

import os
import pickle
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import zklocks
from helpers import run
from zklocks.server import ZooKeeperServer


@pytest.fixture
def path() -> str:
    return f"/timeout-holder/{time.monotonic_ns()}"


@pytest.fixture
def holder(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts) as made:
        yield made


def test_a_timeout_second_in_line_names_the_holder(
    zk_server: ZooKeeperServer, holder: zklocks.Client, path: str
) -> None:
    lease = holder.lock(path, identifier="nightly-rollup").acquire()
    with zklocks.Client(zk_server.hosts) as waiter, pytest.raises(zklocks.LockTimeout) as raised:
        waiter.lock(path).acquire(timeout=0.3)
    error = raised.value
    assert error.path == path
    assert isinstance(error.holder, zklocks.Contender)
    assert error.holder.holder
    assert (error.holder.identifier, error.holder.pid) == ("nightly-rollup", os.getpid())
    assert (error.holder.host, error.holder.token) == (socket.gethostname(), lease.token)
    expected = (
        f"timed out waiting for lock {path}; held by nightly-rollup "
        f"(pid {os.getpid()} on {socket.gethostname()}, token {lease.token})"
    )
    assert str(error) == expected
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.path, again.holder) == (expected, path, error.holder)
    lease.release()


def test_a_reader_behind_a_writer_names_the_writer(
    zk_server: ZooKeeperServer, holder: zklocks.Client, path: str
) -> None:
    lease = holder.read_write_lock(path, identifier="migration").write.acquire()
    with zklocks.Client(zk_server.hosts) as waiter, pytest.raises(zklocks.LockTimeout) as raised:
        waiter.read_write_lock(path).read.acquire(timeout=0.3)
    assert raised.value.holder is not None
    assert (raised.value.holder.identifier, raised.value.holder.kind) == ("migration", "write")
    lease.release()


def test_third_in_line_the_holder_is_not_known_and_not_guessed(
    zk_server: ZooKeeperServer, holder: zklocks.Client, path: str
) -> None:
    lease = holder.lock(path, identifier="first").acquire()
    with zklocks.Client(zk_server.hosts) as second, zklocks.Client(zk_server.hosts) as third:
        lock = second.lock(path, identifier="second")
        waiting = threading.Thread(target=lambda: lock.acquire(timeout=10).release())
        waiting.start()
        try:
            watcher = third.lock(path)
            deadline = time.monotonic() + 10
            while len(watcher.contenders()) < 2:  # the second is in line
                assert time.monotonic() < deadline
                watcher.wait_for_change(timeout=1)
            with pytest.raises(zklocks.LockTimeout) as raised:
                watcher.acquire(timeout=0.3)  # waits on the second, a waiter
        finally:
            lease.release()
            waiting.join(10)
    assert raised.value.holder is None
    assert str(raised.value) == f"timed out waiting for lock {path}"
    assert raised.value.path == path


def test_the_async_client_names_the_holder_too(
    zk_server: ZooKeeperServer, holder: zklocks.Client, path: str
) -> None:
    lease = holder.semaphore(path, permits=1, identifier="api-caller").acquire()

    async def main() -> zklocks.LockTimeout:
        async with zklocks.AsyncClient(zk_server.hosts) as waiter:
            with pytest.raises(zklocks.LockTimeout) as raised:
                await waiter.semaphore(path, permits=1).acquire(timeout=0.3)
            return raised.value

    error = run(main())
    assert error.holder is not None and error.holder.identifier == "api-caller"
    assert error.holder.token == lease.token
    assert "held by api-caller (pid" in str(error)
    lease.release()
