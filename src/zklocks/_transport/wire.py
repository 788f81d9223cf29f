"""One TCP (or TLS) connection of a ``Connection``: an asyncio protocol that hands on bytes.

A ``Connection`` makes one ``Wire`` per attempt. The wire keeps what is known about that
one socket (its handshake's outcome, whether it was lost, why, and what a peer that is
not ZooKeeper sent first) and calls its owner back for every byte read and once when the
socket goes, so that a thread writing to a duplicate of the socket stops first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from zklocks._protocol.errors import ConnectionLossError
from zklocks._protocol.session import Established, Expired

__all__ = ["Wire"]


class Wire(asyncio.Protocol):
    """One TCP/TLS connection; hands every byte to ``on_data``, and says when it ends."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_data: Callable[[Wire, bytes], None],
        on_end: Callable[[Wire], None],
    ) -> None:
        self._on_data = on_data
        self._on_end = on_end  # called before the socket closes (or as it is lost)
        self.transport: asyncio.Transport | None = None
        self.handshake: asyncio.Future[Established | Expired] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self.foreign: bytes | None = None  # what a peer that is not ZooKeeper sent
        self.error: Exception | None = None  # why it ended, when the transport said

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._on_data(self, data)

    def eof_received(self) -> bool:
        return False  # the server hung up: close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_end(self)
        self.error = exc
        if not self.handshake.done():
            self.handshake.set_exception(ConnectionLossError("connection closed in handshake"))
            self.handshake.exception()  # retrieved: nobody may be waiting any more
        if not self.lost.done():
            self.lost.set_result(None)

    async def hang_up(self) -> None:
        """Close the socket and wait (a second, then abort, then a second) until it is."""
        transport = self.transport
        if transport is None:
            return
        transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.lost), 1.0)
        except TimeoutError:
            transport.abort()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.lost), 1.0)

    def abort(self) -> None:
        self._on_end(self)
        if self.transport is not None:
            self.transport.abort()
