"""The lock contract, run for every lock kind on a real ZooKeeper.

Kinds: fair lock, one-node lock (``fair=False``), read/write lock's ``write`` and
``read`` sides, semaphore (1 permit here; N permits in test_semaphore.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract_support import WakeProbe, run_worker
from lockkinds import EXCLUSIVE, KINDS, QUEUED_EXCLUSIVE, blocker_kind

import zklocks
from conftest import Backend
from helpers import ctrl_c_restored

ALL = list(KINDS)


def start_thread(target: Callable[[], Any], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def node_names(inspector: Any, path: str) -> list[str]:
    return sorted(inspector.get_children(path)) if inspector.exists(path) else []


@pytest.mark.parametrize("kind", EXCLUSIVE)
def test_mutual_exclusion_across_processes(
    kind: str, hosts: str, lock_path: str, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    workers = [run_worker(hosts, lock_path, kind, "count", "25", str(counter)) for _ in range(4)]
    for worker in workers:
        assert worker.wait(timeout=90) == 0
    assert int(counter.read_text()) == 100


@pytest.mark.parametrize("kind", EXCLUSIVE)
def test_threads_of_one_client_exclude_each_other(
    kind: str, client: zklocks.Client, lock_path: str
) -> None:
    lock = KINDS[kind](client, lock_path)
    inside = 0
    most = 0
    mutex = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(10):
            with lock:
                with mutex:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0)  # let another thread run while we hold
                with mutex:
                    inside -= 1

    threads = [start_thread(work, f"t{i}") for i in range(4)]
    for thread in threads:
        thread.join(timeout=60)
    assert most == 1
    assert not lock.held


@pytest.mark.parametrize("kind", QUEUED_EXCLUSIVE)
def test_waiters_get_the_lock_in_fifo_order(
    kind: str, client: zklocks.Client, lock_path: str, probe: WakeProbe
) -> None:
    lock = KINDS[kind](client, lock_path)
    lock.acquire()
    order: list[int] = []
    threads = []
    for i in range(5):

        def take(i: int = i) -> None:
            with lock:
                order.append(i)

        threads.append(start_thread(take, f"waiter{i}"))
        assert probe.waiting_event(f"waiter{i}").wait(10)  # queued before the next one
    lock.release()
    for thread in threads:
        thread.join(timeout=30)
    assert order == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("kind", QUEUED_EXCLUSIVE)
def test_each_release_wakes_exactly_one_waiter(
    kind: str, client: zklocks.Client, lock_path: str, probe: WakeProbe
) -> None:
    lock = KINDS[kind](client, lock_path)
    lock.acquire()
    granted = threading.Semaphore(0)
    proceed = {i: threading.Event() for i in range(6)}
    threads = []
    for i in range(6):

        def take(i: int = i) -> None:
            with lock:
                granted.release()
                assert proceed[i].wait(30)

        threads.append(start_thread(take, f"waiter{i}"))
        assert probe.waiting_event(f"waiter{i}").wait(10)
    assert probe.total() == 0
    lock.release()
    for i in range(6):
        assert granted.acquire(timeout=30)
        # exactly one deletion-wake-up per release so far: no herd
        assert probe.total() == i + 1
        proceed[i].set()
    for thread in threads:
        thread.join(timeout=30)
    assert all(count == 1 for count in probe.wakeups.values())


@pytest.mark.parametrize("kind", ALL)
def test_timeout_raises_and_leaves_no_node(
    kind: str, client: zklocks.Client, make_client: Any, lock_path: str, inspector: Any
) -> None:
    holder = KINDS[blocker_kind(kind)](make_client(), lock_path)
    holder.acquire()
    before = node_names(inspector, lock_path)
    lock = KINDS[kind](client, lock_path)
    started = time.monotonic()
    with pytest.raises(zklocks.LockTimeout) as caught:
        lock.acquire(timeout=0.5)
    elapsed = time.monotonic() - started
    assert isinstance(caught.value, TimeoutError)
    assert 0.5 <= elapsed < 10
    assert node_names(inspector, lock_path) == before
    assert not lock.held
    holder.release()


@pytest.mark.parametrize("kind", ALL)
def test_try_acquire(
    kind: str, client: zklocks.Client, make_client: Any, lock_path: str, inspector: Any
) -> None:
    lock = KINDS[kind](client, lock_path)
    lease = lock.try_acquire()
    assert lease is not None and lock.held
    lock.release()
    holder = KINDS[blocker_kind(kind)](make_client(), lock_path)
    holder.acquire()
    before = node_names(inspector, lock_path)
    assert lock.try_acquire() is None
    assert not lock.held
    assert node_names(inspector, lock_path) == before
    holder.release()


@pytest.mark.parametrize("kind", ALL)
def test_reacquire_raises_already_held_unless_reentrant(
    kind: str, client: zklocks.Client, lock_path: str
) -> None:
    lock = KINDS[kind](client, lock_path)
    lease = lock.acquire()
    with pytest.raises(zklocks.AlreadyHeld) as caught:
        lock.acquire()
    assert isinstance(caught.value, RuntimeError)
    lock.release()

    if kind == "unfair":
        reentrant = client.lock(lock_path, fair=False, reentrant=True)
    elif kind in ("read", "write"):
        rw = client.read_write_lock(lock_path, reentrant=True)
        reentrant = rw.read if kind == "read" else rw.write
    elif kind == "semaphore":
        reentrant = client.semaphore(lock_path, permits=1, reentrant=True)
    else:
        reentrant = client.lock(lock_path, reentrant=True)
    lease = reentrant.acquire()
    assert reentrant.acquire() is lease
    reentrant.release()
    assert reentrant.held  # one release per acquire
    reentrant.release()
    assert not reentrant.held
    with pytest.raises(zklocks.NotHeld):
        reentrant.release()


@pytest.mark.parametrize("kind", ALL)
def test_release_by_a_non_holder_raises_not_held(
    kind: str, client: zklocks.Client, lock_path: str
) -> None:
    lock = KINDS[kind](client, lock_path)
    with pytest.raises(zklocks.NotHeld) as caught:
        lock.release()
    assert isinstance(caught.value, RuntimeError)
    lock.acquire()
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            lock.release()
        except BaseException as exc:
            errors.append(exc)

    start_thread(other_thread, "other").join(timeout=10)
    assert len(errors) == 1 and isinstance(errors[0], zklocks.NotHeld)
    assert lock.held
    lock.release()


@pytest.mark.parametrize("kind", ALL)
def test_closed_client_fails_fast(kind: str, backend: Backend, lock_path: str) -> None:
    never_started = backend.client()
    with pytest.raises(zklocks.ClientClosed):
        KINDS[kind](never_started, lock_path).acquire()
    client = backend.client().start()
    lock = KINDS[kind](client, lock_path)
    client.stop()
    for call in (lock.acquire, lock.try_acquire, lock.contenders):
        with pytest.raises(zklocks.ClientClosed):
            call()


@pytest.mark.parametrize("kind", ALL)
def test_waiter_is_released_when_its_client_stops(
    kind: str, make_client: Any, lock_path: str, probe: WakeProbe
) -> None:
    holder = KINDS[blocker_kind(kind)](make_client(), lock_path)
    holder.acquire()
    client = make_client()
    lock = KINDS[kind](client, lock_path)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            lock.acquire()
        except BaseException as exc:
            errors.append(exc)

    thread = start_thread(wait, "waiter")
    assert probe.waiting_event("waiter").wait(10)
    client.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], zklocks.ClientClosed)
    holder.release()


@pytest.mark.parametrize("kind", ALL)
def test_killed_holder_is_replaced_after_its_session_timeout(
    kind: str, hosts: str, lock_path: str
) -> None:
    """Real processes on the real server (the simulator lives in this process only)."""
    with zklocks.Client(hosts) as client:
        killed_holder_is_replaced(kind, hosts, client, lock_path)


def killed_holder_is_replaced(
    kind: str, hosts: str, client: zklocks.Client, lock_path: str
) -> None:
    worker = run_worker(hosts, lock_path, blocker_kind(kind), "hold", "1.0")
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line.startswith("HELD"), line
    held_token = int(line.split()[1])
    lock = KINDS[kind](client, lock_path)
    assert lock.try_acquire() is None
    worker.kill()
    worker.wait()
    killed_at = time.monotonic()
    lease = lock.acquire(timeout=20)
    assert time.monotonic() - killed_at > 0.3  # the server waited for the session to expire
    assert lease.token > held_token
    lock.release()


@pytest.mark.parametrize("kind", ALL)
def test_expired_session_marks_the_lease_lost(
    kind: str, backend: Backend, make_client: Any, lock_path: str
) -> None:
    client = make_client()
    lock = KINDS[kind](client, lock_path)
    lease = lock.acquire()
    told = threading.Event()
    lease.add_lost_callback(lambda lost: told.set())
    backend.expire(client)
    assert lease.wait_lost(timeout=20)
    assert told.is_set() and lease.lost and not lock.held
    assert lease.lost_reason
    other = KINDS[kind](make_client(), lock_path)
    assert other.acquire(timeout=20).token > lease.token
    lock.release()  # after loss: cleans up, does not raise
    other.release()


@pytest.mark.parametrize("kind", ALL)
def test_leaving_with_after_loss_raises_lock_lost(
    kind: str, backend: Backend, make_client: Any, lock_path: str
) -> None:
    client = make_client()
    lock = KINDS[kind](client, lock_path)
    with pytest.raises(zklocks.LockLost), lock as lease:
        backend.expire(client)
        assert lease.wait_lost(timeout=20)
    assert not lock.held


@pytest.mark.parametrize("kind", ALL)
def test_deleting_our_node_marks_the_lease_lost(
    kind: str, client: zklocks.Client, lock_path: str, inspector: Any
) -> None:
    lock = KINDS[kind](client, lock_path)
    lease = lock.acquire()
    inspector.delete(lease.node)
    assert lease.wait_lost(timeout=10)
    assert "deleted" in (lease.lost_reason or "")
    lock.release()


@pytest.mark.parametrize("kind", ALL)
def test_tokens_increase_across_successive_holders(
    kind: str, make_client: Any, lock_path: str
) -> None:
    tokens = []
    for _ in range(3):
        for c in (make_client(), make_client()):
            lock = KINDS[kind](c, lock_path)
            with lock as lease:
                tokens.append(lease.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


@pytest.mark.parametrize("kind", ALL)
def test_contenders_lists_holders_then_waiters(
    kind: str, make_client: Any, lock_path: str, probe: WakeProbe
) -> None:
    holder_client = make_client()
    holder = KINDS[blocker_kind(kind)](holder_client, lock_path)
    held = holder.acquire()
    waiter = KINDS[kind](make_client(), lock_path)
    named = waiter if kind == "unfair" else None
    if named is None:
        if kind in ("read", "write"):
            rw = make_client().read_write_lock(lock_path, identifier="job-42")
            named = rw.read if kind == "read" else rw.write
        elif kind == "semaphore":
            named = make_client().semaphore(lock_path, permits=1, identifier="job-42")
        elif kind == "election":
            named = make_client().election(lock_path, identifier="job-42")
        else:
            named = make_client().lock(lock_path, identifier="job-42")

    def take_and_leave() -> None:
        named.acquire(timeout=30)
        named.release()

    thread = start_thread(take_and_leave, "waiter")
    assert probe.waiting_event("waiter").wait(10)
    found = waiter.contenders()
    assert found[0].node == held.node and found[0].holder
    assert found[0].token == held.token
    assert found[0].kind == {
        "read": "write",
        "write": "write",
        "semaphore": "permit",
        "election": "elect",
    }.get(kind, "lock")
    if kind != "unfair":  # the one-node lock keeps no queue: waiters have no node
        assert len(found) == 2
        assert not found[1].holder
        assert found[1].identifier == "job-42"
        assert found[1].sequence > found[0].sequence
    assert ":" in found[0].identifier  # default host:pid:thread
    assert found[0].created.tzinfo is not None
    holder.release()
    thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.mark.parametrize("kind", ALL)
def test_foreign_children_are_ignored(
    kind: str, client: zklocks.Client, lock_path: str, inspector: Any
) -> None:
    inspector.create(f"{lock_path}/not-a-contender", b"x", makepath=True)
    inspector.create(f"{lock_path}/_c_kazoo-lock-", b"x", sequence=True)
    lock = KINDS[kind](client, lock_path)
    with lock:
        assert [c.kind for c in lock.contenders()] == [
            {"read": "read", "write": "write", "semaphore": "permit", "election": "elect"}.get(
                kind, "lock"
            )
        ]


@pytest.mark.parametrize(
    "path",
    [
        "relative/path",
        "",
        "/",
        "/trailing/",
        "/double//slash",
        "/dot/./x",
        "/dotdot/../x",
        "/zookeeper",
        "/zookeeper/quota",
        "/bad\x00char",
        "/tab\there",
        123,
    ],
)
def test_bad_paths_are_refused_before_any_call(path: Any, hosts: str) -> None:
    client = zklocks.Client(hosts)  # never started: a ZooKeeper call would be ClientClosed
    for make in (
        lambda: client.lock(path),
        lambda: client.read_write_lock(path),
        lambda: client.semaphore(path, permits=2),
    ):
        with pytest.raises(zklocks.InvalidPath) as caught:
            make()
        assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("permits", [0, -1, 1.5, "3", True, None])
def test_bad_permits_are_refused(permits: Any, hosts: str) -> None:
    with pytest.raises(zklocks.InvalidArgument) as caught:
        zklocks.Client(hosts).semaphore("/x", permits=permits)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("timeout", [-1, -0.001, float("nan"), "1", True])
def test_bad_timeouts_are_refused(timeout: Any, client: zklocks.Client, lock_path: str) -> None:
    with pytest.raises(zklocks.InvalidArgument):
        client.lock(lock_path).acquire(timeout=timeout)


def test_zero_timeout_on_a_free_lock_succeeds(client: zklocks.Client, lock_path: str) -> None:
    with client.lock(lock_path) as lease:
        assert lease.token > 0
    lock = client.lock(lock_path)
    assert lock.acquire(timeout=0).token > 0
    lock.release()


@pytest.mark.parametrize("kind", ALL)
def test_contenders_of_an_empty_or_missing_path(
    kind: str, client: zklocks.Client, lock_path: str
) -> None:
    lock = KINDS[kind](client, lock_path)
    assert lock.contenders() == []  # no path yet
    with lock:
        pass
    assert lock.contenders() == []  # the path exists, nobody in line


@pytest.mark.parametrize("kind", ALL)
def test_ctrl_c_while_waiting_deletes_our_node(
    kind: str, client: zklocks.Client, make_client: Any, lock_path: str, probe: WakeProbe
) -> None:
    """A real SIGINT interrupts acquire() in the main thread; our node goes with it."""
    import os
    import signal

    assert threading.current_thread() is threading.main_thread()
    holder = KINDS[blocker_kind(kind)](make_client(), lock_path)
    held = holder.acquire()
    lock = KINDS[kind](client, lock_path)
    me = threading.current_thread().name

    def interrupt_once_waiting() -> None:
        assert probe.waiting_event(me).wait(10)
        os.kill(os.getpid(), signal.SIGINT)

    with ctrl_c_restored():  # the run may have been started with SIGINT ignored
        start_thread(interrupt_once_waiting, "interrupter")
        with pytest.raises(KeyboardInterrupt):
            lock.acquire(timeout=30)
    assert [c.node for c in lock.contenders()] == [held.node]
    assert not lock.held
    holder.release()
