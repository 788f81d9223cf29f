"""ZooKeeper's wire, by hand: the floor a lock cycle cannot beat, and request parsing.

``RawClient`` is a blocking socket speaking just enough of the protocol (connect,
create, getChildren, delete, exists, close) with next to no Python per request. The
time it needs for a request pattern is what ZooKeeper, fsync and loopback cost: the
*wire floor*. Whatever a library spends above that is client overhead.

``parse_requests`` reads a client-to-server byte stream and names each request (used by
the counting proxy), so a run can say *which* requests a cycle sends, not just how many.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterable

OPS = {
    0: "notification",
    1: "create",
    2: "delete",
    3: "exists",
    4: "getData",
    5: "setData",
    6: "getACL",
    7: "setACL",
    8: "getChildren",
    9: "sync",
    11: "ping",
    12: "getChildren2",
    13: "check",
    14: "multi",
    15: "create2",
    16: "reconfig",
    17: "checkWatches",
    18: "removeWatches",
    19: "createContainer",
    20: "deleteContainer",
    21: "createTTL",
    22: "multiRead",
    100: "auth",
    101: "setWatches",
    102: "sasl",
    103: "getEphemerals",
    104: "getAllChildrenNumber",
    105: "setWatches2",
    106: "addWatch",
    107: "whoAmI",
    -10: "createSession",
    -11: "closeSession",
    -1: "error",
}

PERSISTENT, EPHEMERAL, SEQUENTIAL = 0, 1, 2
_OPEN_ACL = struct.pack(">ii", 1, 31) + b"\x00\x00\x00\x05world" + b"\x00\x00\x00\x06anyone"


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">i", len(raw)) + raw


class ZkWireError(RuntimeError):
    def __init__(self, op: str, code: int) -> None:
        super().__init__(f"{op} failed with ZooKeeper error {code}")
        self.code = code


class RawClient:
    """One session over a blocking socket; requests in one batch are pipelined."""

    def __init__(self, host: str, port: int, session_timeout_ms: int = 30_000) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = b""
        self._xid = 0
        body = struct.pack(">iqiq", 0, 0, session_timeout_ms, 0) + struct.pack(">i", 16)
        body += b"\x00" * 16 + b"\x00"
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        reply = self._frame()
        _version, _timeout, self.session_id = struct.unpack_from(">iiq", reply)

    @classmethod
    def connect(cls, hosts: str) -> RawClient:
        host, _, port = hosts.split(",")[0].rpartition(":")
        return cls(host, int(port))

    def _frame(self) -> bytes:
        while True:
            if len(self._buffer) >= 4:
                (length,) = struct.unpack_from(">i", self._buffer)
                if len(self._buffer) >= 4 + length:
                    frame = self._buffer[4 : 4 + length]
                    self._buffer = self._buffer[4 + length :]
                    return frame
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("ZooKeeper closed the connection")
            self._buffer += chunk

    def _request(self, op: int, body: bytes) -> tuple[int, bytes]:
        self._xid += 1
        payload = struct.pack(">ii", self._xid, op) + body
        return self._xid, struct.pack(">i", len(payload)) + payload

    def batch(self, requests: Iterable[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Send all requests in one write; return (error code, reply body) for each."""
        wanted = []
        out = b""
        for op, body in requests:
            xid, frame = self._request(op, body)
            wanted.append(xid)
            out += frame
        self.sock.sendall(out)
        replies: list[tuple[int, bytes]] = []
        while len(replies) < len(wanted):
            frame = self._frame()
            xid, _zxid, err = struct.unpack_from(">iqi", frame)
            if xid == -1:  # a watch notification: not a reply
                continue
            replies.append((err, frame[16:]))
        return replies

    def next_notification(self) -> tuple[int, str]:
        """Block until a watch notification arrives: (event type, path). Replies to requests
        still in flight would be lost, so call it only when none are."""
        while True:
            frame = self._frame()
            xid, _zxid, _err = struct.unpack_from(">iqi", frame)
            if xid == -1:
                event_type, _state, length = struct.unpack_from(">iii", frame, 16)
                return event_type, frame[28 : 28 + length].decode()

    # -- request bodies ------------------------------------------------------------------

    @staticmethod
    def create(path: str, flags: int, data: bytes = b"") -> tuple[int, bytes]:
        body = _string(path) + struct.pack(">i", len(data)) + data + _OPEN_ACL
        return 1, body + struct.pack(">i", flags)

    @staticmethod
    def get_children(path: str, watch: bool = False) -> tuple[int, bytes]:
        return 8, _string(path) + (b"\x01" if watch else b"\x00")

    @staticmethod
    def get_children2(path: str, watch: bool = False) -> tuple[int, bytes]:
        """getChildren2: the listing with the directory's Stat (what lock-delay reads)."""
        return 12, _string(path) + (b"\x01" if watch else b"\x00")

    @staticmethod
    def exists(path: str, watch: bool = False) -> tuple[int, bytes]:
        return 3, _string(path) + (b"\x01" if watch else b"\x00")

    @staticmethod
    def delete(path: str) -> tuple[int, bytes]:
        return 2, _string(path) + struct.pack(">i", -1)

    @staticmethod
    def delete_marked(path: str) -> tuple[int, bytes]:
        """One multi: delete ``path`` and setData(its directory, b""): zklocks' release,
        which counts clean releases on the directory (docs/locks.md, "Lock-delay")."""
        parent = path.rsplit("/", 1)[0] or "/"
        body = struct.pack(">i?i", 2, False, -1) + _string(path) + struct.pack(">i", -1)
        body += struct.pack(">i?i", 5, False, -1) + _string(parent) + struct.pack(">ii", 0, -1)
        return 14, body + struct.pack(">i?i", -1, True, -1)

    @staticmethod
    def created_path(body: bytes) -> str:
        (length,) = struct.unpack_from(">i", body)
        return body[4 : 4 + length].decode()

    def ensure_path(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(len(parts)):
            err, _ = self.batch([self.create("/" + "/".join(parts[: i + 1]), PERSISTENT)])[0]
            if err not in (0, -110):  # NodeExists is fine
                raise ZkWireError("create", err)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.batch([(-11, b"")])
        self.sock.close()


# -- the floors: the same requests and round trips a lock cycle needs -------------------


def _check(replies: list[tuple[int, bytes]], what: str) -> list[tuple[int, bytes]]:
    for err, _ in replies:
        if err != 0:
            raise ZkWireError(what, err)
    return replies


def cycle_fair_2rt(client: RawClient, path: str) -> None:
    """create(ephemeral sequential) + getChildren pipelined, then delete: 3 requests, 2 RT."""
    created, _children = _check(
        client.batch(
            [client.create(path + "/n-", EPHEMERAL | SEQUENTIAL), client.get_children(path)]
        ),
        "create+getChildren",
    )
    _check(client.batch([client.delete(client.created_path(created[1]))]), "delete")


def cycle_fair_marked_2rt(client: RawClient, path: str) -> None:
    """create(ephemeral sequential) + getChildren2 pipelined, then the marked release (one
    multi: delete + setData on the directory): zklocks' own 3 requests, 2 RT."""
    created, _children = _check(
        client.batch(
            [client.create(path + "/n-", EPHEMERAL | SEQUENTIAL), client.get_children2(path)]
        ),
        "create+getChildren2",
    )
    (released,) = _check(
        client.batch([client.delete_marked(client.created_path(created[1]))]), "multi"
    )
    (first_op,) = struct.unpack_from(">i", released[1])
    if first_op != 2:  # the multi's first result: -1 (an error result) if it failed
        raise ZkWireError("multi", first_op)


def cycle_unfair_2rt(client: RawClient, path: str) -> None:
    """create(ephemeral) then delete: 2 requests, 2 RT."""
    node = path + "/lock"
    _check(client.batch([client.create(node, EPHEMERAL)]), "create")
    _check(client.batch([client.delete(node)]), "delete")


def cycle_sequential_4rt(client: RawClient, path: str) -> None:
    """exists, create(ephemeral sequential), getChildren, delete one after another: 4 RT."""
    _check(client.batch([client.exists(path)]), "exists")
    created = _check(client.batch([client.create(path + "/n-", EPHEMERAL | SEQUENTIAL)]), "create")
    _check(client.batch([client.get_children(path)]), "getChildren")
    _check(client.batch([client.delete(client.created_path(created[0][1]))]), "delete")


FLOORS = {
    "fair: create+getChildren | delete (3 req, 2 RT)": cycle_fair_2rt,
    "fair, marked: create+getChildren2 | multi(delete+setData) (3 req, 2 RT)": (
        cycle_fair_marked_2rt
    ),
    "unfair: create | delete (2 req, 2 RT)": cycle_unfair_2rt,
    "kazoo-like: exists | create | getChildren | delete (4 req, 4 RT)": cycle_sequential_4rt,
}


def measure_floor(hosts: str, base: str, cycles: int) -> dict[str, list[float]]:
    """Seconds per cycle for each floor pattern, interleaved so drift hits all alike."""
    client = RawClient.connect(hosts)
    try:
        paths = {}
        for i, name in enumerate(FLOORS):
            paths[name] = f"{base}/f{i}"
            client.ensure_path(paths[name])
        samples: dict[str, list[float]] = {name: [] for name in FLOORS}
        for name, fn in FLOORS.items():  # warm up
            for _ in range(5):
                fn(client, paths[name])
        chunk = max(1, cycles // 10)
        for _ in range(0, cycles, chunk):
            for name, fn in FLOORS.items():
                out = samples[name]
                p = paths[name]
                for _ in range(chunk):
                    t0 = time.perf_counter()
                    fn(client, p)
                    out.append(time.perf_counter() - t0)
        return samples
    finally:
        client.close()


# -- parsing a client's byte stream (for the proxy) ---------------------------------------


class RequestParser:
    """Feed it what a client sends; it counts requests by name (the connect is skipped)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._connected = False

    def feed(self, data: bytes) -> list[str]:
        self._buffer += data
        names = []
        while len(self._buffer) >= 4:
            (length,) = struct.unpack_from(">i", self._buffer)
            if len(self._buffer) < 4 + length:
                break
            frame = self._buffer[4 : 4 + length]
            self._buffer = self._buffer[4 + length :]
            if not self._connected:
                self._connected = True  # ConnectRequest: no request header
                names.append("connect")
                continue
            if len(frame) < 8:
                names.append("malformed")
                continue
            xid, op = struct.unpack_from(">ii", frame)
            names.append("ping" if xid == -2 else OPS.get(op, f"op{op}"))
        return names
