"""Read/write and semaphore semantics, lease loss and fencing, on a real ZooKeeper."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zklocks
from helpers import frozen
from zklocks.fencing import FencedStore, StaleToken
from zklocks.server import ZooKeeperServer

WORKER = Path(__file__).with_name("lease_worker.py")


@pytest.fixture
def path(request: pytest.FixtureRequest) -> str:
    return f"/family/{request.node.name.replace('[', '-').rstrip(']')}-{time.monotonic_ns()}"


@pytest.fixture
def clients(zk_server: ZooKeeperServer) -> Iterator[list[zklocks.Client]]:
    """Eight clients: eight sessions, as eight processes would have."""
    made = [zklocks.Client(zk_server.hosts).start() for _ in range(8)]
    yield made
    for client in made:
        client.stop()


class Contender(threading.Thread):
    """One contender in its own thread and session: acquire, report, release on demand."""

    def __init__(self, lock: zklocks.Lock, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.lock = lock
        self.granted = threading.Event()
        self.let_go = threading.Event()
        self.queued = threading.Event()

    def run(self) -> None:
        with self.lock:
            self.granted.set()
            assert self.let_go.wait(60)

    def start_and_queue(self) -> Contender:
        """Start, and return once our node is in the line (granted or waiting)."""
        before = len(self.lock.contenders())
        self.start()
        while not self.granted.is_set() and len(self.lock.contenders()) <= before:
            self.lock.wait_for_change(0.5)
        return self


def holders(lock: zklocks.Lock) -> list[str]:
    return [c.identifier for c in lock.contenders() if c.holder]


def read_write(client: zklocks.Client, path: str, kind: str, name: str) -> zklocks.Lock:
    rw = client.read_write_lock(path, identifier=name)
    return rw.read if kind == "R" else rw.write


def test_seed_003_timeline(clients: list[zklocks.Client], path: str) -> None:
    """R1 R2 R3 W4 W5 R6 W7: who holds at each step, exactly as seed 003 draws it."""
    names = ["R1", "R2", "R3", "W4", "W5", "R6", "W7"]
    line = [
        Contender(read_write(client, path, name[0], name), name).start_and_queue()
        for client, name in zip(clients, names, strict=False)
    ]
    observer = clients[7].read_write_lock(path).read
    by_name = dict(zip(names, line, strict=True))
    steps = [
        ([], ["R1", "R2", "R3"]),
        (["R1", "R2", "R3"], ["W4"]),
        (["W4"], ["W5"]),
        (["W5"], ["R6"]),
        (["R6"], ["W7"]),
        (["W7"], []),
    ]
    for released, expected in steps:
        for name in released:
            by_name[name].let_go.set()
            by_name[name].join(10)
        for name in expected:
            assert by_name[name].granted.wait(10), f"{name} was not granted"
        assert holders(observer) == expected
        waiting = [n for n in names if not by_name[n].granted.is_set()]
        assert all(not by_name[n].granted.is_set() for n in waiting)


def test_reader_behind_a_waiting_writer_waits(clients: list[zklocks.Client], path: str) -> None:
    reader1 = Contender(read_write(clients[0], path, "R", "R1"), "R1").start_and_queue()
    writer = Contender(read_write(clients[1], path, "W", "W2"), "W2").start_and_queue()
    reader3 = Contender(read_write(clients[2], path, "R", "R3"), "R3").start_and_queue()
    assert reader1.granted.is_set()
    assert not writer.granted.is_set() and not reader3.granted.is_set()
    reader1.let_go.set()
    assert writer.granted.wait(10)
    assert not reader3.granted.is_set()  # the writer is not starved by later readers
    writer.let_go.set()
    assert reader3.granted.wait(10)
    reader3.let_go.set()


def test_readers_hold_together(clients: list[zklocks.Client], path: str) -> None:
    readers = [
        Contender(read_write(clients[i], path, "R", f"R{i}"), f"R{i}").start_and_queue()
        for i in range(5)
    ]
    assert all(reader.granted.wait(10) for reader in readers)
    assert len(holders(readers[0].lock)) == 5
    for reader in readers:
        reader.let_go.set()


def test_semaphore_admits_at_most_n_in_fifo_order(clients: list[zklocks.Client], path: str) -> None:
    sems = [
        client.semaphore(path, permits=3, identifier=f"S{i}") for i, client in enumerate(clients)
    ]
    line = [Contender(sem, f"S{i}").start_and_queue() for i, sem in enumerate(sems)]
    assert [c.granted.is_set() for c in line] == [True] * 3 + [False] * 5
    # release out of order: the middle holder first; the first waiter must be woken
    for leaving, newly in ((1, 3), (0, 4), (2, 5), (3, 6), (4, 7)):
        line[leaving].let_go.set()
        assert line[newly].granted.wait(10), f"S{newly} missed its wake-up"
        assert len(holders(sems[0])) == 3
    for contender in line:
        contender.let_go.set()


def test_semaphore_contenders_that_disagree_on_permits_get_value_error(
    clients: list[zklocks.Client], path: str
) -> None:
    held = clients[0].semaphore(path, permits=3).acquire()
    other = clients[1].semaphore(path, permits=2)
    with pytest.raises(zklocks.InvalidArgument, match="permits") as caught:
        other.acquire(timeout=5)
    assert isinstance(caught.value, ValueError)
    assert [c.node for c in other.contenders()] == [held.node]  # nothing left behind
    with pytest.raises(zklocks.InvalidArgument):
        clients[1].lock(path).acquire(timeout=5)  # a lock on a semaphore's path


def test_frozen_holder_knows_it_lost_before_anyone_else_is_granted(
    zk_server: ZooKeeperServer, path: str
) -> None:
    """The clock rule: lost is true no later than the moment another client can hold."""
    with (
        zklocks.Client(zk_server.hosts, session_timeout=1.0) as holder,
        zklocks.Client(zk_server.hosts) as other,
    ):
        lease = holder.lock(path).acquire()
        with frozen(holder):  # its connection thread stands still: no pings, no news
            granted = other.lock(path).acquire(timeout=30)
            assert lease.lost  # on the holder's own clock, before it hears anything
        assert granted.token > lease.token
        assert lease.wait_lost(10)


def test_paused_holder_learns_it_lost_and_its_stale_write_is_refused(
    zk_server: ZooKeeperServer, path: str, tmp_path: Path
) -> None:
    store_path = tmp_path / "store.sqlite"
    store = FencedStore(store_path)
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), zk_server.hosts, path, str(store_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        first = worker.stdout.readline().split()
        assert first[0] == "HELD", first
        old_token = int(first[1])
        assert store.read("balance") == ("100", old_token)
        worker.send_signal(signal.SIGSTOP)  # paused past its 1 s session timeout
        with zklocks.Client(zk_server.hosts) as client, client.lock(path) as lease:
            assert lease.token > old_token
            store.write("balance", "200", lease.token)
        worker.send_signal(signal.SIGCONT)
        worker.stdin.write("write\n")
        worker.stdin.flush()
        report = dict(item.split("=", 1) for item in worker.stdout.readline().split())
        assert report == {"lost": "True", "write": "refused"}
        assert store.read("balance") == ("200", lease.token)
        with pytest.raises(StaleToken):
            store.write("balance", "300", old_token)
    finally:
        worker.send_signal(signal.SIGCONT)
        worker.kill()
        worker.wait()


def test_empty_lock_paths_do_not_pile_up() -> None:
    with (
        ZooKeeperServer(
            tick_time=200, system_properties={"znode.container.checkIntervalMs": "100"}
        ) as server,
        zklocks.Client(server.hosts) as client,
    ):
        for i in range(3):
            with client.lock(f"/garbage/job-{i}"):
                pass
        from kazoo.client import KazooClient

        inspector: Any = KazooClient(hosts=server.hosts)
        inspector.start(timeout=15)
        try:
            deadline = time.monotonic() + 20
            gone = threading.Event()
            while inspector.exists("/garbage") and time.monotonic() < deadline:
                gone.clear()
                if inspector.exists("/garbage", watch=lambda _event: gone.set()):
                    gone.wait(1)
            assert not inspector.exists("/garbage")  # containers reaped, ancestors too
        finally:
            inspector.stop()
            inspector.close()
