"""The sync client writes its requests from the calling thread (no hand-off to the loop).

The waiting caller also reads its own reply (``caller_reads.py``; the reader role's own
tests are in ``test_caller_reads.py``), and the loop owns the connection's life; these
tests pin what the calling thread's write must keep: it really leaves from the caller
and is answered there (while the loop is busy), a write larger than the socket buffer is finished by
the loop with nothing overtaking it, and the timers that replaced a hand-off per timer
run in order and can be cancelled.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient

import zklocks
from helpers import loop_blocked, native_sync_carrier, threaded_proxy, until
from zklocks._protocol.records import Create, Created
from zklocks._sync.native_carrier import _Timers
from zklocks._vocabulary import SessionState
from zklocks.server import ZooKeeperServer

WAIT = 20.0


@pytest.fixture
def base(kazoo: KazooClient) -> str:
    path = f"/test-direct-{uuid.uuid4().hex[:8]}"
    kazoo.create(path)
    return path


def test_a_call_is_sent_and_answered_on_the_calling_thread_while_the_loop_is_busy(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    """The caller writes its request and reads its own reply (``caller_reads.py``): with
    the loop thread blocked, the call still completes."""
    with zklocks.Client(zk_server.hosts) as client:
        session = native_sync_carrier(client)
        with loop_blocked(session, WAIT):
            replies: list[Any] = []
            caller = threading.Thread(
                target=lambda: replies.extend(session.call([Create(base + "/n")], None))
            )
            caller.start()
            # The loop thread is blocked, so only the caller can have written it, and
            # only the caller can have read the answer.
            until(lambda: kazoo.exists(base + "/n") is not None)
            caller.join(WAIT)
            assert len(replies) == 1 and isinstance(replies[0], Created)


def test_a_write_bigger_than_the_socket_buffer_is_finished_before_any_other(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    base: str,
) -> None:
    with (
        threaded_proxy(zk_server.port) as (proxy, proxy_loop),
        zklocks.Client(proxy.hosts, session_timeout=30.0) as client,
    ):
        session = native_sync_carrier(client)
        states: list[SessionState] = []
        session.add_state_listener(states.append)
        big = b"x" * 900_000
        # 12 x 900 kB: more than the kernel buffers of a stalled path hold, so the
        # caller's write is partial and the loop must send the rest. The loop is
        # kept busy meanwhile, so the rest waits with it when the next call comes.
        proxy_loop.call_soon_threadsafe(proxy.stall)
        first: list[Any] = []
        second: list[Any] = []
        third: list[Any] = []
        small = [Create(base + "/n-", b"", ephemeral=False, sequential=True)]

        def loop_side() -> None:
            # Runs on the loop once it is free again, before its turn to send the
            # rest of the partial write: a write of the loop's own must not cut in.
            future = session._connection.submit(small[0])
            future.add_done_callback(lambda done: third.append(done.exception() or done.result()))

        with loop_blocked(session, WAIT):  # so the rest of the partial write waits
            session._loop.call_soon_threadsafe(loop_side)
            bulk = [Create(base + "/n-", big, ephemeral=False, sequential=True)] * 12
            a = threading.Thread(target=lambda: first.extend(session.call(bulk, None)))
            a.start()
            until(lambda: session._connection._session.in_flight >= 12)
            # Called while the rest of the first write waits with the loop: it must
            # not overtake it.
            b = threading.Thread(target=lambda: second.extend(session.call(small, None)))
            b.start()
            until(
                lambda: (
                    session._connection._session.in_flight >= 13
                    or not b.is_alive()
                    or len(session._pending) > 0
                )
            )
        proxy_loop.call_soon_threadsafe(proxy.unstall)
        a.join(WAIT)
        b.join(WAIT)
        assert not a.is_alive() and not b.is_alive()
        until(lambda: bool(third))
        assert all(isinstance(reply, Created) for reply in first), first
        assert len(third) == 1 and isinstance(third[0], Created), third
        assert len(second) == 1 and isinstance(second[0], Created), second
        # The first write's requests are numbered first and answered first; the two
        # after it follow in whichever order they were numbered.
        sequence = [int(reply.path.rsplit("-", 1)[1]) for reply in first + third + second]
        assert len(set(sequence)) == 14
        assert max(sequence[:12]) < min(sequence[12:])
        assert sequence[:12] == sorted(sequence[:12])
        assert SessionState.SUSPENDED not in states  # the stream stayed whole
    assert len(kazoo.get_children(base)) == 14


def test_timers_run_in_due_order_and_a_cancelled_one_never_runs(
    loop_thread: asyncio.AbstractEventLoop,
) -> None:
    timers = _Timers(loop_thread)
    ran: list[str] = []
    last = threading.Event()

    def note(name: str, done: bool = False) -> Any:
        def fn() -> None:
            assert asyncio.get_running_loop() is loop_thread  # on the loop's thread
            ran.append(name)
            if done:
                last.set()

        return fn

    timers.add(0.3, note("late", done=True))
    cancel = timers.add(0.1, note("cancelled"))
    # Earlier than the armed timer: the loop must be woken to re-arm for it.
    timers.add(0.05, note("early"))
    timers.add(0.2, note("middle"))
    cancel()
    assert last.wait(WAIT)
    assert ran == ["early", "middle", "late"]


def test_calls_from_many_threads_each_get_their_own_replies(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    # Callers that find another one writing leave their frames to it (one send for
    # several calls): nothing may be stranded, reordered or answered to the wrong caller.
    threads, calls = 32, 40
    with zklocks.Client(zk_server.hosts) as client:
        session = native_sync_carrier(client)
        got: dict[int, list[Any]] = {i: [] for i in range(threads)}
        start = threading.Barrier(threads)

        def caller(i: int) -> None:
            start.wait(WAIT)
            for _ in range(calls):
                request = Create(f"{base}/t{i}-", ephemeral=False, sequential=True)
                got[i].extend(session.call([request, request], None))

        workers = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert not any(worker.is_alive() for worker in workers)
    for i, replies in got.items():
        assert len(replies) == 2 * calls
        assert all(isinstance(reply, Created) for reply in replies), replies
        assert all(reply.path.startswith(f"{base}/t{i}-") for reply in replies)
        sequence = [int(reply.path.rsplit("-", 1)[1]) for reply in replies]
        assert sequence == sorted(sequence)
    assert len(kazoo.get_children(base)) == threads * calls * 2
