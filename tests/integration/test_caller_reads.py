"""The waiting sync caller reads its own reply (issue 38, ``_transport/caller_reads.py``).

What the reader role must keep, on a real server: nothing lost, reordered or stuck when
callers read for each other and for the loop (200 threads on 200 locks while watches
fire), a reply and a notification read in one piece by a caller (the notification
first, on the loop), a caller interrupted in the middle of its read (the role comes
back, nothing is lost), and a connection reset while a caller reads (every request in
flight fails with ``ConnectionLossError``, and the client goes on). The simulator runs
no transport: the role has nothing to do there.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import queue
import random
import threading
import time
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient
from nemesis.proxy import Proxy

import zklocks
from helpers import loop_blocked, native_sync_carrier, threaded_proxy, until
from zklocks._protocol.errors import ClientClosedError, ConnectionLossError
from zklocks._protocol.records import Create, GetData, NodeData
from zklocks._sync.native_carrier import NativeSyncCarrier
from zklocks._transport.caller_reads import CallerReads
from zklocks._vocabulary import WatchEvent, WatchKind
from zklocks.server import ZooKeeperServer

WAIT = 30.0


def _reader(client: zklocks.Client) -> CallerReads:
    return native_sync_carrier(client)._connection._reader


@pytest.fixture
def base(kazoo: KazooClient) -> str:
    path = f"/test-reads-{uuid.uuid4().hex[:8]}"
    kazoo.create(path)
    return path


class _HoldingProxy(Proxy):
    """A proxy that can hold the server's bytes and let them all go in one write."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.holding = False
        self.held: list[tuple[asyncio.StreamWriter, bytes]] = []

    def let_go(self) -> None:
        self.holding = False
        held, self.held = self.held, []
        sinks = {sink for sink, _ in held}
        for sink in sinks:
            sink.write(b"".join(data for s, data in held if s is sink))

    def _forward(self, sink: asyncio.StreamWriter, data: bytes, *, answers: bool) -> None:
        if answers and self.holding:
            self.held.append((sink, data))
        else:
            sink.write(data)


class _Watching:
    """One-shot data watches armed again and again on one node: each must fire once
    (an arming call lost with the connection is made again; a watch set before a drop
    is restored on the next connection and fires there)."""

    def __init__(self, session: NativeSyncCarrier, kazoo: KazooClient, path: str) -> None:
        self.session, self.kazoo, self.path = session, kazoo, path
        self.events: queue.Queue[WatchEvent] = queue.Queue()
        self.fired = 0
        self.failures: list[str] = []

    def run(self, rounds: int) -> None:
        for n in range(rounds):
            [reply] = self.session.call([GetData(self.path)], None, self.events.put)
            while isinstance(reply, ConnectionLossError):  # a stream torn by an interruption
                [reply] = self.session.call([GetData(self.path)], None, self.events.put)
            if not isinstance(reply, NodeData):
                self.failures.append(f"round {n}: {reply!r}")
                return
            self.kazoo.set(self.path, str(n).encode())
            try:
                event = self.events.get(timeout=WAIT)
            except queue.Empty:
                self.failures.append(f"round {n}: the change was never told")
                return
            if event.kind is not WatchKind.CHANGED:
                self.failures.append(f"round {n}: {event!r}")
            self.fired += 1


def test_a_reply_is_read_by_its_caller_and_the_role_comes_back(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    """With the loop busy only the caller can read its reply; once it has it, the role
    is free and the loop reads again (a notification arriving later reaches its
    watcher with no call running: a caller that kept the role would starve it)."""
    kazoo.create(base + "/w", b"0")
    with zklocks.Client(zk_server.hosts) as client:
        session = native_sync_carrier(client)
        reader = _reader(client)
        told: queue.Queue[WatchEvent] = queue.Queue()
        with loop_blocked(session, WAIT):
            [reply] = session.call([GetData(base + "/w")], None, told.put)
            assert isinstance(reply, NodeData) and reply.data == b"0"
            assert not reader.reading
        kazoo.set(base + "/w", b"1")  # no call runs now: the loop must read this
        event = told.get(timeout=WAIT)
        assert event == WatchEvent(WatchKind.CHANGED, base + "/w")
        assert told.empty()


def test_200_threads_on_200_locks_while_watches_fire(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    threads, cycles, watchers, rounds = 200, 8, 4, 40
    with zklocks.Client(zk_server.hosts) as client:
        session = native_sync_carrier(client)
        watching = []
        for w in range(watchers):
            kazoo.create(f"{base}/watched-{w}", b"")
            watching.append(_Watching(session, kazoo, f"{base}/watched-{w}"))
        done = [0] * threads
        errors: list[BaseException] = []
        start = threading.Barrier(threads + watchers)

        def worker(i: int) -> None:
            try:
                start.wait(WAIT)
                lock = client.lock(f"{base}/locks/{i}")
                for _ in range(cycles):
                    with lock:
                        done[i] += 1
            except BaseException as exc:
                errors.append(exc)

        def watch(w: _Watching) -> None:
            start.wait(WAIT)
            w.run(rounds)

        crew = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        crew += [threading.Thread(target=watch, args=(w,)) for w in watching]
        for thread in crew:
            thread.start()
        for thread in crew:
            thread.join(120)
        assert not [t for t in crew if t.is_alive()], "a waiter is stuck"
        assert not errors, errors[:3]
        assert done == [cycles] * threads
        for w in watching:
            assert not w.failures, w.failures
            assert w.fired == rounds
        time.sleep(0.2)  # a late duplicate would land here
        assert all(w.events.empty() for w in watching), "a notification came twice"
        reader = _reader(client)
        assert not reader.reading and not reader.sink.items


def test_a_reply_and_a_notification_in_one_piece_are_told_in_order(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    base: str,
) -> None:
    """The server's notification and the reply after it reach the caller in one read.
    The caller may not answer its own latch first: the notification goes to its watcher
    on the loop, then the reply (replies in xid order, notifications in zxid order, a
    watch event before the data that follows it)."""

    kazoo.create(base + "/w", b"0")
    with (
        threaded_proxy(zk_server.port, _HoldingProxy) as (proxy, proxy_loop),
        zklocks.Client(proxy.hosts, session_timeout=30.0) as client,
    ):
        session = native_sync_carrier(client)
        reader = _reader(client)
        order: list[str] = []
        session.call([GetData(base + "/w")], None, lambda e: order.append(f"{e.kind.name}"))
        proxy.holding = True
        kazoo.set(base + "/w", b"1")
        until(lambda: len(proxy.held) >= 1)  # the notification, held
        replies: list[Any] = []

        def caller() -> None:
            replies.extend(session.call([GetData(base)], None))
            order.append("reply")

        thread = threading.Thread(target=caller)
        with loop_blocked(session, WAIT):
            thread.start()
            until(lambda: reader.reading)  # the caller waits, holding the role
            until(lambda: len(proxy.held) >= 2)  # its reply, held behind
            proxy_loop.call_soon_threadsafe(proxy.let_go)
            # The loop is blocked: only the caller can have read them, and it
            # left both for the loop (the notification came first).
            until(lambda: len(reader.sink.items) == 2)
            assert not replies and order == []
        thread.join(WAIT)
        assert order == ["CHANGED", "reply"]
        assert len(replies) == 1 and isinstance(replies[0], NodeData)
        assert not reader.reading and not reader.sink.items


def test_a_reset_while_callers_read_fails_what_is_in_flight_and_the_client_goes_on(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    base: str,
) -> None:
    with (
        threaded_proxy(zk_server.port, _HoldingProxy) as (proxy, proxy_loop),
        zklocks.Client(proxy.hosts, session_timeout=30.0) as client,
    ):
        session = native_sync_carrier(client)
        reader = _reader(client)
        proxy.holding = True  # the replies never come: the callers wait, reading
        replies: list[list[Any]] = [[] for _ in range(5)]
        callers = [
            threading.Thread(
                target=lambda i=i: replies[i].extend(
                    session.call([GetData(base), GetData(base)], None)
                )
            )
            for i in range(5)
        ]
        for thread in callers:
            thread.start()
        until(lambda: reader.reading and session._connection._session.in_flight >= 10)
        holder = reader._holder
        assert holder in {t.ident for t in callers}  # a caller, not the loop, reads
        proxy_loop.call_soon_threadsafe(proxy.reset)
        for thread in callers:
            thread.join(WAIT)
        assert not any(t.is_alive() for t in callers)
        for got in replies:
            assert len(got) == 2
            assert all(isinstance(r, ConnectionLossError) for r in got), got
        proxy.holding = False
        [again] = session.call([Create(base + "/after", ephemeral=False)], time.monotonic() + WAIT)
        assert again is not None and not isinstance(again, Exception), again
        assert not reader.reading and not reader.sink.items
    assert kazoo.exists(base + "/after") is not None


class _Interrupted(KeyboardInterrupt):
    """What the test raises in a caller's thread (a Ctrl-C, as the interpreter sees it)."""


def _raise_in(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(_Interrupted)
    )


def test_callers_interrupted_in_the_middle_of_their_reads_lose_nothing(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    """Ctrl-C lands at random points in callers that read for each other and for the
    watches of a thread left alone: every call ends (a reply, a connection loss, or the
    interruption), the role always comes back, and every watch fires exactly once."""
    kazoo.create(base + "/w", b"")
    with zklocks.Client(zk_server.hosts, session_timeout=20.0) as client:
        session = native_sync_carrier(client)
        reader = _reader(client)
        watching = _Watching(session, kazoo, base + "/w")
        stop = threading.Event()
        interrupted = [0]
        answered = [0]
        stray: list[BaseException] = []

        def caller() -> None:
            while not stop.is_set():
                try:
                    replies = session.call([GetData(base), GetData(base + "/w")], None)
                    if all(isinstance(r, NodeData) for r in replies):
                        answered[0] += 1
                    else:  # the stream torn (by another interrupted caller) between them
                        kinds = (NodeData, ConnectionLossError)
                        assert all(isinstance(r, kinds) for r in replies), replies
                except _Interrupted:
                    interrupted[0] += 1
                except BaseException as exc:
                    stray.append(exc)
                    return
            with contextlib.suppress(_Interrupted):  # one raised just as it stopped
                time.sleep(0.05)

        callers = [threading.Thread(target=caller) for _ in range(3)]
        for thread in callers:
            thread.start()
        rng = random.Random(38)
        watcher = threading.Thread(target=watching.run, args=(60,))
        watcher.start()
        deadline = time.monotonic() + 8
        while watcher.is_alive() and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.0005, 0.004))
            ident = rng.choice(callers).ident
            assert ident is not None
            _raise_in(ident)
        stop.set()
        watcher.join(WAIT)
        for thread in callers:
            thread.join(WAIT)
        assert not watcher.is_alive() and not any(t.is_alive() for t in callers)
        assert not stray, stray
        assert not watching.failures, watching.failures
        assert watching.fired == 60
        assert interrupted[0] > 0 and answered[0] > 0
        time.sleep(0.2)
        assert watching.events.empty(), "a notification came twice"
        until(lambda: not reader.reading and not reader.sink.items)
        [reply] = session.call([GetData(base)], time.monotonic() + WAIT)
        assert isinstance(reply, NodeData)


def test_close_while_a_caller_reads_wakes_it_with_client_closed(
    zk_server: ZooKeeperServer, base: str
) -> None:
    """No byte comes, no reset: only the wake-up can end the reading caller's poll."""

    with threaded_proxy(zk_server.port, _HoldingProxy) as (proxy, _proxy_loop):
        client = zklocks.Client(proxy.hosts, session_timeout=30.0)
        client.start()
        session = native_sync_carrier(client)
        reader = _reader(client)
        proxy.holding = True  # neither the reply nor the closeSession's answer comes
        replies: list[Any] = []
        caller = threading.Thread(
            target=lambda: replies.extend(session.call([GetData(base)], None))
        )
        caller.start()
        until(lambda: reader.reading and reader._holder == caller.ident)
        client.stop()
        caller.join(WAIT)
        assert not caller.is_alive()
        assert len(replies) == 1 and isinstance(replies[0], ClientClosedError), replies


def test_without_eventfd_the_loop_reads_and_the_client_works(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the role cannot be set up (no eventfd: a sandbox), the connection stays up
    and the loop reads every reply, as on TLS (dropping it would reconnect for ever)."""

    def refused(*_args: Any) -> int:
        raise OSError("eventfd refused here")

    monkeypatch.setattr("zklocks._transport.caller_reads.os.eventfd", refused)
    kazoo.create(base + "/n", b"x")
    with zklocks.Client(zk_server.hosts) as client:
        session = native_sync_carrier(client)
        with loop_blocked(session, WAIT):  # nobody but the loop can read: the call waits
            answered: queue.Queue[Any] = queue.Queue()
            threading.Thread(
                target=lambda: answered.put(session.call([GetData(base + "/n")], None)),
                daemon=True,
            ).start()
            with pytest.raises(queue.Empty):
                answered.get(timeout=0.3)  # the loop is blocked: no one reads
        [reply] = answered.get(timeout=WAIT)
        assert isinstance(reply, NodeData) and reply.data == b"x"
        assert not _reader(client).reading
        with client.lock(base + "/lock"):
            pass
