"""The drivers' one piece of state: each flow run's inbox of watch events.

A driver sends requests and hands a ``Wait`` the events that fired since the last one,
or ``TIMED_OUT`` at the deadline; both drivers are run here on a session that answers
from a table, so the whole wait step goes through each driver's loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from zklocks._asyncio import driver as async_driver
from zklocks._core.ops import TIMED_OUT, NodeData, Reply, Request, Stat, Wait
from zklocks._core.steps import Gone, await_deletion
from zklocks._sync import driver as sync_driver
from zklocks._vocabulary import SessionFacts, Watcher, WatchEvent, WatchKind

A = "/locks/x/lock-a-0000000001"
THERE = NodeData(b"", Stat(czxid=1, ephemeral_owner=9))


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

    asyncio.run(asyncio.wait_for(scenario(), 10))
