"""``lock_delay=`` on a real ZooKeeper (issue 35): after a holder ahead is lost abnormally
(its session expired, its node broken, taken back past ``max_hold``) the successor is
granted no earlier than ``lock_delay`` after the loss; after a clean release, at once.

The loss is caused by the test at ``lost_at``; the successor can only see it later, so a
grant before ``lost_at + DELAY`` would break the rule. Each kind runs with the sync
``Client``; the exclusive lock also with ``AsyncClient``; and the commands ``zklocks run
--lock-delay`` and ``zklocks elect --lock-delay``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from test_cli_run import zklocks as zklocks_command

import zklocks
import zklocks.metrics
from helpers import KINDS, blocker_kind, expire_session, run_scenario
from zklocks.server import ZooKeeperServer

DELAY = 1.0  # seconds: long against a local server's milliseconds, short for a test
SOON = 0.5  # a clean hand-off on a local server takes milliseconds; this is generous
DELAY_KINDS = ["fair", "write", "read", "semaphore"]  # "read": a writer holds, a reader waits


def unique(name: str) -> str:
    return f"/lock-delay/{name}-{time.monotonic_ns()}"


def make(client: Any, kind: str, path: str, *, holder: bool, **options: Any) -> Any:
    """The holder's lock (the side that excludes ``kind``: a writer for readers) or the
    waiter's."""
    return KINDS[blocker_kind(kind) if holder else kind](client, path, **options)


@pytest.fixture
def clients(zk_server: ZooKeeperServer) -> Iterator[tuple[zklocks.Client, zklocks.Client]]:
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as waiter:
        yield holder, waiter


def _granted_in_thread(lock: Any) -> tuple[threading.Thread, list[Any]]:
    """Acquire ``lock`` in a thread; the list gets (lease, granted at) once granted."""
    got: list[Any] = []
    queued = threading.Event()

    def take() -> None:
        queued.set()
        lease = lock.acquire(timeout=20)
        got.append((lease, time.monotonic()))

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    queued.wait(5)
    return thread, got


def _timed_command(hosts: str, verb: str, path: str) -> Any:
    """``zklocks VERB PATH --lock-delay DELAY`` running a command that prints the
    instant it starts (``time.monotonic()``, the same clock as the test's)."""
    return zklocks_command(
        hosts, verb, path, "--lock-delay", str(DELAY), "--",
        sys.executable, "-c", "import time; print(time.monotonic())",
    )  # fmt: skip


def _giving_up(lock: Any, timeout: float) -> tuple[threading.Thread, list[float]]:
    """Wait for ``lock`` in a thread until ``timeout`` runs out (``LockTimeout``); the
    list gets the instant it gave up."""
    gave_up: list[float] = []

    def give_up() -> None:
        with pytest.raises(zklocks.LockTimeout):
            lock.acquire(timeout=timeout)
        gave_up.append(time.monotonic())

    thread = threading.Thread(target=give_up, daemon=True)
    thread.start()
    return thread, gave_up


def _wait_queued(client: zklocks.Client, path: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(client.lock(path).contenders()) < count:
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.01)


def _loss(
    cause: str, zk_server: ZooKeeperServer, holder: zklocks.Client, kazoo: Any
) -> Callable[[Any], None]:
    def expire(lease: Any) -> None:
        expire_session(holder, zk_server.hosts)

    def broken(lease: Any) -> None:  # what `zklocks break` sends: a plain delete
        kazoo.delete(lease.node)

    return {"expiry": expire, "break": broken}[cause]


@pytest.mark.parametrize("kind", DELAY_KINDS)
@pytest.mark.parametrize("cause", ["expiry", "break"])
def test_sync_successor_waits_out_the_lock_delay_after_an_abnormal_loss(
    kind: str,
    cause: str,
    clients: tuple[zklocks.Client, zklocks.Client],
    zk_server: ZooKeeperServer,
    kazoo: Any,
) -> None:
    holder, waiter = clients
    path = unique(f"{cause}-{kind}")
    lease = make(holder, kind, path, holder=True).acquire(timeout=5)
    thread, got = _granted_in_thread(make(waiter, kind, path, holder=False, lock_delay=DELAY))
    _wait_queued(waiter, path, 2)
    lost_at = time.monotonic()
    _loss(cause, zk_server, holder, kazoo)(lease)
    thread.join(20)
    successor, granted_at = got[0]
    assert granted_at >= lost_at + DELAY, granted_at - lost_at
    assert granted_at <= lost_at + DELAY + 3.0, granted_at - lost_at
    assert not successor.lost and successor.token > lease.token


@pytest.mark.parametrize("kind", DELAY_KINDS)
def test_sync_successor_waits_out_the_lock_delay_after_a_max_hold_take_back(
    kind: str, clients: tuple[zklocks.Client, zklocks.Client]
) -> None:
    holder, waiter = clients
    path = unique(f"max-hold-{kind}")
    lease = make(holder, kind, path, holder=True, max_hold=0.5).acquire(timeout=5)
    lost: list[float] = []
    lease.add_lost_callback(lambda _lease: lost.append(time.monotonic()))
    thread, got = _granted_in_thread(make(waiter, kind, path, holder=False, lock_delay=DELAY))
    thread.join(20)
    successor, granted_at = got[0]
    assert lost, "max_hold never took the lease back"
    assert granted_at >= lost[0] + DELAY, granted_at - lost[0]
    assert not successor.lost


@pytest.mark.parametrize("kind", DELAY_KINDS)
def test_sync_successor_is_granted_at_once_after_a_clean_release(
    kind: str, clients: tuple[zklocks.Client, zklocks.Client]
) -> None:
    holder, waiter = clients
    path = unique(f"clean-{kind}")
    lock = make(holder, kind, path, holder=True)
    lock.acquire(timeout=5)
    thread, got = _granted_in_thread(make(waiter, kind, path, holder=False, lock_delay=DELAY))
    _wait_queued(waiter, path, 2)
    released_at = time.monotonic()
    lock.release()
    thread.join(20)
    _successor, granted_at = got[0]
    assert granted_at - released_at < SOON


def test_sync_clean_release_after_the_lease_was_lost_hands_over_at_once(
    clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    """A lease lost while its session lives (here: told lost by ``max_hold``'s clock,
    but its node still there because the take-back is what we test elsewhere) is not
    what this checks; a *release* by a live session is clean whatever the lease said."""
    holder, waiter = clients
    path = unique("clean-after-loss")
    lock = holder.lock(path)
    lease = lock.acquire(timeout=5)
    thread, got = _granted_in_thread(waiter.lock(path, lock_delay=DELAY))
    _wait_queued(waiter, path, 2)
    released_at = time.monotonic()
    lease.release()
    thread.join(20)
    assert got[0][1] - released_at < SOON


def test_lock_delay_is_refused_with_the_curator_and_kazoo_layouts_and_the_one_node_lock(
    clients: tuple[zklocks.Client, zklocks.Client],
) -> None:
    holder, _ = clients
    for layout in ("curator", "kazoo"):
        with pytest.raises(zklocks.InvalidArgument, match="lock_delay needs the zklocks layout"):
            holder.lock("/lock-delay/x", layout=layout, lock_delay=1.0)
    with pytest.raises(zklocks.InvalidArgument, match="lock_delay"):
        holder.lock("/lock-delay/x", lock_delay=-1)
    with pytest.raises(zklocks.InvalidArgument, match="lock_delay needs the queued lock"):
        holder.lock("/lock-delay/x", fair=False, lock_delay=1.0)


@pytest.mark.parametrize("cause", ["expiry", "break", "clean"])
def test_async_successor_lock_delay(
    cause: str, zk_server: ZooKeeperServer, kazoo: Any, clients: tuple[zklocks.Client, Any]
) -> None:
    """The waiter under test is an ``AsyncLock``; the holder a sync one (whose session
    the test knows how to expire)."""
    holder, _ = clients
    path = unique(f"async-{cause}")
    lock = holder.lock(path)
    lease = lock.acquire(timeout=5)

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as waiter:
            waiting = asyncio.ensure_future(waiter.lock(path, lock_delay=DELAY).acquire(timeout=20))
            while len(await waiter.lock(path).contenders()) < 2:
                await asyncio.sleep(0.01)
            lost_at = time.monotonic()
            if cause == "expiry":
                await asyncio.to_thread(expire_session, holder, zk_server.hosts)
            elif cause == "break":
                await asyncio.to_thread(kazoo.delete, lease.node)
            else:
                await asyncio.to_thread(lease.release)
            successor = await waiting
            granted_at = time.monotonic()
            if cause == "clean":
                assert granted_at - lost_at < SOON
            else:
                assert granted_at >= lost_at + DELAY, granted_at - lost_at
            assert successor.token > lease.token
            await successor.release()

    run_scenario(scenario)


def test_cli_run_lock_delay_waits_after_a_break_and_not_after_a_release(
    clients: tuple[zklocks.Client, zklocks.Client], zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    """``zklocks run --lock-delay``: the command starts (and writes the time) no earlier
    than the delay after the holder's node was broken."""
    holder, waiter = clients
    for cause in ("break", "clean"):
        path = unique(f"cli-{cause}")
        lock = holder.lock(path)
        lease = lock.acquire(timeout=5)
        process = _timed_command(zk_server.hosts, "run", path)
        _wait_queued(waiter, path, 2)
        lost_at = time.monotonic()
        if cause == "break":
            kazoo.delete(lease.node)
        else:
            lock.release()
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        started_at = float(out.split()[0])
        if cause == "break":
            assert started_at >= lost_at + DELAY, started_at - lost_at
        else:
            assert started_at - lost_at < DELAY, started_at - lost_at


def _requests(registry: Any) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("zklocks_requests_total{"):
            op = line.split('op="', 1)[1].split('"', 1)[0]
            counts[op] = float(line.rsplit(" ", 1)[1])
    return counts


def _hand_off_census(
    holder: zklocks.Client, waiter: zklocks.Client, kazoo: Any, **options: Any
) -> dict[str, float]:
    """The requests of one clean hand-off, both sides: the holder's release, the waiter's
    acquisition and release (no ``contenders()`` of ours in between: kazoo looks)."""
    path = unique("census")
    lock = holder.lock(path)
    lock.acquire(timeout=5)
    registry = CollectorRegistry()
    zklocks.metrics.enable(registry)
    try:
        waiting = waiter.lock(path, **options)

        def take_and_release() -> None:
            waiting.acquire(timeout=20)
            waiting.release()

        thread = threading.Thread(target=take_and_release, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while len(kazoo.get_children(path)) < 2:
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.01)
        lock.release()
        thread.join(20)
        return _requests(registry)
    finally:
        zklocks.metrics.disable()


def test_a_clean_hand_off_costs_the_same_requests_with_a_lock_delay(
    clients: tuple[zklocks.Client, zklocks.Client], kazoo: Any
) -> None:
    """On a real server: the waiter's five (create, listing, watch, proof, release) and
    the holder's release, with and without ``lock_delay``; the proof is a listing
    instead of ``exists``."""
    holder, waiter = clients
    plain = _hand_off_census(holder, waiter, kazoo)
    delayed = _hand_off_census(holder, waiter, kazoo, lock_delay=DELAY)
    assert sum(delayed.values()) == sum(plain.values()) == 6, (plain, delayed)
    assert plain.get("exists", 0) == 1 and delayed.get("exists", 0) == 0, (plain, delayed)
    assert delayed["get_children"] == plain["get_children"] + 1 == 2, (plain, delayed)
    assert delayed["multi"] == plain["multi"] == 2, (plain, delayed)


@pytest.mark.parametrize("cause", ["expiry", "break", "clean"])
def test_cli_elect_lock_delay_waits_after_an_abnormal_end_of_term_and_not_after_a_resignation(
    cause: str,
    clients: tuple[zklocks.Client, zklocks.Client],
    zk_server: ZooKeeperServer,
    kazoo: Any,
) -> None:
    """``zklocks elect --lock-delay``: the next candidate's command starts (and writes the
    time) no earlier than the delay after the leader's term ended abnormally (its session
    expired, or ``zklocks break`` deleted its node), and at once after a resignation."""
    leader, _ = clients
    path = unique(f"cli-elect-{cause}")
    election = leader.election(path, identifier="leader")
    term = election.campaign(timeout=5)
    process = _timed_command(zk_server.hosts, "elect", path)
    deadline = time.monotonic() + 10
    while len(kazoo.get_children(path)) < 2:
        assert time.monotonic() < deadline, "the candidate never queued"
        time.sleep(0.01)
    lost_at = time.monotonic()
    if cause == "expiry":
        expire_session(leader, zk_server.hosts)
    elif cause == "break":
        broke = zklocks_command(zk_server.hosts, "break", path, "--token", str(term.token), "--yes")
        _, err = broke.communicate(timeout=30)
        assert broke.returncode == 0, err
    else:
        election.resign()
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    started_at = float(out.split()[0])
    if cause == "clean":
        assert started_at - lost_at < DELAY, started_at - lost_at
    else:
        assert started_at >= lost_at + DELAY, started_at - lost_at
        assert started_at <= lost_at + DELAY + 5.0, started_at - lost_at


def test_a_waiter_giving_up_during_the_delay_does_not_start_a_new_one_for_the_next(
    clients: tuple[zklocks.Client, zklocks.Client], zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    """Issue 35's starvation: A (timeout shorter than the delay) and B queue behind H;
    H's session expires; A sees it and waits out the delay, and tells B (it writes its
    node's data again; B watches only A); A's timeout runs out and it leaves marked. B
    is granted about a delay after the loss, not a delay after A left (before: A's
    plain delete was a new loss to B, and B first saw H gone then)."""
    long = 3.0
    holder, first = clients
    path = unique("give-up")
    holder.lock(path).acquire(timeout=5)
    with zklocks.Client(zk_server.hosts) as second:
        giving_up, gave_up = _giving_up(first.lock(path, lock_delay=long), 2.0)
        _wait_queued(first, path, 2)
        thread, got = _granted_in_thread(second.lock(path, lock_delay=long))
        _wait_queued(first, path, 3)
        lost_at = time.monotonic()
        expire_session(holder, zk_server.hosts)
        giving_up.join(20)
        thread.join(20)
        assert got and not got[0][0].lost
    assert gave_up and lost_at < gave_up[0] < lost_at + long, gave_up[0] - lost_at
    granted_at = got[0][1]
    assert lost_at + long <= granted_at < gave_up[0] + long - 0.5, (
        granted_at - lost_at,
        gave_up[0] - lost_at,
    )
