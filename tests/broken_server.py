"""A broken server for fault tests: it answers the handshake, then garbage.

Not a ZooKeeper mock: it stands for a server (or a proxy gone wrong) that accepts our
session and then breaks every request with a protocol error, so the client drops the
connection and reconnects. It counts connections, which is what the tests assert on.

How it breaks them is its ``answer``:

* ``"length"``  a frame length no server sends (-7);
* ``"xid"``     a well-formed reply header whose xid the client never sent;
* ``"body"``    the right xid and no error code, then a body that cannot be decoded;
* ``"unsolicited"``  a reply nobody asked for, in the same segment as the handshake's
  answer: the client reads both at once, so the connection it has just established is
  already dead when it sets it up (a socket that dies at birth);
* ``"truncated"``  a frame whose length says 100 bytes, 20 of them (the right xid),
  then silence on that connection: only the client's read deadline ends the wait.

``StrayReplyRelay`` does the last to chosen connections of a real ZooKeeper, so a test
can watch a session live through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from typing import Literal

from nemesis.proxy import Proxy

Answer = Literal["length", "xid", "body", "unsolicited", "truncated"]
MALFORMED: tuple[Answer, ...] = ("length", "xid", "body")  # every request's answer

_GARBAGE = struct.pack(">i", -7)  # a frame length no server sends: a protocol error
_PING_XID = -2


def _reply(xid: int, body: bytes = b"") -> bytes:
    """A reply frame: header (xid, zxid 1, err 0), then ``body``."""
    frame = struct.pack(">iqi", xid, 1, 0) + body
    return struct.pack(">i", len(frame)) + frame


# A string or vector that claims 2**30 bytes or items: no reply decodes past it.
_UNDECODABLE = struct.pack(">i", 1 << 30)
# An xid far from any the client has sent: out of order for every pending request.
_UNSENT_XID = 0x3FFF_0000


class BrokenServer:
    """Listens on 127.0.0.1 in a thread of its own; ``with`` starts and stops it."""

    def __init__(self, answer: Answer = "length") -> None:
        self.answer: Answer = answer
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        self.broken = 0  # frames of garbage (or unsolicited replies) sent so far
        self._arrived = threading.Condition()  # notified on every connection accepted
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._answering: list[tuple[threading.Thread, socket.socket]] = []

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> BrokenServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping = True
        self._thread.join(10)
        self._listener.close()
        for thread, conn in self._answering:
            with contextlib.suppress(OSError):  # hang up: its read ends, and so does it
                conn.shutdown(socket.SHUT_RDWR)
            thread.join(10)

    def wait_accepted(self, count: int, timeout: float) -> bool:
        """Block until ``count`` connections were accepted in all; False after ``timeout``."""
        with self._arrived:
            return self._arrived.wait_for(lambda: self.accepted >= count, timeout)

    def _serve(self) -> None:
        self._listener.settimeout(0.1)  # so that stopping is noticed
        while not self._stopping:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._arrived:
                self.accepted += 1
                self._arrived.notify_all()
            thread = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            self._answering.append((thread, conn))
            thread.start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            try:
                (size,) = struct.unpack(">i", _read(conn, 4))
                request = _read(conn, size)
                # ConnectRequest: protocolVersion, lastZxid, timeOut, sessionId, passwd
                (timeout_ms,) = struct.unpack_from(">i", request, 12)
                (session_id,) = struct.unpack_from(">q", request, 16)
                body = struct.pack(">iiqi", 0, timeout_ms, session_id or 0x1234, 16)
                body += b"\x01" * 16 + b"\x00"
                handshake = struct.pack(">i", len(body)) + body
                if self.answer == "unsolicited":
                    self.broken += 1
                    handshake += _reply(_UNSENT_XID)  # one segment: read in one go
                conn.sendall(handshake)
                silent = False
                while not self._stopping:
                    (size,) = struct.unpack(">i", _read(conn, 4))
                    (xid,) = struct.unpack(">i", _read(conn, size)[:4])
                    if silent:
                        continue
                    self.broken += 1
                    conn.sendall(self._broken_reply(xid))
                    silent = self.answer == "truncated"
            except (OSError, struct.error):
                return

    def _broken_reply(self, xid: int) -> bytes:
        if self.answer == "xid":
            return _reply(_UNSENT_XID if xid != _PING_XID else _PING_XID - 100)
        if self.answer == "body":
            return _reply(xid, _UNDECODABLE)
        if self.answer == "truncated":
            return struct.pack(">iiqi", 100, xid, 1, 0) + b"\x00" * 4  # 20 of 100 bytes
        return _GARBAGE


def _read(conn: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


class StrayReplyRelay(Proxy):
    """A relay to a real ZooKeeper that can kill a connection at birth.

    ``stray_next = N``: the next N connections get, right behind the server's answer to
    the handshake and in the same write, a reply nobody asked for (``strays`` counts
    them). ``reset()`` hangs up every relayed connection, so the client reconnects.
    """

    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port)
        self.stray_next = 0
        self.strays = 0

    async def _first_answer(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        if self.stray_next <= 0:
            return
        self.stray_next -= 1
        (size,) = struct.unpack(">i", await source.readexactly(4))
        answer = struct.pack(">i", size) + await source.readexactly(size)
        self.strays += 1
        sink.write(answer + _reply(_UNSENT_XID))
