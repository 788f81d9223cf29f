"""``lock.hold()`` and ``exclusive(on_loss="cancel")`` on a real server (issue 35): a body
that runs past a stall-induced loss is stopped at the holder's loss instant, which comes
before the server expires the session and so before the next holder's grant.

The holder reaches the server through a proxy that the test stalls (its bytes are held,
not refused): the holder's clock rule says lost after its session timeout at most, the
server expires the session only a session timeout after it last heard from it, and the
waiter is granted after that.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from nemesis.links import Links

import zklocks
from zklocks import _exclusive
from zklocks.server import ZooKeeperServer

SESSION = 2.0  # the holder's session timeout, seconds


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[tuple[str, Links]]:
    links = Links()
    try:
        yield f"127.0.0.1:{links.add(zk_server.port, src=1)}", links
    finally:
        links.close()


def _busy(seconds: float) -> None:
    """Work in a frame of its own (docs/locks.md: CPython's loops in the block's frame)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


@pytest.fixture
def path() -> str:
    return f"/hold/{uuid.uuid4().hex[:8]}"


def _lock_of(client: Any, path: str, kind: str) -> Any:
    """The lock of ``kind`` at ``path`` (``read``: the read side; its rival, ``write``)."""
    if kind in ("read", "write"):
        rw = client.read_write_lock(path)
        return rw.read if kind == "read" else rw.write
    if kind == "semaphore":
        return client.semaphore(path, permits=1)
    if kind == "election":
        return client.election(path)
    return client.lock(path, fair=kind != "one-node")


@pytest.mark.parametrize("kind", ["lock", "one-node", "read", "write", "semaphore", "election"])
def test_a_stalled_holder_is_interrupted_before_the_next_grant(
    zk_server: ZooKeeperServer, proxied: tuple[str, Links], path: str, kind: str
) -> None:
    via, links = proxied
    outcome: dict[str, Any] = {}
    entered = threading.Event()
    with (
        zklocks.Client(via, session_timeout=SESSION) as holder,
        zklocks.Client(zk_server.hosts, session_timeout=10.0) as other,
    ):
        lock = _lock_of(holder, path, kind)
        rival = _lock_of(other, path, "write" if kind == "read" else kind)

        def hold() -> None:
            try:
                with lock.hold(timeout=10):
                    entered.set()
                    _busy(30.0)  # unfenceable work, in Python
                outcome["error"] = "the body ran to its end"
            except zklocks.LockLost as lost:
                outcome["stopped"] = time.monotonic()
                outcome["lost"] = lost
            except BaseException as error:
                outcome["error"] = error

        worker = threading.Thread(target=hold)
        worker.start()
        assert entered.wait(10)
        stalled = time.monotonic()
        links.isolate(1, "stall")
        rival.acquire(timeout=30)
        granted = time.monotonic()
        worker.join(30)
        links.heal()
        rival.release()
    assert "error" not in outcome, outcome
    assert outcome["stopped"] < granted, (
        f"stopped {outcome['stopped'] - stalled:.2f} s after the stall, the next holder "
        f"granted {granted - stalled:.2f} s after it"
    )
    assert outcome["stopped"] - stalled < SESSION + 0.5


@pytest.mark.parametrize("kind", ["lock", "read", "semaphore", "election"])
def test_async_a_stalled_holder_is_cancelled_before_the_next_grant(
    zk_server: ZooKeeperServer, proxied: tuple[str, Links], path: str, kind: str
) -> None:
    via, links = proxied

    async def scenario() -> tuple[float, float, float, list[str]]:
        cleaned: list[str] = []
        async with (
            zklocks.AsyncClient(via, session_timeout=SESSION) as holder,
            zklocks.AsyncClient(zk_server.hosts, session_timeout=10.0) as other,
        ):
            lock = _lock_of(holder, path, kind)
            rival = _lock_of(other, path, "write" if kind == "read" else kind)
            entered = asyncio.Event()
            stopped: list[float] = []

            async def hold() -> None:
                try:
                    async with lock.hold(timeout=10):
                        entered.set()
                        try:
                            await asyncio.sleep(30)
                        finally:
                            cleaned.append("finally")
                except zklocks.LockLost as lost:
                    assert isinstance(lost.__cause__, asyncio.CancelledError)
                    stopped.append(time.monotonic())

            task = asyncio.ensure_future(hold())
            await asyncio.wait_for(entered.wait(), 10)
            stalled = time.monotonic()
            await asyncio.get_running_loop().run_in_executor(None, links.isolate, 1, "stall")
            await rival.acquire(timeout=30)
            granted = time.monotonic()
            await asyncio.wait_for(task, 30)
            await asyncio.get_running_loop().run_in_executor(None, links.heal)
            await rival.release()
            assert stopped, "the block did not end with LockLost"
            return stalled, stopped[0], granted, cleaned

    stalled, stopped, granted, cleaned = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert stopped < granted, (
        f"stopped {stopped - stalled:.2f} s, granted {granted - stalled:.2f} s"
    )
    assert cleaned == ["finally"]


def test_a_clean_release_inside_the_block_interrupts_nothing(
    zk_server: ZooKeeperServer, path: str
) -> None:
    with zklocks.Client(zk_server.hosts) as client:
        with client.lock(path).hold(timeout=10) as lease:
            lease.release()
            for _ in range(200_000):  # after our own release: not interrupted
                pass
        assert lease.time_left() == 0.0


def test_exclusive_on_loss_cancel_stops_the_call_when_the_lock_is_broken(
    zk_server: ZooKeeperServer, kazoo: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``zklocks break`` (here: the node deleted by another client) while the function
    runs: ``on_loss="cancel"`` stops it at once; ``"notify"`` lets it finish, then raises."""
    monkeypatch.setenv("ZKLOCKS_HOSTS", zk_server.hosts)
    ran: list[str] = []

    def break_it(lock_path: str) -> None:
        for child in kazoo.get_children(lock_path):
            kazoo.delete(f"{lock_path}/{child}")

    @zklocks.exclusive(f"{path}/cancel", on_loss="cancel")
    def cancelled() -> None:
        threading.Timer(0.2, break_it, (f"{path}/cancel",)).start()
        _busy(20.0)
        ran.append("cancelled: ran to the end")

    @zklocks.exclusive(f"{path}/notify")
    def notified() -> None:
        break_it(f"{path}/notify")
        time.sleep(0.5)  # the loss is heard meanwhile
        ran.append("notified: ran to the end")

    try:
        began = time.monotonic()
        with pytest.raises(zklocks.LockLost, match="interrupted"):
            cancelled()
        assert time.monotonic() - began < 10
        with pytest.raises(zklocks.LockLost):
            notified()
    finally:
        _exclusive._clients.stop_all()
    assert ran == ["notified: ran to the end"]
    with pytest.raises(zklocks.InvalidArgument, match="on_loss"):
        zklocks.exclusive(path, on_loss="kill")  # type: ignore[arg-type]
