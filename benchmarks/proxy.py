"""A loopback TCP proxy that delays and counts: how round trips and requests are measured.

Every chunk a client sends reaches the server ``delay`` seconds after it arrived; the
chunks keep their order and overlap in flight, so requests sent back to back (pipelined)
share one delay while a request sent after a reply pays a new one. With a delay far
above loopback latency, a cycle's time divided by the delay is its number of round
trips, whatever the library does inside.

With ``parse="zookeeper"`` the proxy also names each request the client sends (pings and
the connect are counted apart), so a report can say *which* requests a cycle costs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
from typing import Any

from benchmarks.wire import RequestParser


class DelayProxy:
    """Listens on 127.0.0.1:<port> and forwards to ``upstream`` (host, port)."""

    def __init__(self, upstream: tuple[str, int], *, parse: str | None = None) -> None:
        self.upstream = upstream
        self.parse = parse
        self.delay = 0.0
        self.port = 0
        self._counts: collections.Counter[str] = collections.Counter()
        self._mutex = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> DelayProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def counts(self) -> collections.Counter[str]:
        with self._mutex:
            return collections.Counter(self._counts)

    def reset_counts(self) -> None:
        with self._mutex:
            self._counts.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        parser = RequestParser() if self.parse == "zookeeper" else None
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def client_to_queue() -> None:
            while data := await reader.read(65536):
                if parser is not None:
                    names = parser.feed(data)
                    with self._mutex:
                        self._counts.update(names)
                await queue.put((time.monotonic() + self.delay, data))
            await queue.put(None)

        async def queue_to_server() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def server_to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        try:
            await asyncio.gather(client_to_queue(), queue_to_server(), server_to_client())
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()
            self._tasks.discard(task)
