"""A broken server for fault tests: it answers the handshake, then garbage.

Not a ZooKeeper mock: it stands for a server (or a proxy gone wrong) that accepts our
session and then breaks every request with a protocol error, so the client drops the
connection and reconnects. It counts connections, which is what the tests assert on.
"""

from __future__ import annotations

import socket
import struct
import threading

_GARBAGE = struct.pack(">i", -7)  # a frame length no server sends: a protocol error


class BrokenServer:
    """Listens on 127.0.0.1 in a thread of its own; ``with`` starts and stops it."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True)

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

    def _serve(self) -> None:
        self._listener.settimeout(0.1)  # so that stopping is noticed
        while not self._stopping:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
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
                conn.sendall(struct.pack(">i", len(body)) + body)
                while True:
                    (size,) = struct.unpack(">i", _read(conn, 4))
                    _read(conn, size)
                    conn.sendall(_GARBAGE)
            except (OSError, struct.error):
                return


def _read(conn: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data
