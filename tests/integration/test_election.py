"""Leader election and multi-lock on a real ZooKeeper: one leader, FIFO succession with
growing tokens, loss notice on the leader's own clock, observers on one watch, and
multi-locks that never deadlock and leave nothing behind."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zklocks
from helpers import expire_session, watches_of
from zklocks.fencing import FencedStore, StaleToken
from zklocks.server import ZooKeeperServer

WORKER = Path(__file__).with_name("election_worker.py")


@pytest.fixture
def path(request: pytest.FixtureRequest) -> str:
    return f"/elections/{request.node.name.replace('[', '-').rstrip(']')}-{time.monotonic_ns()}"


@pytest.fixture
def clients(zk_server: ZooKeeperServer) -> Iterator[list[zklocks.Client]]:
    made = [zklocks.Client(zk_server.hosts).start() for _ in range(4)]
    yield made
    for client in made:
        client.stop()


class Candidate(threading.Thread):
    """Campaigns in its own thread and session; resigns when told."""

    def __init__(self, client: zklocks.Client, path: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.election = client.election(path, identifier=name)
        self.term: zklocks.Lease | None = None
        self.elected = threading.Event()
        self.step_down = threading.Event()
        self.resigned = threading.Event()

    def run(self) -> None:
        self.term = self.election.campaign(timeout=60)
        assert self.election.is_leader
        self.elected.set()
        assert self.step_down.wait(60)
        self.election.resign()
        self.resigned.set()

    def start_in_line(self) -> Candidate:
        """Start, and return once our node is in the line."""
        before = len(self.election.contenders())
        self.start()
        while len(self.election.contenders()) <= before:
            self.election.wait_for_change(0.5)
        return self


def worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def children(client: zklocks.Client, path: str) -> list[str]:
    (reply,) = client._session_or_raise().call([zklocks._protocol.records.GetChildren(path)], None)
    return sorted(reply) if isinstance(reply, list) else []


# -- the basics ---------------------------------------------------------------------


def test_campaign_resign_leader_and_tokens(clients: list[zklocks.Client], path: str) -> None:
    a = clients[0].election(path, identifier="a")
    b = clients[1].election(path, identifier="b")
    assert a.leader() is None and not a.is_leader
    with pytest.raises(zklocks.NotHeld, match="does not lead"):
        a.resign()
    with a as first:
        assert a.is_leader and not b.is_leader
        leader = b.leader()
        assert leader is not None and leader.identifier == "a" and leader.token == first.token
        with pytest.raises(zklocks.LockTimeout):
            b.campaign(timeout=0.3)
    assert a.leader() is None and not a.is_leader
    second = b.campaign()
    assert second.token > first.token and b.is_leader
    b.resign()
    assert children(clients[0], path) == []


def test_an_election_path_is_not_a_lock_path(clients: list[zklocks.Client], path: str) -> None:
    with (
        clients[0].election(path),
        pytest.raises(zklocks.InvalidArgument, match="election and as a lock"),
    ):
        clients[1].lock(path).acquire(timeout=5)
    assert children(clients[0], path) == []


def test_an_election_refuses_a_path_holding_a_curator_latch(
    clients: list[zklocks.Client], path: str, kazoo: Any
) -> None:
    """Curator's LeaderLatch ignores our candidates and we would ignore its: two leaders.
    A node named as LeaderLatch names its own (LAYOUTS.md, section 9) stops the campaign,
    which leaves nothing behind."""
    latch = kazoo.create(
        f"{path}/_c_{uuid.uuid4()}-latch-", b"curator-1", ephemeral=True, sequence=True,
        makepath=True,
    )  # fmt: skip
    with pytest.raises(zklocks.InvalidArgument, match="Curator's LeaderLatch") as refused:
        clients[0].election(path).campaign(timeout=5)
    assert latch.rsplit("/", 1)[1] in str(refused.value)
    assert children(clients[0], path) == [latch.rsplit("/", 1)[1]]  # ours is gone


# -- at most one leader, across processes ------------------------------------------------


def test_at_most_one_leader_at_any_time_across_processes(
    zk_server: ZooKeeperServer, path: str, tmp_path: Path
) -> None:
    marker = str(tmp_path / "leader")
    workers = [worker("terms", zk_server.hosts, path, marker, "15") for _ in range(3)]
    try:
        for process in workers:
            out, _ = process.communicate(timeout=120)
            assert process.returncode == 0 and out.split() == ["TERMS", "15"]
    finally:
        for process in workers:
            process.kill()
            process.wait()


# -- succession -------------------------------------------------------------------------


def test_killed_leader_is_followed_by_the_next_in_line_with_a_higher_token(
    zk_server: ZooKeeperServer, clients: list[zklocks.Client], path: str, tmp_path: Path
) -> None:
    leader = worker("candidate", zk_server.hosts, path, "killed", str(tmp_path / "s.sqlite"))
    try:
        assert leader.stdout is not None
        first = leader.stdout.readline().split()
        assert first[0] == "LEADER", first
        old_token = int(first[1])
        b = Candidate(clients[0], path, "b").start_in_line()
        c = Candidate(clients[1], path, "c").start_in_line()
        leader.send_signal(signal.SIGKILL)
        assert b.elected.wait(30)  # after the killed leader's 1 s session expires
        assert b.term is not None and b.term.token > old_token
        now = clients[2].election(path).leader()
        assert now is not None and now.identifier == "b"
        assert not c.elected.is_set()
        b.step_down.set()
        assert c.elected.wait(10)
        assert c.term is not None and c.term.token > b.term.token
        c.step_down.set()
        assert c.resigned.wait(10)
    finally:
        leader.kill()
        leader.wait()


def test_paused_leader_learns_it_lost_before_its_successor_leads(
    zk_server: ZooKeeperServer, path: str, tmp_path: Path
) -> None:
    store_path = tmp_path / "store.sqlite"
    store = FencedStore(store_path)
    paused = worker("candidate", zk_server.hosts, path, "paused", str(store_path))
    assert paused.stdin is not None and paused.stdout is not None
    try:
        first = paused.stdout.readline().split()
        assert first[0] == "LEADER", first
        old_token = int(first[1])
        paused.send_signal(signal.SIGSTOP)  # paused past its 1 s session timeout
        with zklocks.Client(zk_server.hosts) as client:
            election = client.election(path, identifier="successor")
            with election as term:
                assert term.token > old_token
                store.write("balance", "successor", term.token)
                paused.send_signal(signal.SIGCONT)
                paused.stdin.write("go\n")
                paused.stdin.flush()
                report = dict(item.split("=", 1) for item in paused.stdout.readline().split())
                assert report == {"lost": "True", "write": "refused"}
                assert election.is_leader
        assert store.read("balance") == ("successor", term.token)
        with pytest.raises(StaleToken):
            store.write("balance", "late", old_token)
    finally:
        paused.send_signal(signal.SIGCONT)
        paused.kill()
        paused.wait()


def test_resign_hands_over_at_once(zk_server: ZooKeeperServer, path: str) -> None:
    """A slow session timeout does not delay the handover: resign deletes our node."""
    with (
        zklocks.Client(zk_server.hosts, session_timeout=30) as one,
        zklocks.Client(zk_server.hosts, session_timeout=30) as two,
    ):
        a = Candidate(one, path, "a").start_in_line()
        assert a.elected.wait(10)
        b = Candidate(two, path, "b").start_in_line()
        started = time.monotonic()
        a.step_down.set()
        assert b.elected.wait(10)
        assert time.monotonic() - started < 10  # far below the 30 s session timeout
        b.step_down.set()
        assert b.resigned.wait(10)


# -- observers --------------------------------------------------------------------------


def test_observe_sees_every_change_in_order_on_one_watch(
    zk_server: ZooKeeperServer, clients: list[zklocks.Client], path: str
) -> None:
    observer = clients[3]
    seen: queue.Queue[str | None] = queue.Queue()

    def observe() -> None:
        for leader in observer.election(path).observe():
            seen.put(None if leader is None else leader.identifier)
        seen.put("ended")

    thread = threading.Thread(target=observe, daemon=True)
    thread.start()
    assert seen.get(timeout=10) is None  # nobody leads yet
    candidates = [Candidate(clients[i], path, name) for i, name in enumerate("abc")]
    for candidate in candidates:
        candidate.start_in_line()
    assert seen.get(timeout=10) == "a"
    assert candidates[0].elected.wait(10)
    session_id = observer._session_or_raise().session_id()
    head = candidates[0].term
    assert head is not None
    # The observer sets its watch right after it yields: wait for the server to have it
    # (a server-side state no event tells us about), then count.
    deadline = time.monotonic() + 10
    while not watches_of(zk_server, session_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watches_of(zk_server, session_id) == [head.node]  # one watch: the head's node
    for candidate, successor in zip(candidates, ["b", "c", None], strict=True):
        candidate.step_down.set()
        assert seen.get(timeout=10) == successor
    observer.stop()
    assert seen.get(timeout=10) == "ended"
    thread.join(10)
    assert seen.empty()


def test_observe_ends_after_a_quiet_timeout(clients: list[zklocks.Client], path: str) -> None:
    with clients[0].election(path, identifier="a"):
        seen = [
            leader.identifier if leader else None
            for leader in clients[1].election(path).observe(timeout=0.3)
        ]
    assert seen == ["a"]


# -- multi-lock -------------------------------------------------------------------------


def test_multi_lock_in_opposite_orders_never_deadlocks(zk_server: ZooKeeperServer) -> None:
    base = f"/multi/{time.monotonic_ns()}"
    a, b = f"{base}/a", f"{base}/b"
    workers = [worker("multi", zk_server.hosts, "40", *paths) for paths in ((a, b), (b, a))]
    try:
        for process in workers:
            out, _ = process.communicate(timeout=120)
            assert process.returncode == 0 and out.split() == ["ROUNDS", "40"]
    finally:
        for process in workers:
            process.kill()
            process.wait()


def test_multi_lock_timeout_half_way_leaves_nothing(
    clients: list[zklocks.Client], path: str
) -> None:
    first, second = f"{path}/a", f"{path}/b"
    with clients[0].lock(second):
        multi = clients[1].multi_lock([clients[1].lock(second), clients[1].lock(first)])
        with pytest.raises(zklocks.LockTimeout):
            multi.acquire(timeout=0.5)
        assert children(clients[0], first) == []  # taken first (global order), then released
        assert len(children(clients[0], second)) == 1  # only the other holder's node
        assert not multi.held and multi.leases is None
    leases = multi.acquire(timeout=5)
    assert [lease.node.rsplit("/", 2)[1] for lease in leases] == ["b", "a"]  # order given
    multi.release()
    assert children(clients[0], first) == children(clients[0], second) == []


def test_a_lost_part_marks_the_whole_multi_lease_lost(
    clients: list[zklocks.Client], path: str, kazoo: object
) -> None:
    rw = clients[0].read_write_lock(f"{path}/rw")
    multi = clients[0].multi_lock(
        [clients[0].lock(f"{path}/x"), rw.write, clients[0].semaphore(f"{path}/p", permits=2)]
    )
    with pytest.raises(zklocks.LockLost), multi as leases:
        assert [lease.lost for lease in leases] == [False, False, False]
        kazoo.delete(leases[1].node)  # type: ignore[attr-defined]
        assert leases[0].wait_lost(10) and leases[2].wait_lost(10)
        assert "another lock of the same multi-lock" in (leases[0].lost_reason or "")
    for sub in ("x", "rw", "p"):
        assert children(clients[0], f"{path}/{sub}") == []


def test_multi_lock_refuses_two_locks_on_one_path(clients: list[zklocks.Client], path: str) -> None:
    rw = clients[0].read_write_lock(path)
    with pytest.raises(zklocks.InvalidArgument, match="one lock per path"):
        clients[0].multi_lock([rw.read, rw.write])
    with pytest.raises(zklocks.InvalidArgument, match="at least one"):
        clients[0].multi_lock([])


def test_multi_lock_error_half_way_releases_what_it_took(
    clients: list[zklocks.Client], path: str
) -> None:
    first, second = f"{path}/a", f"{path}/b"
    with clients[0].semaphore(second, permits=3):
        multi = clients[1].multi_lock(
            [clients[1].semaphore(second, permits=2), clients[1].lock(first)]
        )
        with pytest.raises(zklocks.InvalidArgument, match="disagree on permits"):
            multi.acquire(timeout=5)  # /a taken first (global order), then /b refused
        assert children(clients[0], first) == []
        assert len(children(clients[0], second)) == 1


def test_observer_whose_session_expired_goes_on_observing(
    zk_server: ZooKeeperServer, clients: list[zklocks.Client], path: str
) -> None:
    """An expiry drops every watch: the observer reads the line again in its new session."""
    observer = clients[3]
    seen: queue.Queue[str | None] = queue.Queue()

    def observe() -> None:
        for leader in observer.election(path).observe():
            seen.put(None if leader is None else leader.identifier)

    a = Candidate(clients[0], path, "a").start_in_line()
    assert a.elected.wait(10)
    threading.Thread(target=observe, daemon=True).start()
    assert seen.get(timeout=10) == "a"
    old_session = observer._session_or_raise().session_id()
    expire_session(observer, zk_server.hosts)
    b = Candidate(clients[1], path, "b").start_in_line()
    a.step_down.set()
    assert seen.get(timeout=20) == "b"
    assert observer._session_or_raise().session_id() != old_session
    b.step_down.set()
    assert seen.get(timeout=10) is None


def test_a_thread_cannot_campaign_twice_through_two_election_objects(
    clients: list[zklocks.Client], path: str
) -> None:
    """It would wait on its own node for ever: refused at once instead."""
    first, second = clients[0].election(path), clients[0].election(path)
    with first, pytest.raises(zklocks.AlreadyHeld):
        second.campaign(timeout=5)
    assert children(clients[0], path) == []
