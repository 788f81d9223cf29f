"""The drivers' one piece of state: each flow run's inbox of watch events.

A driver sends requests and hands a ``Wait`` the events that fired since the last one,
or ``TIMED_OUT`` at the deadline; both drivers are run here on a session that answers
from a table, so the whole wait step goes through each driver's loop. A ``Cleanup``
runs apart from the caller, who waits for it until its deadline only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Sequence
from typing import Any, TypeVar

import pytest

from helpers import run
from zklocks._asyncio import driver as async_driver
from zklocks._core.ops import TIMED_OUT, Cleanup, Op, Reply, Request, Wait
from zklocks._core.steps import Gone, await_deletion
from zklocks._errors import LockError, LockTimeout
from zklocks._protocol.records import Delete, NodeData, Stat
from zklocks._sync import driver as sync_driver
from zklocks._vocabulary import SessionFacts, Watcher, WatchEvent, WatchKind

A = "/locks/x/lock-a-0000000001"
THERE = NodeData(b"", Stat(czxid=1, ephemeral_owner=9))
GRACE = 0.1  # how long past the call's deadline these tests' cleanups may keep it
T = TypeVar("T")


class TableSession:
    """Answers every getData with THERE and keeps the watchers it was given."""

    def __init__(self) -> None:
        self.watchers: list[Watcher] = []
        self.watch_set = threading.Semaphore(0)  # released once per watch-setting call
        self.facts = SessionFacts(
            clock=time.monotonic,
            session_timeout=lambda: 10.0,
            last_answered_sent=lambda: None,
            connected=lambda: True,
        )

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        if watcher is not None:
            self.watchers.append(watcher)
            self.watch_set.release()
        return [THERE for _ in requests]

    def fire(self, kind: WatchKind, path: str = A) -> None:
        self.watchers[-1](WatchEvent(kind, path))


class AsyncTableSession(TableSession):
    async def call(  # type: ignore[override]
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        return TableSession.call(self, requests, deadline, watcher)


def test_the_sync_driver_hands_the_wait_the_events_fired_from_another_thread() -> None:
    session = TableSession()

    def server() -> None:
        assert session.watch_set.acquire(timeout=10)
        session.fire(WatchKind.CHANGED)  # not a deletion: the watch is set again
        assert session.watch_set.acquire(timeout=10)
        session.fire(WatchKind.DELETED)

    thread = threading.Thread(target=server)
    thread.start()
    flow = await_deletion((A,), time.monotonic() + 10)
    assert sync_driver.run(flow, session) == Gone(A)  # type: ignore[arg-type]
    thread.join()
    assert session.watchers[0] == session.watchers[1]  # one watcher per flow run


def test_the_sync_inbox_gives_every_event_once_and_times_out() -> None:
    inbox = sync_driver.Inbox()
    put = inbox.open()
    put(WatchEvent(WatchKind.CHANGED, A))
    put(WatchEvent(WatchKind.DELETED, A))
    assert inbox.take(None, time.monotonic) == (
        WatchEvent(WatchKind.CHANGED, A),
        WatchEvent(WatchKind.DELETED, A),
    )
    started = time.monotonic()
    assert inbox.take(started + 0.05, time.monotonic) is TIMED_OUT  # nothing new
    assert time.monotonic() - started >= 0.05


def test_the_sync_driver_answers_a_wait_past_its_deadline_without_blocking() -> None:
    def flow() -> Any:
        return (yield Wait(time.monotonic() - 1))

    assert sync_driver.run(flow(), TableSession()) is TIMED_OUT  # type: ignore[arg-type]


def test_the_asyncio_driver_hands_the_wait_the_event_and_times_out() -> None:
    async def scenario() -> None:
        session = AsyncTableSession()

        async def fire_when_watched() -> None:
            while not session.watchers:
                await asyncio.sleep(0)
            session.fire(WatchKind.CHANGED)  # not a deletion: the watch is set again
            while len(session.watchers) < 2:
                await asyncio.sleep(0)
            session.fire(WatchKind.DELETED)

        firing = asyncio.create_task(fire_when_watched())
        flow = await_deletion((A,), time.monotonic() + 10)
        reply = await async_driver.run(flow, session)  # type: ignore[arg-type]
        await firing
        assert reply == Gone(A)
        assert session.watchers[0] == session.watchers[1]  # one watcher per flow run

        started = time.monotonic()
        flow = await_deletion((A,), started + 0.05)
        assert await async_driver.run(flow, AsyncTableSession()) is TIMED_OUT  # type: ignore[arg-type]
        assert time.monotonic() - started >= 0.05

    run(scenario(), 10)


# -- Cleanup: apart from the caller, waited for until its deadline --------------------------


def deleting(node: str) -> Generator[Op, Any, Reply]:
    """A cleanup's steps: one delete."""
    return (yield Delete(node))


def refusing() -> Generator[Op, Any, None]:
    yield Delete(A)
    raise LockError("refused")


def timing_out(steps: Generator[Op, Any, Any], deadline: float) -> Generator[Op, Any, None]:
    """A flow on its way out: its cleanup, then its error."""
    yield Cleanup(steps, deadline)
    raise LockTimeout("timed out")


class HeldSession(TableSession):
    """Answers a delete only once ``answer`` is set: a server that cannot be reached.
    ``in_background`` runs work on a thread, as ``NativeSyncCarrier`` does."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()
        self.deleted: list[str] = []
        self.apart: list[threading.Thread] = []

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        assert self.answer.wait(10)
        self.deleted.extend(r.path for r in requests if isinstance(r, Delete))
        return [None for _ in requests]

    def in_background(self, work: Callable[[], T]) -> concurrent.futures.Future[T]:
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def apart() -> None:
            try:
                done.set_result(work())
            except BaseException as exc:
                done.set_exception(exc)

        self.apart.append(threading.Thread(target=apart))
        self.apart[-1].start()
        return done


def test_the_sync_driver_leaves_a_cleanup_running_at_its_deadline() -> None:
    session = HeldSession()
    began = time.monotonic()
    flow = timing_out(deleting(A), began + GRACE)
    with pytest.raises(LockTimeout):
        sync_driver.run(flow, session)  # type: ignore[arg-type]
    took = time.monotonic() - began
    assert GRACE - 0.01 <= took < GRACE + 0.5, took  # the whole grace, and no more
    assert session.deleted == []  # the delete still waits for an answer ...
    session.answer.set()
    (apart,) = session.apart
    apart.join(10)
    assert not apart.is_alive() and session.deleted == [A]  # ... and gets it, apart


def test_the_sync_driver_raises_what_a_cleanup_in_time_raised() -> None:
    session = HeldSession()
    session.answer.set()
    with pytest.raises(LockError, match="refused"):
        sync_driver.run(timing_out(refusing(), time.monotonic() + 10), session)  # type: ignore[arg-type]
    assert session.deleted == [A]


class AsyncHeldSession:
    """The asyncio twin of ``HeldSession``: ``in_background`` makes a task."""

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.deleted: list[str] = []
        self.apart: list[asyncio.Task[Any]] = []
        self.started = asyncio.Event()  # a cleanup is running apart
        self.facts = TableSession().facts  # the same facts: the monotonic clock

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        await asyncio.wait_for(self.answer.wait(), 10)
        self.deleted.extend(r.path for r in requests if isinstance(r, Delete))
        return [None for _ in requests]

    def in_background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        self.apart.append(asyncio.get_running_loop().create_task(work))
        self.started.set()
        return self.apart[-1]


def test_the_asyncio_driver_leaves_a_cleanup_running_at_its_deadline() -> None:
    async def scenario() -> None:
        session = AsyncHeldSession()
        began = time.monotonic()
        flow = timing_out(deleting(A), began + GRACE)
        with pytest.raises(LockTimeout):
            await async_driver.run(flow, session)  # type: ignore[arg-type]
        took = time.monotonic() - began
        assert GRACE - 0.01 <= took < GRACE + 0.5, took
        (apart,) = session.apart
        assert not apart.done() and session.deleted == []
        session.answer.set()
        await apart
        assert session.deleted == [A]

        session = AsyncHeldSession()
        session.answer.set()
        with pytest.raises(LockError, match="refused"):
            flow = timing_out(refusing(), time.monotonic() + 10)
            await async_driver.run(flow, session)  # type: ignore[arg-type]
        assert session.deleted == [A]

    run(scenario(), 10)


def test_a_cancel_while_awaiting_a_cleanup_ends_the_wait_not_the_cleanup() -> None:
    async def scenario() -> None:
        session = AsyncHeldSession()
        flow = timing_out(deleting(A), time.monotonic() + 10)
        caller = asyncio.create_task(async_driver.run(flow, session))  # type: ignore[arg-type]
        await session.started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        (apart,) = session.apart
        assert not apart.done()
        session.answer.set()
        await apart
        assert session.deleted == [A]

    run(scenario(), 10)
