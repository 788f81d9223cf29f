"""zklocks with ``layout="curator"`` and the real Apache Curator 5.4 recipes on one path:
``InterProcessMutex``, ``InterProcessReadWriteLock`` and ``InterProcessSemaphoreV2``.

Every test runs Curator in a JVM worker (``interop/curator``) against the suite's
ZooKeeper; zklocks contenders run on threads of this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from interop.curator.harness import CuratorWorker
from peers_support import (
    WAIT,
    CuratorContender,
    ZkContender,
    add_one,
    enqueue,
    step_through,
    step_through_rw_timeline,
    wait_for_children,
)

import zklocks
from zklocks.server import ZooKeeperServer

Workers = Callable[..., CuratorWorker]


def test_a_shared_counter_stays_exact_under_curator_and_zklocks_mutexes(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    counter = f"{path}-counter"
    kazoo.create(counter, b"0", makepath=True)
    java = curator()
    java.mutex("m", path)
    rounds = 40
    errors: list[BaseException] = []

    def ours() -> None:
        lock = client.lock(path, layout="curator")
        try:
            for _ in range(rounds):
                with lock:
                    add_one(kazoo, counter)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ours) for _ in range(2)]
    for t in threads:
        t.start()
    java.count("m", counter, rounds)  # meanwhile, in the JVM
    for t in threads:
        t.join(WAIT * 4)
    assert not errors
    assert int(kazoo.get(counter)[0]) == 3 * rounds
    assert kazoo.get_children(path) == []  # nothing left behind by anyone


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_holder_of_either_client_blocks_a_waiter_of_the_other(
    zk_server: ZooKeeperServer, kazoo: Any, curator: Workers, path: str, asynchronous: bool
) -> None:
    java = curator()
    java.mutex("m", path)

    def ours(timeout: float) -> Any:
        if not asynchronous:
            with zklocks.Client(zk_server.hosts) as c:
                lock = c.lock(path, layout="curator")
                return lock, lock.acquire(timeout=timeout)

        async def take() -> Any:
            async with zklocks.AsyncClient(zk_server.hosts) as c:
                lock = c.lock(path, layout="curator")
                lease = await lock.acquire(timeout=timeout)
                await lock.release()
                return lease

        import asyncio

        return None, asyncio.run(take())

    with zklocks.Client(zk_server.hosts) as c:
        lock = c.lock(path, layout="curator")
        lease = lock.acquire(timeout=WAIT)
        assert lease.node.rsplit("/", 1)[1].startswith("_c_")
        assert not java.acquire("m", timeout=0.5)  # zklocks holds: Curator waits
        assert kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]  # it cleaned up
        java.begin("m")
        wait_for_children(kazoo, path, 2)
        lock.release()
        assert java.held("m", WAIT)  # handed over
    # Curator holds: zklocks waits, times out, leaves nothing
    with pytest.raises(zklocks.LockTimeout):
        ours(0.5)
    assert len(kazoo.get_children(path)) == 1
    java.end("m")
    _, granted = ours(WAIT)
    assert granted.token > lease.token  # fencing tokens keep growing across clients
    assert kazoo.get_children(path) == []


def test_fifo_hand_off_through_a_queue_alternating_curator_and_zklocks(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    java = curator()
    line: list[Any] = []
    for i in range(3):
        java.mutex(f"c{i}", path)
        line.append(CuratorContender(java, f"c{i}"))
        line.append(ZkContender(client.lock(path, layout="curator"), f"z{i}"))
    enqueue(kazoo, path, line)
    step_through([([c], line[i + 1 :]) for i, c in enumerate(line)])
    assert kazoo.get_children(path) == []


def test_read_write_timeline_with_kinds_alternating_between_clients(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    """R1 R2 R3 W4 W5 R6 W7: odd places zklocks, even places Curator."""
    java = curator()
    line: list[Any] = []
    for place, kind in enumerate("RRRWWRW", start=1):
        side = "read" if kind == "R" else "write"
        if place % 2:
            rw = client.read_write_lock(path, layout="curator")
            line.append(ZkContender(getattr(rw, side), f"{kind}{place}"))
        else:
            java.read_write_lock(f"rw{place}", path)
            line.append(CuratorContender(java, f"rw{place}.{side}"))
    enqueue(kazoo, path, line)
    step_through_rw_timeline(line)
    assert kazoo.get_children(path) == []


def test_semaphore_v2_bound_holds_with_mixed_contenders(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    java = curator()
    line: list[Any] = []
    for i in range(3):
        java.semaphore(f"s{i}", path, 2)
        line.append(CuratorContender(java, f"s{i}"))
        line.append(ZkContender(client.semaphore(path, permits=2, layout="curator"), f"z{i}"))
    c0, z0, c1, z1, c2, z2 = line
    # the first two take both permits at once
    for c in (c0, z0):
        c.start()
    assert c0.holds(WAIT) and z0.holds(WAIT)
    # the others queue in the inner mutex (the first of them also has a lease node)
    for n, c in enumerate((c1, z1, c2, z2), start=1):
        c.start()
        wait_for_children(kazoo, f"{path}/locks", n)
    leases = kazoo.get_children(f"{path}/leases")
    assert len(leases) == 3  # two holders and the one waiter that holds the mutex
    # one permit freed at a time: the next in line, never more than two holders
    step_through(
        [
            ([c0], [c1, z1, c2, z2]),
            ([z0], [z1, c2, z2]),
            ([c1], [c2, z2]),
            ([z1], [z2]),
            ([c2, z2], []),
        ]
    )
    assert kazoo.get_children(f"{path}/leases") == []
    assert kazoo.get_children(f"{path}/locks") == []


def test_semaphore_v2_fencing_token_is_the_lease_node(
    client: zklocks.Client, kazoo: Any, path: str
) -> None:
    lock = client.semaphore(path, permits=1, layout="curator")
    lease = lock.acquire(timeout=WAIT)
    parent, name = lease.node.rsplit("/", 1)
    assert parent == f"{path}/leases" and name.startswith("_c_") and "-lease-" in name
    assert lease.token == kazoo.exists(lease.node).czxid
    assert kazoo.get_children(f"{path}/locks") == []  # the inner mutex is let go once granted
    kazoo.delete(lease.node)  # someone takes our lease away: the lease is lost
    assert lease.wait_lost(WAIT)
    lock.release()


def _children_or_none(look: Any, path: str) -> list[str]:
    """The children of ``path``; none if the container reaper has deleted it."""
    from kazoo.exceptions import NoNodeError

    try:
        children: list[str] = look.get_children(path)
    except NoNodeError:
        return []
    return children


def test_a_zklocks_waiter_survives_curator_parents_being_reaped(
    curator_worker_classes: Any, kazoo: Any
) -> None:
    """Curator makes the lock path a container: the server deletes it once empty. A
    zklocks contender re-creates it, and leaves no node behind on any way out."""
    with ZooKeeperServer(
        tick_time=200,
        max_session_timeout=60_000,
        system_properties={"znode.container.checkIntervalMs": "100"},
    ) as server:
        from kazoo.client import KazooClient

        look = KazooClient(server.hosts)
        look.start(timeout=15)
        java = CuratorWorker()
        try:
            java.connect(server.hosts)
            path = "/reaped/deep/lock"
            java.mutex("m", path)
            assert java.acquire("m", WAIT)
            java.release("m")
            gone = threading.Event()
            if look.exists("/reaped", watch=lambda _e: gone.set()) is not None:
                assert gone.wait(WAIT)  # Curator's containers reaped, ancestors and all
            assert look.exists("/reaped") is None
            with zklocks.Client(server.hosts) as c:
                lock = c.lock(path, layout="curator")
                with lock:  # re-creates the parents (containers, as Curator does)
                    assert not java.acquire("m", 0.3)
                java.begin("m")
                assert java.held("m", WAIT)
                with pytest.raises(zklocks.LockTimeout):
                    lock.acquire(timeout=0.3)  # timed out: our node deleted
                assert len(look.get_children(path)) == 1
                assert lock.try_acquire() is None  # non-blocking miss: deleted too
                java.end("m")
                with lock:
                    pass
            # the reaper may already have taken the empty lock path: no node either way
            assert _children_or_none(look, path) == []
            gone.clear()
            if look.exists("/reaped", watch=lambda _e: gone.set()) is not None:
                assert gone.wait(WAIT)  # our parents are containers too
        finally:
            java.close()
            look.stop()
            look.close()


def test_status_shows_a_mixed_curator_queue(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    java = curator()
    java.mutex("m", path)
    assert java.acquire("m", WAIT)
    waiter = ZkContender(client.lock(path, layout="curator", identifier="py-waiter"), "z")
    waiter.start()
    wait_for_children(kazoo, path, 2)
    java.read_write_lock("rw", path)  # a Curator writer behind them (mixing is Curator's own)
    java.mutex("m2", path)
    java.begin("m2")
    wait_for_children(kazoo, path, 3)
    result = subprocess.run(
        [sys.executable, "-m", "zklocks", "status", path, "--json", "--hosts", zk_server.hosts],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    (holder,) = state["holders"]
    assert (holder["kind"], holder["layout"]) == ("lock", "curator")
    # A Curator node's data is its identifier: Curator writes the client's IP address,
    # or nothing where the machine's host name does not resolve (a minimal Debian).
    data, _ = kazoo.get(holder["node"])
    assert holder["identifier"] == data.decode()
    first, second = state["waiters"]
    assert (first["kind"], first["layout"], first["identifier"]) == ("lock", "curator", "py-waiter")
    assert first["waits_for"] == [holder["node"]]
    assert second["waits_for"] == [first["node"]]
    assert holder["token"] < first["token"] < second["token"]
    contenders = client.lock(path, layout="curator").contenders()
    assert [c.holder for c in contenders] == [True, False, False]
    java.release("m")
    assert waiter.holds(WAIT)
    waiter.release()
    java.end("m2")


def test_a_semaphore_v2_contender_that_gives_up_leaves_no_node_in_either_stage(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    java = curator()
    java.semaphore("s", path, 1)
    assert java.acquire("s", WAIT)  # the only permit
    ours = client.semaphore(path, permits=1, layout="curator")
    with pytest.raises(zklocks.LockTimeout):  # waits in the lease stage, holding the mutex
        ours.acquire(timeout=0.5)
    assert ours.try_acquire() is None  # non-blocking: counts, deletes its lease, lets go
    assert kazoo.get_children(f"{path}/locks") == []
    assert len(kazoo.get_children(f"{path}/leases")) == 1  # Curator's lease only
    java.mutex("m", f"{path}/locks")  # Curator's inner mutex is free for the next one
    assert java.acquire("m", WAIT)
    with pytest.raises(zklocks.LockTimeout):  # now we wait in the mutex stage
        ours.acquire(timeout=0.5)
    assert len(kazoo.get_children(f"{path}/locks")) == 1
    assert len(kazoo.get_children(f"{path}/leases")) == 1
    java.release("m")
    java.release("s")
    with ours:
        assert java.acquire("s", 0.3) is False  # our lease is the only permit
    assert kazoo.get_children(f"{path}/leases") == []


def test_a_cancelled_asyncio_waiter_in_a_curator_queue_leaves_no_node(
    zk_server: ZooKeeperServer, kazoo: Any, curator: Workers, path: str
) -> None:
    import asyncio

    java = curator()
    java.mutex("m", path)
    assert java.acquire("m", WAIT)

    async def wait_then_cancel() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as c:
            lock = c.lock(path, layout="curator")
            task = asyncio.create_task(lock.acquire())
            await asyncio.to_thread(wait_for_children, kazoo, path, 2)  # we are in line
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(wait_then_cancel())
    assert len(kazoo.get_children(path)) == 1  # Curator's holder only
    java.release("m")
    assert kazoo.get_children(path) == []
