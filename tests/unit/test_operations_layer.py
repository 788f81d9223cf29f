"""The operations layer (``zklocks._frontend.operations``): one written rule for both
clients, checked on the simulator's model through the public classes."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

import zklocks
from zklocks._asyncio import driver as async_driver
from zklocks._protocol.records import GetChildren
from zklocks._sync import driver as sync_driver
from zklocks.sim import SimServer, async_session_factory, session_factory


def _requests_before_choosing_a_session() -> Generator[Any, Any, None]:
    yield GetChildren("/anywhere")


def test_an_operation_must_choose_its_session_before_a_request() -> None:
    with pytest.raises(RuntimeError, match="chose its session"):
        sync_driver.run(_requests_before_choosing_a_session())
    with pytest.raises(RuntimeError, match="chose its session"):
        asyncio.run(async_driver.run(_requests_before_choosing_a_session()))


def test_both_clients_refuse_security_options_with_a_session_factory() -> None:
    server = SimServer()
    with pytest.raises(zklocks.InvalidArgument, match="session_factory"):
        zklocks.Client(
            "sim:a",
            session_factory=session_factory(server),
            acl="creator",
            auth=[("digest", "u:p")],
        )
    with pytest.raises(zklocks.InvalidArgument, match="session_factory"):
        zklocks.AsyncClient(
            "sim:a",
            session_factory=async_session_factory(server),
            acl="creator",
            auth=[("digest", "u:p")],
        )


def test_multi_lock_timeout_releases_what_was_taken_in_both_clients() -> None:
    """One deadline for all the parts, and nothing left behind on the way out."""
    server = SimServer()
    with zklocks.Client("sim:a", session_factory=session_factory(server)) as holder:
        blocker = holder.lock("/m/b")
        blocker.acquire()
        with zklocks.Client("sim:a", session_factory=session_factory(server)) as client:
            multi = client.multi_lock([client.lock("/m/a"), client.lock("/m/b")])
            with pytest.raises(zklocks.LockTimeout):
                multi.acquire(timeout=0.2)
            assert not multi.held and server.children("/m/a") == []

        async def scenario() -> None:
            factory = async_session_factory(server)
            async with zklocks.AsyncClient("sim:a", session_factory=factory) as client:
                multi = client.multi_lock([client.lock("/m/a"), client.lock("/m/b")])
                with pytest.raises(zklocks.LockTimeout):
                    await multi.acquire(timeout=0.2)
                assert not multi.held and server.children("/m/a") == []

        asyncio.run(scenario())
        assert len(server.children("/m/b")) == 1  # the holder's node only
        blocker.release()


def test_observe_shows_nobody_then_ends_after_a_quiet_timeout() -> None:
    server = SimServer()

    async def scenario() -> list[object]:
        factory = async_session_factory(server)
        client = await zklocks.AsyncClient("sim:a", session_factory=factory).start()
        election = client.election("/e")
        seen: list[object] = []
        async for leader in election.observe(timeout=0.2):
            seen.append(leader)
        await client.stop()
        return seen

    assert asyncio.run(scenario()) == [None]  # nobody leads, then no change in time
