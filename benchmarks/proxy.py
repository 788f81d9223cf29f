"""A loopback TCP proxy that delays and counts: how round trips and requests are measured.

Every chunk a client sends reaches the server ``delay`` seconds after it arrived; the
chunks keep their order and overlap in flight, so requests sent back to back (pipelined)
share one delay while a request sent after a reply pays a new one. With a delay far
above loopback latency, a cycle's time divided by the delay is its number of round
trips, whatever the library does inside.

By default only the client's direction is delayed (the round-trip count above needs no
more). With ``both_ways=True`` the server's replies wait ``delay`` too, so a round trip
through the proxy costs ``2 * delay``: the ensemble scenario sets ``delay`` to half the
round trip it wants, on every client and member link. Proxies may share one
:class:`LoopThread`; its loop waits with ``select`` (microsecond timeouts), because
``epoll`` rounds every timer up to the next millisecond and a 0.1 ms delay would become 1,
and it learns how late its timers fire on a busy machine and aims that much early.
:class:`ProxyProcess` runs such proxies in a process of their own, so the measuring
process's own Python (the GIL) never holds a link's bytes back.

With ``parse="zookeeper"`` the proxy also names each request the client sends (pings and
the connect are counted apart), so a report can say *which* requests a cycle costs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import multiprocessing
import multiprocessing.connection as mpc
import selectors
import threading
import time
from typing import Any

from benchmarks.wire import RequestParser


class LoopThread:
    """An event loop on a thread of its own, with sub-millisecond timers, for proxies to share."""

    def __init__(self) -> None:
        self.loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
        self.lateness = 0.0  # how late a timer fires, moving average (seconds)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    async def sleep_until(self, due: float, delay: float) -> None:
        """Sleep until ``due``, aiming early by the timers' usual lateness (never by more
        than half the ``delay``: a chunk always waits at least that)."""
        aim = due - min(self.lateness, delay / 2)
        wait = aim - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
            late = time.monotonic() - aim
            self.lateness += (min(late, 0.005) - self.lateness) / 16
        else:  # no timer to learn from: forget a spike slowly rather than keep it
            self.lateness -= self.lateness / 64

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class DelayProxy:
    """Listens on 127.0.0.1:<port> and forwards to ``upstream`` (host, port)."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        parse: str | None = None,
        both_ways: bool = False,
        shared: LoopThread | None = None,
    ) -> None:
        self.upstream = upstream
        self.parse = parse
        self.both_ways = both_ways
        self.delay = 0.0
        self.port = 0
        self._counts: collections.Counter[str] = collections.Counter()
        self._mutex = threading.Lock()
        self._shared = shared
        self._loop = shared.loop if shared is not None else asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> DelayProxy:
        if self._shared is None:
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
        if self._shared is None:
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
        queue: asyncio.Queue[tuple[float, float, bytes] | None] = asyncio.Queue()

        async def client_to_queue() -> None:
            while data := await reader.read(65536):
                if parser is not None:
                    names = parser.feed(data)
                    with self._mutex:
                        self._counts.update(names)
                await queue.put((time.monotonic(), self.delay, data))
            await queue.put(None)

        try:
            await asyncio.gather(
                client_to_queue(),
                _deliver(queue, up_writer, self._shared),
                self._replies(up_reader, writer),
            )
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()
            self._tasks.discard(task)

    async def _replies(self, up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The server's bytes back to the client: at once, or ``delay`` later if both ways."""
        if not self.both_ways:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()
            return
        queue: asyncio.Queue[tuple[float, float, bytes] | None] = asyncio.Queue()

        async def server_to_queue() -> None:
            while data := await up_reader.read(65536):
                await queue.put((time.monotonic(), self.delay, data))
            await queue.put(None)

        await asyncio.gather(server_to_queue(), _deliver(queue, writer, self._shared))


async def _deliver(
    queue: asyncio.Queue[tuple[float, float, bytes] | None],
    writer: asyncio.StreamWriter,
    timer: LoopThread | None,
) -> None:
    """Write each chunk when it is due, in order; chunks in flight overlap their delays."""
    while (item := await queue.get()) is not None:
        arrived, delay, data = item
        due = arrived + delay
        if timer is not None:
            await timer.sleep_until(due, delay)
        elif (wait := due - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        writer.write(data)
        await writer.drain()
    writer.close()


class ProxyProcess:
    """Proxies delaying both ways, on one :class:`LoopThread` in a child process.

    ``add(port)`` starts one to 127.0.0.1:``port`` and returns the port to dial instead;
    ``set_delay`` sets every proxy's one-way delay. The child's main thread only waits
    for these commands, so the loop thread has the child's interpreter to itself."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_proxies, args=(child,), daemon=True)
        self._process.start()
        child.close()

    def _ask(self, command: str, argument: Any = None) -> Any:
        self._conn.send((command, argument))
        if not self._conn.poll(30):
            raise TimeoutError(f"the proxy process did not answer {command!r}")
        return self._conn.recv()

    def add(self, port: int) -> int:
        return int(self._ask("add", port))

    def set_delay(self, seconds: float) -> None:
        self._ask("delay", seconds)

    def lateness(self) -> float:
        """How late the proxies' timers fire lately (before aiming early), seconds."""
        return float(self._ask("lateness"))

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, TimeoutError):
            self._ask("stop")
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)


def _serve_proxies(conn: mpc.Connection) -> None:
    shared = LoopThread()
    proxies: list[DelayProxy] = []
    while True:
        command, argument = conn.recv()
        if command == "add":
            proxy = DelayProxy(("127.0.0.1", argument), both_ways=True, shared=shared).start()
            proxies.append(proxy)
            conn.send(proxy.port)
        elif command == "delay":
            for proxy in proxies:
                proxy.delay = argument
            conn.send(None)
        elif command == "lateness":
            conn.send(shared.lateness)
        elif command == "stop":
            for proxy in proxies:
                proxy.stop()
            shared.stop()
            conn.send(None)
            return
