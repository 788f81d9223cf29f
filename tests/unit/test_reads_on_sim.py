"""The public reads run by both clients on the simulator's in-memory ZooKeeper: the same
flows (``zklocks._core.reads``) as on a real server, so the answers and the one-shot
watch are the same whatever carries them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import zklocks
from zklocks.sim import SimServer, async_session_factory, session_factory


def _seeded() -> tuple[SimServer, Any]:
    """A server with ``/cfg/a`` (b"1"), and the kazoo-like inspector that made it (the
    simulator has no multi, so the clients' transactions cannot write there)."""
    server = SimServer()
    inspector = server.inspector()
    inspector.create("/cfg/a", b"1", makepath=True)
    return server, inspector


def test_the_sync_client_reads_and_its_watch_fires_once_on_the_simulator() -> None:
    server, inspector = _seeded()
    events: list[zklocks.WatchedEvent] = []
    fired = threading.Event()

    def watch(event: zklocks.WatchedEvent) -> None:
        events.append(event)
        fired.set()

    with zklocks.Client("sim:a", session_factory=session_factory(server)) as client:
        data, stat = client.get("/cfg/a")
        assert (data, stat.version) == (b"1", 0)
        assert client.get_children("/cfg", watch=watch) == ["a"]
        assert client.exists("/cfg/b") is None
        with pytest.raises(zklocks.NoNode):
            client.get("/cfg/b")
        inspector.create("/cfg/b")
        inspector.create("/cfg/c")
        assert fired.wait(10)
        assert sorted(client.get_children("/cfg")) == ["a", "b", "c"]
    # stop() joined the watch's threads: a second event would have been told by now
    assert events == [zklocks.WatchedEvent(zklocks.WatchKind.CHILD, "/cfg")]


def test_the_async_client_reads_the_same_on_the_simulator() -> None:
    server, inspector = _seeded()

    async def scenario() -> list[zklocks.WatchedEvent]:
        events: list[zklocks.WatchedEvent] = []
        factory = async_session_factory(server)
        async with zklocks.AsyncClient("sim:a", session_factory=factory) as client:
            assert (await client.get("/cfg/a"))[0] == b"1"
            assert await client.exists("/cfg/b", watch=events.append) is None
            assert await client.get_children("/cfg") == ["a"]
            inspector.create("/cfg/b")
            inspector.delete("/cfg/b")
            assert await client.get_children("/cfg") == ["a"]  # a round trip after both
        return events

    assert asyncio.run(scenario()) == [zklocks.WatchedEvent(zklocks.WatchKind.CREATED, "/cfg/b")]
