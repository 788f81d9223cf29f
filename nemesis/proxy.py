"""A TCP proxy for fault tests: reset or stall the wire between a client and ZooKeeper.

Used by the transport and lock fault tests (tests/integration) and, through
``nemesis.links``, by the nemesis runner for the links between ensemble members.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct


class Proxy:
    """A TCP proxy on the test's loop: ``reset()`` sends RSTs, ``stall()`` holds all bytes.

    While stalled, new connections are accepted but nothing is forwarded either way, so a
    client's handshake hangs just like its requests: a network that silently eats traffic.
    ``swallow_next = N`` makes the next N new connections black holes for good (accepted,
    read and never answered: a server still starting, or a frozen one), while the
    connections after them flow.
    """

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.port = 0
        self.accepted = 0
        self.swallow_next = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.AbstractServer | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.unstall()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def stall(self) -> None:
        self._flowing.clear()

    def unstall(self) -> None:
        self._flowing.set()

    def reset(self) -> None:
        """Abort every proxied connection with a TCP reset."""
        for writer in list(self._writers):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.swallow_next > 0:
            self.swallow_next -= 1
            self._writers.add(writer)
            with contextlib.suppress(OSError, ConnectionError):
                while await reader.read(65536):
                    pass  # read and drop: the client's handshake is never answered
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        pumps = [
            asyncio.ensure_future(self._pump(reader, up_writer, writer)),
            asyncio.ensure_future(self._pump(up_reader, writer, up_writer, answers=True)),
        ]
        self._tasks.update(pumps)
        for pump in pumps:
            pump.add_done_callback(self._tasks.discard)

    async def _first_answer(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Before the server's bytes flow to the client: a subclass may rewrite the first
        answer (tests/broken_server.py adds a reply nobody asked for). Nothing here."""

    def _forward(self, sink: asyncio.StreamWriter, data: bytes, *, answers: bool) -> None:
        """Pass bytes on (``answers``: the server's, to the client): a subclass may hold
        them (tests/integration/test_caller_reads.py lets a reply and a notification go
        in one write). Here: written at once."""
        sink.write(data)

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        other: asyncio.StreamWriter,
        *,
        answers: bool = False,
    ) -> None:
        try:
            if answers:
                await self._first_answer(source, sink)
            while True:
                data = await source.read(65536)
                if not data:
                    break
                await self._flowing.wait()
                if sink.transport.is_closing():
                    break
                self._forward(sink, data, answers=answers)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (sink, other):
                self._writers.discard(w)
                w.transport.abort()
