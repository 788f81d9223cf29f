"""What ``AsyncClient`` runs on: a session that carries requests on the caller's loop.

``AsyncCarrier`` is what the asyncio driver and the lock classes use; ``StartableCarrier``
adds what the client itself does with it (start, close, the state, a fork). The default
is ``NativeAsyncSession``, our own connection (made by ``native_factory``);
``AsyncClient(session_factory=...)`` replaces it (``zklocks.sim.async_session_factory``
runs a client on the simulator), as ``Client(session_factory=...)`` does for the sync
client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from zklocks._asyncio.session import AsyncSession
from zklocks._core.errors import InvalidArgument
from zklocks._core.ops import Reply, Request
from zklocks._frontend.lockmaker import SessionFactory
from zklocks._frontend.options import NO_SECURITY, ClientOptions, Security
from zklocks._protocol.errors import ConnectionFailedError
from zklocks._transport import forks
from zklocks._transport.adapter import connection_failed
from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionFacts, SessionListener, SessionState, Watcher

T = TypeVar("T")


class AsyncCarrier(Protocol):
    """A session as the asyncio driver sees it; every method runs on the client's loop."""

    facts: SessionFacts

    @property
    def closed(self) -> bool: ...

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        """Send ``requests`` back to back and await every reply (``TIMED_OUT`` for each
        when they cannot be sent before ``deadline``)."""
        ...

    def watch_node(self, path: str, watcher: Watcher) -> None:
        """Set a getData watch without awaiting it; a node already gone is DELETED."""
        ...

    def in_background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a task apart from its caller; ``close()`` awaits it."""
        ...

    def session_id(self) -> int: ...


class StartableCarrier(AsyncCarrier, Protocol):
    """What ``AsyncClient`` itself does with its session."""

    @property
    def state(self) -> SessionState: ...

    async def start(self) -> None:
        """Connect and make the session (``ConnectionFailed``, ``InvalidArgument``)."""
        ...

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]: ...

    async def close(self) -> None:
        """End the session, then await what runs apart (cleanups)."""
        ...

    def forget_after_fork(self) -> None:
        """In a forked child: let the parent's session go without a byte sent."""
        ...


class NativeAsyncSession(AsyncSession):
    """Our own connection to ZooKeeper, on the loop the client is started on."""

    def __init__(self, connection: Connection, connect_timeout: float) -> None:
        super().__init__(connection)
        self._connect_timeout = connect_timeout

    @property
    def state(self) -> SessionState:
        return self.connection.state

    async def start(self) -> None:
        # ``connect_timeout`` bounds the whole start; each attempt gets a share of it.
        connection = self.connection
        try:
            await connection.start(self._connect_timeout)
        except ConnectionFailedError as exc:
            raise connection_failed(exc) from exc
        if connection.chroot_exists is False:
            await connection.close()
            raise InvalidArgument(
                f"chroot {connection.chroot} does not exist on the server; "
                "create it first, or remove it from the hosts string"
            )
        self.mark_connected()

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]:
        return self.connection.add_state_listener(fn)

    async def close(self) -> None:
        self.closed = True
        await self.connection.close()
        await self.finish_background()  # cleanups apart from their callers

    def forget_after_fork(self) -> None:
        self.closed = True
        self.connection.forget_after_fork()
        forks.keep(self.connection)


def native_factory(security: Security = NO_SECURITY) -> SessionFactory[StartableCarrier]:
    """``AsyncClient``'s default: sessions on our own connection, with the security
    options."""

    def make(options: ClientOptions) -> NativeAsyncSession:
        return NativeAsyncSession(security.connection(options), options.connect_timeout)

    return make
