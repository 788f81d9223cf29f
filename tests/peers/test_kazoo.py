"""zklocks with ``layout="kazoo"`` and kazoo 2.x's own recipes on one path: ``Lock``,
``ReadLock`` and ``WriteLock`` (kazoo runs in threads of this process, on its own
session)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from typing import Any

import pytest
from peers_support import (
    WAIT,
    KazooContender,
    ZkContender,
    add_one,
    enqueue,
    step_through,
    step_through_rw_timeline,
)

import zklocks
from zklocks.server import ZooKeeperServer


def test_a_shared_counter_stays_exact_under_kazoo_and_zklocks_locks(
    client: zklocks.Client, kazoo: Any, path: str
) -> None:
    counter = f"{path}-counter"
    kazoo.create(counter, b"0", makepath=True)
    rounds = 40
    errors: list[BaseException] = []

    def ours() -> None:
        lock = client.lock(path, layout="kazoo")
        try:
            for _ in range(rounds):
                with lock:
                    add_one(kazoo, counter)
        except BaseException as exc:
            errors.append(exc)

    def theirs() -> None:
        lock = kazoo.Lock(path, "kazoo-thread")
        try:
            for _ in range(rounds):
                with lock:
                    add_one(kazoo, counter)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (ours, theirs, ours, theirs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 4)
    assert not errors
    assert int(kazoo.get(counter)[0]) == 4 * rounds
    assert kazoo.get_children(path) == []


@pytest.mark.parametrize(
    ("ours_side", "theirs_recipe"),
    [("lock", "Lock"), ("write", "ReadLock"), ("read", "WriteLock"), ("write", "WriteLock")],
)
def test_a_holder_of_either_client_blocks_a_waiter_of_the_other(
    client: zklocks.Client, kazoo: Any, path: str, ours_side: str, theirs_recipe: str
) -> None:
    from kazoo.exceptions import LockTimeout as KazooTimeout

    if ours_side == "lock":
        ours = client.lock(path, layout="kazoo")
    else:
        ours = getattr(client.read_write_lock(path, layout="kazoo"), ours_side)
    theirs = getattr(kazoo, theirs_recipe)(path, "kazoo")
    lease = ours.acquire(timeout=WAIT)
    with pytest.raises(KazooTimeout):
        theirs.acquire(timeout=0.5)
    assert kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]
    ours.release()
    assert theirs.acquire(timeout=WAIT)
    with pytest.raises(zklocks.LockTimeout):
        ours.acquire(timeout=0.5)
    assert len(kazoo.get_children(path)) == 1  # our timed-out node is gone
    theirs.release()
    with ours:
        pass
    assert kazoo.get_children(path) == []


def test_readers_of_both_clients_share(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: Any, path: str
) -> None:
    ours = client.read_write_lock(path, layout="kazoo").read
    theirs = kazoo.ReadLock(path, "kazoo")
    with ours, zklocks.Client(zk_server.hosts) as other:
        assert theirs.acquire(timeout=WAIT)
        with pytest.raises(zklocks.LockTimeout):  # and both block a writer
            other.read_write_lock(path, layout="kazoo").write.acquire(timeout=0.3)
        theirs.release()
    assert kazoo.get_children(path) == []


def test_fifo_hand_off_through_a_queue_alternating_kazoo_and_zklocks(
    client: zklocks.Client, kazoo: Any, path: str
) -> None:
    line: list[Any] = []
    for i in range(3):
        line.append(KazooContender(kazoo.Lock(path, f"k{i}"), f"k{i}"))
        line.append(ZkContender(client.lock(path, layout="kazoo"), f"z{i}"))
    enqueue(kazoo, path, line)
    step_through([([c], line[i + 1 :]) for i, c in enumerate(line)])
    assert kazoo.get_children(path) == []


def test_read_write_timeline_with_kinds_alternating_between_clients(
    client: zklocks.Client, kazoo: Any, path: str
) -> None:
    """R1 R2 R3 W4 W5 R6 W7: odd places zklocks, even places kazoo."""
    line: list[Any] = []
    for place, kind in enumerate("RRRWWRW", start=1):
        side = "read" if kind == "R" else "write"
        if place % 2:
            rw = client.read_write_lock(path, layout="kazoo")
            line.append(ZkContender(getattr(rw, side), f"{kind}{place}"))
        else:
            recipe = kazoo.ReadLock if side == "read" else kazoo.WriteLock
            line.append(KazooContender(recipe(path, f"{kind}{place}"), f"{kind}{place}"))
    enqueue(kazoo, path, line)
    step_through_rw_timeline(line)
    assert kazoo.get_children(path) == []


def test_status_shows_a_mixed_kazoo_queue(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: Any, path: str
) -> None:
    holder = kazoo.ReadLock(path, "kazoo-reader")
    assert holder.acquire(timeout=WAIT)
    ours = client.read_write_lock(path, layout="kazoo", identifier="py-reader").read
    lease = ours.acquire(timeout=WAIT)
    writer = KazooContender(kazoo.WriteLock(path, "kazoo-writer"), "w")
    enqueue(kazoo, path, [writer])
    result = subprocess.run(
        [sys.executable, "-m", "zklocks", "status", path, "--json", "--hosts", zk_server.hosts],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    got = [(e["kind"], e["layout"], e["identifier"]) for e in state["holders"]]
    assert got == [("read", "kazoo", "kazoo-reader"), ("read", "kazoo", "py-reader")]
    (waiter,) = state["waiters"]
    assert (waiter["kind"], waiter["layout"], waiter["identifier"]) == (
        "write",
        "kazoo",
        "kazoo-writer",
    )
    assert waiter["waits_for"] == [lease.node]  # the nearest earlier node
    listed = subprocess.run(
        [sys.executable, "-m", "zklocks", "ls", path, "--json", "--hosts", zk_server.hosts],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    (summary,) = json.loads(listed.stdout)
    assert (summary["path"], summary["kind"]) == (path, "read/write")
    assert (summary["holders"], summary["waiters"]) == (2, 1)
    holder.release()
    ours.release()
    assert writer.holds(WAIT)
    writer.release()


def test_zklocks_run_takes_its_place_in_a_kazoo_queue(
    zk_server: ZooKeeperServer, kazoo: Any, path: str
) -> None:
    def run(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "zklocks", "run", "--hosts", zk_server.hosts, *options],
            capture_output=True,
            text=True,
            timeout=60,
        )

    theirs = kazoo.WriteLock(path, "kazoo")
    assert theirs.acquire(timeout=WAIT)
    blocked = run("--layout", "kazoo", "--read", "--timeout", "0.5", path, "--", "true")
    assert blocked.returncode == 75, blocked.stderr
    assert len(kazoo.get_children(path)) == 1
    theirs.release()
    done = run("--layout", "kazoo", "--read", path, "--", "true")
    assert done.returncode == 0, done.stderr
    refused = run("--layout", "kazoo", "--semaphore", "2", path, "--", "true")
    assert refused.returncode == 2 and "no semaphore" in refused.stderr
    assert kazoo.get_children(path) == []


def test_the_waiting_log_gives_our_place_in_the_peers_line(
    client: zklocks.Client, kazoo: Any, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    theirs = kazoo.WriteLock(path, "kazoo")
    assert theirs.acquire(timeout=WAIT)
    with caplog.at_level(logging.INFO, logger="zklocks.lock"), pytest.raises(zklocks.LockTimeout):
        client.lock(path, layout="kazoo").acquire(timeout=0.3)
    assert f"{path}: lock queued at position 2" in caplog.messages
    theirs.release()


def test_the_kazoo_layout_makes_persistent_parents_as_kazoo_does() -> None:
    """A container lock path reaped under a kazoo ``Lock`` object makes its next acquire
    fail (kazoo ensures the path once per object): the kazoo layout makes none."""
    from kazoo.client import KazooClient

    with ZooKeeperServer(
        tick_time=200,
        max_session_timeout=60_000,
        system_properties={"znode.container.checkIntervalMs": "100"},
    ) as server:
        look = KazooClient(server.hosts)
        look.start(timeout=15)
        try:
            with zklocks.Client(server.hosts) as c:
                theirs_path, container_path = "/kz/a/lock", "/cur/a/lock"
                with c.lock(theirs_path, layout="kazoo"), c.lock(container_path, layout="curator"):
                    pass
                kazoo_lock = look.Lock(theirs_path, "kazoo")
                reaped = threading.Event()
                if look.exists("/cur", watch=lambda _event: reaped.set()) is not None:
                    assert reaped.wait(WAIT)  # the reaper ran over /cur/a/lock, /cur/a, /cur
                assert look.exists(theirs_path) is not None  # ours stayed
                assert kazoo_lock.acquire(timeout=WAIT)
                kazoo_lock.release()
        finally:
            look.stop()
            look.close()
