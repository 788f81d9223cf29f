"""Stopping a client leaves nothing behind: no thread, no task, no socket, no node."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading

import zklocks
from zklocks.server import ZooKeeperServer


def open_sockets() -> int:
    fds = os.listdir("/proc/self/fd")
    count = 0
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def test_sync_client_stop_leaks_nothing(zk_server: ZooKeeperServer) -> None:
    threads, sockets = set(threading.enumerate()), open_sockets()
    for _ in range(3):
        client = zklocks.Client(zk_server.hosts).start()
        lock = client.lock("/leaks/sync")
        lock.acquire()
        waiter = client.lock("/leaks/sync")
        errors: list[BaseException] = []

        def wait(lock: zklocks.Lock = waiter, errors: list[BaseException] = errors) -> None:
            try:
                lock.acquire()
            except zklocks.ClientClosed as exc:
                errors.append(exc)

        thread = threading.Thread(target=wait)
        thread.start()
        client.stop()  # with a holder and a waiter
        thread.join(10)
        assert len(errors) == 1
    assert set(threading.enumerate()) - threads == set()  # earlier tests' may end meanwhile
    assert open_sockets() <= sockets
    with zklocks.Client(zk_server.hosts) as observer:
        assert observer.lock("/leaks/sync").contenders() == []


def test_async_client_stop_leaks_nothing(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        tasks, sockets = asyncio.all_tasks(), open_sockets()
        client = await zklocks.AsyncClient(zk_server.hosts).start()
        lock = client.lock("/leaks/async")
        await lock.acquire()
        waiter = asyncio.create_task(client.lock("/leaks/async").acquire())
        await asyncio.sleep(0)
        await client.stop()
        try:
            await waiter
            raise AssertionError("the waiter should have been told the client stopped")
        except zklocks.ClientClosed:
            pass
        assert asyncio.all_tasks() == tasks
        assert open_sockets() <= sockets

    threads = set(threading.enumerate())
    asyncio.run(scenario())
    assert set(threading.enumerate()) - threads == set()


def test_stop_while_reconnecting_after_expiry_returns(zk_server: ZooKeeperServer) -> None:
    """stop() while the connection makes a new session (its old one just expired) must
    return: once it hung there (a cancel swallowed as a handshake completed)."""
    import time

    from helpers import expire_session

    for pause in (0.0, 0.001, 0.003, 0.01, 0.03):
        client = zklocks.Client(zk_server.hosts, session_timeout=2.0).start()
        expire_session(client, zk_server.hosts)  # the client finds out as it reconnects
        time.sleep(pause)  # a fault-injection offset, not synchronisation
        stopper = threading.Thread(target=client.stop)
        stopper.start()
        stopper.join(15)
        assert not stopper.is_alive(), f"stop() hung (offset {pause} s)"
