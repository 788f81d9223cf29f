"""What the connection and transport-fault tests share: state and watch recorders, and a
``Connection`` with one coroutine per request (``create``, ``get_data``, ...).

Those conveniences were once part of ``zklocks._transport.connection.Connection``, used by
tests only; the library itself submits request records (``submit``, ``submit_many``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from zklocks._protocol.constants import AddWatchMode
from zklocks._protocol.errors import ClientClosedError
from zklocks._protocol.records import (
    OPEN_ACL_UNSAFE,
    AddWatch,
    Create,
    Created,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    MultiOp,
    NodeData,
    SetData,
    Stat,
    Sync,
    WireACL,
)
from zklocks._transport import connection as _connection
from zklocks._vocabulary import SessionState, Watcher, WatchEvent

WAIT = 15.0  # the longest any awaited condition may take to come true


class Connection(_connection.Connection):
    """The library's connection, with a coroutine per request for tests to call."""

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
        ttl: float | None = None,
        acl: Sequence[WireACL] = OPEN_ACL_UNSAFE,
    ) -> Created:
        """Create a node; ``ttl`` (seconds) makes a TTL node. Returns path and stat."""
        if not acl:
            raise ValueError("a node needs at least one ACL entry")
        ttl_ms = 0 if ttl is None else max(int(ttl * 1000), 1)
        request = Create(
            path, data, ephemeral, sequential, container, acl=tuple(acl), ttl_ms=ttl_ms
        )
        _ = request.mode  # flags that make no create mode: ValueError now, not at a resend
        result: Created = await self.submit(request)
        return result

    async def delete(self, path: str, *, version: int = -1) -> None:
        await self.submit(Delete(path, version=version))

    async def exists(self, path: str, *, watcher: Watcher | None = None) -> Stat | None:
        result: Stat | None = await self.submit(Exists(path), watcher=watcher)
        return result

    async def get_data(self, path: str, *, watcher: Watcher | None = None) -> NodeData:
        result: NodeData = await self.submit(GetData(path), watcher=watcher)
        return result

    async def set_data(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        result: Stat = await self.submit(SetData(path, data, version))
        return result

    async def get_children(self, path: str, *, watcher: Watcher | None = None) -> list[str]:
        names: list[str] = await self.submit(GetChildren(path), watcher=watcher)
        return names

    async def multi(self, *ops: MultiOp) -> list[Any]:
        """Apply ``ops`` atomically; raises the failing op's error (``.results`` has all)."""
        result: list[Any] = await self.submit(Multi(tuple(ops)))
        return result

    async def sync(self, path: str = "/") -> None:
        await self.submit(Sync(path))

    async def add_watch(self, path: str, watcher: Watcher, *, recursive: bool = True) -> None:
        """A persistent watch (ZooKeeper 3.6+); restored after reconnects, ends with the session."""
        mode = AddWatchMode.PERSISTENT_RECURSIVE if recursive else AddWatchMode.PERSISTENT
        await self.submit(AddWatch(path, mode), watcher=watcher)

    async def add_auth(self, scheme: str, credential: bytes) -> None:
        """Authenticate this session (e.g. ``"digest", b"user:password"``); re-sent on reconnect."""
        loop = self._loop_or_running()
        if self._out.wire is None:
            if self._out.closing:
                raise ClientClosedError()
            # Not connected: remember it; the next connection sends it first thing.
            if (scheme, credential) not in self._session.auth:
                self._session.auth.append((scheme, credential))
            return
        future: asyncio.Future[Any] = loop.create_future()
        with self._send_lock:
            self._out.write(self._session.add_auth(scheme, credential, (future, time.monotonic())))
        await future


def transport_of(conn: _connection.Connection) -> asyncio.Transport | None:
    """The transport of the connection's live wire, if one is live (private, for tests)."""
    wire = conn._out.wire
    return None if wire is None else wire.transport


class States:
    """Records a connection's state changes with their times; await one with a deadline."""

    def __init__(self, conn: Connection) -> None:
        self.seen: list[SessionState] = []
        self.times: list[float] = []
        self._changed = asyncio.Event()
        conn.add_state_listener(self._on)

    def _on(self, state: SessionState) -> None:
        self.seen.append(state)
        self.times.append(time.monotonic())
        self._changed.set()

    async def wait(self, state: SessionState, *, after: int = 0, timeout: float = WAIT) -> int:
        """Index in ``seen`` of the first ``state`` at or after index ``after``."""
        deadline = time.monotonic() + timeout
        while state not in self.seen[after:]:
            self._changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {state.name} within {timeout} s; saw {self.seen}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return self.seen.index(state, after)


class Watched:
    """A watcher that records events; await the next one with a deadline."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._queue: asyncio.Queue[WatchEvent] = asyncio.Queue()

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)
        self._queue.put_nowait(event)

    async def next(self, timeout: float = WAIT) -> WatchEvent:
        return await asyncio.wait_for(self._queue.get(), timeout)


async def until(predicate: Callable[[], Any], timeout: float = WAIT, step: float = 0.02) -> None:
    """Poll a condition about the outside world (the server) with a deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(step)
