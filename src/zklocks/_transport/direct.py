"""The sync client's write path: callers' threads write their own requests.

Theory of operation
-------------------
A blocking caller (``Client``) would otherwise hand every request to the loop thread
and wait for it to be written: a thread switch per request. Instead, on an established
plain-TCP connection, the caller writes to a *duplicate* of the socket while the loop
thread goes on reading every reply.

* **One lock, one order.** Every write and every change to the session's in-flight FIFO
  holds the connection's send lock (handed in), so the wire's order is the FIFO's.
* **One writer at a time, outside the lock.** A caller claims the writer flag under the
  lock and sends outside it; callers (and the loop) that come meanwhile append to an
  outbox that the writing caller sends next, so nobody waits on another's syscall.
* **A partial write** leaves its rest here; the loop writes it before anything else.
* **No write to a reused descriptor.** The duplicate is closed under the lock before the
  transport's own socket; when a caller is in its send, that caller closes it after.
* **A torn stream** (Ctrl-C between numbering requests and sending them, or a failed
  send) aborts the connection on the loop: every request in flight then fails with
  ``ConnectionLossError``, as on any drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from zklocks._transport.wire import Wire

__all__ = ["DirectWriter"]

log = logging.getLogger("zklocks.connection")


class DirectWriter:
    """The duplicated socket, the outbox and the writer flag of one connection."""

    def __init__(
        self,
        lock: threading.RLock,
        loop: Callable[[], asyncio.AbstractEventLoop],
        live: Callable[[], Wire | None],
        sent: Callable[[float], None],
    ) -> None:
        self.lock = lock  # the connection's send lock
        self._loop = loop  # the connection's loop (callers post to it)
        self._live = live  # the established wire, if any
        self._sent = sent  # tells the connection when bytes last went out
        self.socket: socket.socket | None = None  # a dup of the live plain-TCP socket
        self._wire: Wire | None = None  # the wire ``socket`` duplicates
        # The rest of a caller's partial write: the loop writes it before anything else.
        self.rest: bytes | None = None
        # Frames made while another caller is writing: that writer sends them too, in
        # order, so callers never wait on each other's send syscall.
        self._outbox: list[bytes] = []
        self.writing = False  # a caller is sending to ``socket`` outside the lock
        self._retired: list[socket.socket] = []  # stopped while written to: close later

    def sockets(self) -> list[socket.socket]:
        """Every socket this writer has open (for a forked child to let go of)."""
        return [sock for sock in (self.socket, *self._retired) if sock is not None]

    # ------------------------------------------------------------ on the loop

    def start(self, wire: Wire, host: str | None) -> None:
        """Let callers' threads write to ``wire`` through a duplicate of its socket:
        closed under the lock before the transport's own, so a thread never writes to a
        descriptor number the loop has closed and reused."""
        assert wire.transport is not None
        raw = wire.transport.get_extra_info("socket")
        if raw is None:
            return
        # Dead at birth: bytes read with the handshake's answer broke the protocol (a
        # reply nobody asked for), and the wire was aborted, its socket closed, before
        # it got here. That, or any failure to duplicate the socket, is a dropped
        # connection like any other: the supervisor sees ``lost`` and reconnects.
        if wire.transport.is_closing():
            return
        try:
            direct = socket.socket(fileno=os.dup(raw.fileno()))
        except Exception:
            log.warning(
                "cannot write to %s from callers' threads; dropping the connection",
                host,
                exc_info=True,
            )
            wire.abort()
            return
        with self.lock:
            self._stop_locked()
            self.socket, self._wire = direct, wire

    def stop(self, wire: Wire) -> None:
        """``wire`` is ending: no caller writes to it from now on."""
        with self.lock:
            if self._wire is wire:
                self._stop_locked()

    def hold(self, frame: bytes, wire: Wire | None) -> bool:
        """Holding the lock, before the loop writes ``frame`` to ``wire``: True when a
        caller is writing to it (the frame joins its outbox, to go after what it sends);
        else any rest of a caller's partial write is written first."""
        if self.writing and self._wire is wire:
            self._outbox.append(frame)
            return True
        if self.rest is not None:
            self.write_rest(wire)
        return False

    def write_rest(self, wire: Wire | None) -> None:
        """On the loop: the rest of a caller's partial write, unless written already (the
        loop's next write sends it first) or its connection is gone."""
        with self.lock:
            rest, self.rest = self.rest, None
            transport = None if wire is None else wire.transport
            if rest is not None and wire is not None and wire is self._live() and transport:
                self._sent(time.monotonic())
                transport.write(rest)

    def abort(self, wire: Wire | None) -> None:
        """On the loop: drop ``wire`` if it is still the live one (its stream is torn)."""
        if wire is not None and wire is self._live():
            wire.abort()

    # ------------------------------------------------------------ in callers' threads

    def claim(self, frames: list[bytes]) -> bool:
        """Holding the lock: become the writing caller (True), or leave ``frames`` to the
        caller writing now, which sends them after its own (False)."""
        if self.writing:
            self._outbox.extend(frames)
            return False
        self.writing = True
        return True

    def send(self, sock: socket.socket, data: bytes, wire: Wire | None) -> None:
        """As the writing caller: send ``data``, then what the outbox gathered meanwhile,
        until it is empty; outside the lock, so other callers only add to the outbox."""
        while True:
            try:
                sent = sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                # The connection is broken: the loop drops it, and the requests in
                # flight (these too) fail with ConnectionLossError, as if sent.
                log.debug("direct send failed: %r", exc)
                with self.lock:
                    self._outbox.clear()
                    self._stop_writing()
                self._loop().call_soon_threadsafe(self.abort, wire)
                return
            with self.lock:
                if sent < len(data):  # the socket buffer is full: the loop writes the rest
                    if self.socket is sock:
                        self.rest = data[sent:] + b"".join(self._outbox)
                        self._loop().call_soon_threadsafe(self.write_rest, wire)
                    self._outbox.clear()
                    self._stop_writing()
                    return
                outbox = self._outbox
                if not outbox or self.socket is None:
                    outbox.clear()  # stopped: those requests fail with the connection
                    self._stop_writing()
                    return
                sock = self.socket
                data = b"".join(outbox) if len(outbox) > 1 else outbox[0]
                outbox.clear()
                wire = self._live()

    def broken(self, wire: Wire | None, *, writer: bool) -> None:
        """Something (Ctrl-C, in the main thread) interrupted a caller between numbering
        its requests and sending them: the stream may be torn, so the connection is
        dropped and every request in flight fails as on any drop."""
        if writer:
            with self.lock:
                self._outbox.clear()
                self._stop_writing()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to drop
            self._loop().call_soon_threadsafe(self.abort, wire)

    # ------------------------------------------------------------ holding the lock

    def _stop_writing(self) -> None:
        """No caller writes now; close a socket stopped meanwhile."""
        self.writing = False
        retired, self._retired = self._retired, []
        for sock in retired:
            sock.close()

    def _stop_locked(self) -> None:
        direct, self.socket, self._wire = self.socket, None, None
        self.rest = None
        self._outbox.clear()
        if direct is None:
            return
        if self.writing:  # a caller may be in its send: it closes the socket after
            self._retired.append(direct)
        else:
            direct.close()
