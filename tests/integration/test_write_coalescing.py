"""The requests made in one turn of the event loop leave in one write (``outgoing.py``).

A reply the loop reads often answers a hundred tasks, each of which sends its next
request in the same turn; one send for all of them is most of the asyncio client's
speed-up under load. These tests pin the two halves: the requests of one turn go out
together, and a write that cannot wait (a ping, a close) still leaves after them, so
the wire's order stays the order the session numbered them in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

import zklocks
from zklocks._protocol.records import Sync
from zklocks.server import ZooKeeperServer

TASKS = 50


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Every write handed to an asyncio socket transport while the test runs."""
    from asyncio import selector_events

    seen: list[bytes] = []
    real = selector_events._SelectorSocketTransport.write

    def write(self: Any, data: Any) -> None:
        seen.append(bytes(data))
        real(self, data)

    monkeypatch.setattr(selector_events._SelectorSocketTransport, "write", write)
    yield seen


def _outgoing(client: zklocks.AsyncClient) -> Any:
    return client._session_or_raise().connection._out


def test_the_requests_of_one_turn_leave_in_one_write(
    zk_server: ZooKeeperServer, writes: list[bytes]
) -> None:
    async def main() -> tuple[list[Any], int]:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            before = len(writes)
            stats = await asyncio.gather(*(client.exists("/") for _ in range(TASKS)))
            return stats, len(writes) - before

    stats, sent = asyncio.run(main())
    assert all(stat is not None for stat in stats)  # each task got its own reply
    assert sent == 1, f"{TASKS} requests of one turn went out in {sent} writes"


def test_a_write_that_cannot_wait_leaves_after_the_turns_requests(
    zk_server: ZooKeeperServer, writes: list[bytes]
) -> None:
    """A renewing sync (the lease rule's, written at once as a ping is) made in the
    same turn after the tasks' requests: sent before them, its reply would come first
    and break the session's reply order."""

    async def main() -> tuple[list[Any], bool, bool]:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            out = _outgoing(client)
            session = out._session
            loop = asyncio.get_running_loop()
            synced: asyncio.Future[Any] = loop.create_future()
            tasks = [asyncio.ensure_future(client.exists("/")) for _ in range(TASKS)]

            def sync_now() -> None:  # in the tasks' turn, after their requests
                with out.lock:
                    out.write(session.request(Sync("/"), (synced, time.monotonic()), None))

            loop.call_soon(sync_now)
            stats = await asyncio.gather(*tasks)
            await asyncio.wait_for(synced, 10)
            still = await client.exists("/")  # the session took no harm
            return stats, synced.exception() is None, still is not None

    stats, synced_ok, still_ok = asyncio.run(main())
    assert all(stat is not None for stat in stats)
    assert synced_ok and still_ok
