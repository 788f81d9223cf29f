"""What goes out to the server: the live wire, the requests waiting for one, the writes.

* **Pipelining.** ``submit()`` encodes the request and writes it at once; its future is
  resolved when the reply arrives (ZooKeeper answers in order). On the loop's thread.
* **Waiting.** While no wire is live, requests wait in a queue; the next connection
  sends them once the session is restored (``flush``), or they fail with the session.
* **One write for many.** ``submit_many()`` sends a batch (a lock's ``create`` and
  ``getChildren``) in one write: on loopback a send costs more than encoding. And the
  requests one turn of the event loop submits go out in one write at its end
  (``write_soon``): a reply read by the loop often carries the replies of a hundred
  tasks, each of which submits its next request in the same turn, and a send (a
  syscall that also runs the receiver's side of loopback TCP) costs more than all the
  Python of a request. Every other write (``write``) sends what waits first, so the
  wire's order stays the order the frames were made in.
* **Other threads.** ``submit_from_thread()`` lets a blocking caller write its own
  requests through the ``DirectWriter`` (see ``direct.py``) while the loop reads.
* **Metrics.** ``count_with(meter)`` (a seam the front end sets) says where to count
  requests: ``meter()`` is asked at each, so metrics enabled later count too.

Every frame is made and written holding the send lock, so the wire's order is the
order of the session's in-flight FIFO. The connection changes this part only through its
methods (``attach``/``detach`` a wire, ``close``, ``fail_waiting``): the fields it reads
(``wire``, ``closing``) are read-only.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from zklocks._protocol.errors import ClientClosedError, ZooKeeperError
from zklocks._protocol.session import Session
from zklocks._transport.direct import DirectWriter
from zklocks._transport.liveness import Liveness
from zklocks._transport.wire import Wire
from zklocks._vocabulary import Watcher

__all__ = ["Outgoing", "RequestMeter"]


class RequestMeter(Protocol):
    """Counts requests by type (``zklocks.metrics`` implements it)."""

    def request(self, request: object) -> None: ...


class _Ends(Protocol):
    def stop(self, wire: Wire) -> None: ...


def _no_meter() -> RequestMeter | None:
    return None


class Outgoing:
    """The live wire of a connection and every write to it."""

    def __init__(
        self,
        session: Session,
        lock: threading.RLock,
        liveness: Liveness,
        loop: Callable[[], asyncio.AbstractEventLoop],
    ) -> None:
        self._session = session
        self.lock = lock
        self._liveness = liveness
        self._loop = loop
        self._wire: Wire | None = None  # the established connection, if any
        self.queue: deque[tuple[object, asyncio.Future[Any], Watcher | None]] = deque()
        self._closing = False  # no request is sent from now on
        self._meter: Callable[[], RequestMeter | None] = _no_meter
        self.writer = DirectWriter(lock, loop, lambda: self._wire, liveness.sent)
        self.reader: _Ends | None = None  # the callers' reader role (the connection's)
        self._corked: list[bytes] = []  # made this turn of the loop, for ``_corked_wire``
        self._corked_wire: Wire | None = None

    @property
    def wire(self) -> Wire | None:  # the wire a session is live on, if any
        return self._wire

    @property
    def closing(self) -> bool:  # after close(): every request fails
        return self._closing

    def attach(self, wire: Wire) -> None:
        """A session is live on ``wire``: requests go out on it from now on."""
        self._wire = wire

    def detach(self, wire: Wire | None = None) -> bool:
        """The live wire (or only ``wire``) is gone: requests queue. True if detached."""
        if self._wire is None or (wire is not None and wire is not self._wire):
            return False
        self._wire = None
        return True

    def wire_ended(self, wire: Wire) -> None:
        """``wire`` is ending (on the loop): callers neither write to it nor read it."""
        self.writer.stop(wire)
        if self.reader is not None:
            self.reader.stop(wire)

    def count_with(self, meter: Callable[[], RequestMeter | None]) -> None:
        self._meter = meter

    def close(self) -> bool:
        """Send nothing from now on. False if it was closing already."""
        was, self._closing = self._closing, True
        return not was

    def fail_waiting(self, error: ZooKeeperError) -> None:
        """Fail (and empty) the requests waiting for a wire, each with a copy of ``error``."""
        queue = self.queue
        while queue:
            _request, future, _watcher = queue.popleft()
            if not future.done():
                future.set_exception(type(error)(str(error)))

    def submit(
        self, request: object, watcher: Watcher | None, token: Any = None
    ) -> asyncio.Future[Any]:
        """Send ``request`` (or queue it while no wire is live); ``token`` (a future, or
        anything with its ``done``/``set_result``/``set_exception``) gets the reply, a
        new future if None. Returns the token."""
        future: Any = self._loop().create_future() if token is None else token
        if self.closing:
            future.set_exception(ClientClosedError())
        elif self.wire is not None and not self.queue:
            self.send(request, future, watcher)
        else:
            self.queue.append((request, future, watcher))
        return future  # type: ignore[no-any-return]

    def submit_many(
        self,
        requests: Sequence[object],
        watcher: Watcher | None,
        tokens: Sequence[Any] | None = None,
    ) -> list[asyncio.Future[Any]]:
        """``submit`` each, their frames in one write; ``tokens``: as ``submit``'s."""
        if tokens is None:
            loop = self._loop()
            tokens = [loop.create_future() for _ in requests]
        if self.wire is None or self.queue:
            return [self.submit(r, watcher, t) for r, t in zip(requests, tokens, strict=True)]
        now = time.monotonic()
        frames: list[bytes] = []
        meter = self._meter()
        with self.lock:
            for request, token in zip(requests, tokens, strict=True):
                if meter is not None:
                    meter.request(request)
                try:
                    frames.append(self._session.request(request, (token, now), watcher))
                except (ZooKeeperError, TypeError, ValueError) as exc:
                    token.set_exception(exc)
            if frames:
                self.write_soon(b"".join(frames))
        return list(tokens)

    def send(self, request: object, future: asyncio.Future[Any], watcher: Watcher | None) -> None:
        meter = self._meter()
        if meter is not None:
            meter.request(request)
        with self.lock:
            try:
                frame = self._session.request(request, (future, time.monotonic()), watcher)
            except (ZooKeeperError, TypeError, ValueError) as exc:
                future.set_exception(exc)
                return
            self.write_soon(frame)

    def write(self, frame: bytes) -> None:
        """Write on the loop thread, holding the lock (with the frame's making), after
        what this turn of the loop made before it."""
        self._liveness.sent(time.monotonic())
        if self._corked and self._corked_wire is self.wire:
            self._corked.append(frame)
            self._uncork()
        else:
            self._uncork()  # drops what waited for a wire that has ended meanwhile
            self._write(frame)

    def write_soon(self, frame: bytes) -> None:
        """Write at the end of this turn of the loop, with every frame made until then
        (on the loop thread, holding the lock)."""
        self._liveness.sent(time.monotonic())
        if not self._corked:
            self._corked_wire = self.wire
            self._loop().call_soon(self._uncork_held)
        self._corked.append(frame)

    def _uncork_held(self) -> None:
        with self.lock:
            self._uncork()

    def _uncork(self) -> None:
        frames, wire = self._corked, self._corked_wire
        if not frames:
            return
        self._corked, self._corked_wire = [], None
        if wire is self.wire:  # else that wire ended: its requests fail with it
            self._write(b"".join(frames) if len(frames) > 1 else frames[0])

    def _write(self, frame: bytes) -> None:
        wire = self.wire
        transport = None if wire is None else wire.transport
        assert transport is not None
        if self.writer.hold(frame, wire):
            return  # after what the writing caller is sending
        transport.write(frame)

    def flush(self) -> None:
        """A session is live on ``wire``: send what waited for it, in order."""
        queue = self.queue
        while queue:
            request, future, watcher = queue.popleft()
            if not future.done():
                self.send(request, future, watcher)

    def submit_from_thread(
        self, requests: Sequence[object], tokens: Sequence[Any], watcher: Watcher | None
    ) -> bool:
        writer = self.writer
        with self.lock:
            sock = writer.socket
            wire = self.wire
            transport = None if wire is None else wire.transport
            if (
                sock is None
                or transport is None
                or self.closing
                or self.queue
                or self._corked  # made before ours: they go first, from the loop
                or writer.rest is not None
                or not self._session.connected
                or transport.get_write_buffer_size()
            ):
                return False
            try:
                now = time.monotonic()
                meter = self._meter()
                frames: list[bytes] = []
                for request, token in zip(requests, tokens, strict=True):
                    if meter is not None:
                        meter.request(request)
                    try:
                        frames.append(self._session.request(request, (token, now), watcher))
                    except (ZooKeeperError, TypeError, ValueError) as exc:
                        token.set_exception(exc)
                if not frames:
                    return True
                self._liveness.sent(now)
                if not writer.claim(frames):
                    return True  # the writing caller sends ours after its own
            except BaseException:
                writer.broken(wire, writer=False)
                raise
        try:
            writer.send(sock, b"".join(frames) if len(frames) > 1 else frames[0], wire)
        except BaseException:
            writer.broken(wire, writer=True)
            raise
        return True
