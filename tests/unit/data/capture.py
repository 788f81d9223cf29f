"""Capture real ZooKeeper replies for the protocol unit tests (run by hand, not by pytest).

    .venv/bin/python tests/unit/data/capture.py   # writes tests/unit/data/captured.json

Starts a throw-away ZooKeeper 3.8 (tickTime 200, TTL nodes enabled), talks to it over
plain blocking sockets with two sessions (A does the work, B changes nodes under A's
watches) and records, per step, the frame we sent and every frame the server sent back,
as hex. The server *accepting* each request is what validates our encoder; the replies
are the test data for our decoder. Values that vary between runs (zxids, times, session
ids) are asserted by relation in the tests (e.g. a created node's czxid equals the
reply header's zxid), never by literal.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from zklocks._protocol import codec
from zklocks._protocol import records as _records
from zklocks._protocol.constants import AddWatchMode, OpCode, Xid
from zklocks._protocol.records import (
    AddWatch,
    Check,
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    SetData,
    Sync,
    digest_acl,
)
from zklocks._protocol.session import Established, Session
from zklocks.server import ZooKeeperServer

OUT = Path(__file__).with_name("captured.json")


class TTLServer(ZooKeeperServer):
    def _extra_jvm_options(self) -> list[str]:
        return ["-Dzookeeper.extendedTypesEnabled=true"]


class Wire:
    """One blocking connection driving a ``Session``, recording raw frames."""

    def __init__(self, port: int, session: Session) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.session = session

    def read_frame(self) -> bytes:
        head = self._exactly(4)
        (length,) = struct.unpack(">i", head)
        return head + self._exactly(length)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("server closed the connection")
            data += chunk
        return data

    def handshake(self) -> tuple[bytes, bytes, Any]:
        request = self.session.connect()
        self.sock.sendall(request)
        reply = self.read_frame()
        (event,) = self.session.receive(reply)
        return request, reply, event

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def frames_until_reply(self, xid: int) -> list[bytes]:
        """Read frames until the one whose header xid is ``xid`` (notifications before it kept)."""
        frames = []
        while True:
            frame = self.read_frame()
            frames.append(frame)
            if struct.unpack_from(">i", frame, 4)[0] == xid:
                return frames

    def close(self) -> None:
        self.sock.close()


def main() -> None:
    cases: list[dict[str, Any]] = []

    def record(name: str, request: bytes, replies: list[bytes], **facts: Any) -> None:
        cases.append(
            {"name": name, "request": request.hex(), "replies": [r.hex() for r in replies], **facts}
        )
        print(
            f"{name}: {len(request)} bytes out, {[len(r) for r in replies]} back", file=sys.stderr
        )

    with TTLServer(tick_time=200, max_session_timeout=60000) as server:
        a = Session(timeout_ms=4000)
        wa = Wire(server.port, a)
        request, reply, event = wa.handshake()
        assert isinstance(event, Established), event
        record("connect_new", request, [reply], timeout_ms=4000)

        b = Session(timeout_ms=4000)
        wb = Wire(server.port, b)
        wb.handshake()

        def call(
            name: str, req: object, watch: bool = False, wire: Wire | None = None, **facts: Any
        ) -> None:
            wire = wire or wa
            session = wire.session
            frame = session.request(req, name, (lambda e: None) if watch else None)
            xid = struct.unpack_from(">i", frame, 4)[0]
            wire.send(frame)
            replies = wire.frames_until_reply(xid)
            for r in replies:
                session.receive(r)
            record(name, frame, replies, **facts)

        base = "/zkl-capture"
        call("create_persistent", Create(base, b"hello", ephemeral=False))
        call("create_ephemeral_ops", _records.Create(base + "/eph", b"e", ephemeral=True))
        call(
            "create_ephemeral_sequential_ops",
            _records.Create(base + "/seq-", b"", ephemeral=True, sequential=True),
        )
        call(
            "create_persistent_sequential",
            Create(base + "/pseq-", b"", ephemeral=False, sequential=True),
        )
        call(
            "create_container_ops",
            _records.Create("/zkl-container", ephemeral=False, container=True),
        )
        call(
            "create_ttl",
            Create(base + "/ttl", b"t", ephemeral=False, ttl_ms=60000),
        )
        call("create_exists_error", Create(base, b"", ephemeral=False), error=-110)
        call("create_no_parent_error", _records.Create("/zkl-missing/child"), error=-101)
        call("exists_found_watch", Exists(base), watch=True)
        call("exists_missing_watch_ops", _records.Exists(base + "/later"), watch=True)
        call("get_data_watch", GetData(base), watch=True)
        call("get_data_ops", _records.GetData(base + "/eph"))
        call("set_data", SetData(base, b"world", 0))
        call("set_data_bad_version", SetData(base, b"x", 7), error=-103)
        call("get_children_ops_watch", _records.GetChildren(base), watch=True)
        call("get_children2", GetChildren(base, with_stat=True))
        call("sync", Sync(base))
        call("delete_not_empty", Delete(base), error=-111)
        call("delete_ops_missing", _records.Delete(base + "/nope"), error=-101)

        ping = a.ping("ping")
        wa.send(ping)
        record("ping", ping, wa.frames_until_reply(Xid.PING))

        auth = a.add_auth("digest", b"alice:secret", "auth")
        wa.send(auth)
        replies = wa.frames_until_reply(Xid.AUTH)
        for r in replies:
            a.receive(r)
        record("auth_digest", auth, replies)

        call(
            "create_digest_acl",
            Create(base + "/secret", b"s", ephemeral=False, acl=(digest_acl("alice", "secret"),)),
        )
        call("get_data_no_auth", GetData(base + "/secret"), wire=wb, error=-102)

        call(
            "multi_ok",
            Multi(
                (
                    Create(base + "/m1", b"1", ephemeral=False),
                    SetData(base + "/m1", b"2", 0),
                    Check(base + "/m1", 1),
                    _records.Create(base + "/m2", ephemeral=False),
                    Delete(base + "/m2"),
                )
            ),
        )
        call(
            "multi_fail",
            Multi((Create(base + "/m3", ephemeral=False), Check(base + "/m1", 99))),
            error=-103,
        )
        call(
            "add_watch_recursive",
            AddWatch(base, AddWatchMode.PERSISTENT_RECURSIVE),
            watch=True,
        )

        # B changes things under A's watches; A's notifications ride ahead of B's reply to
        # a sync that A sends afterwards, so we read A up to that sync's reply.
        def poke(name: str, req: object) -> None:
            frame = b.request(req, name)
            wb.send(frame)
            for r in wb.frames_until_reply(struct.unpack_from(">i", frame, 4)[0]):
                b.receive(r)
            call(name, Sync(base))

        poke("notify_data_changed", SetData(base, b"again"))
        poke("notify_created", Create(base + "/later", ephemeral=False))

        # Resume A's session on a new connection and restore its watches: a fresh child
        # watch on the base node and the recursive watch. Change the children while A is
        # away, so the restored child watch fires at once.
        call("get_children_watch_again", _records.GetChildren(base), watch=True)
        wa.close()
        a.disconnect()
        frame = b.request(Delete(base + "/later"), "x")
        wb.send(frame)
        for r in wb.frames_until_reply(struct.unpack_from(">i", frame, 4)[0]):
            b.receive(r)
        wa = Wire(server.port, a)
        request, reply, event = wa.handshake()
        assert isinstance(event, Established) and event.resumed, event
        record("connect_resume", request, [reply])
        restore = a.restore()
        # restore() = [auth, setWatches2] (the recursive watch needs SetWatches2).
        assert len(restore) == 2, restore
        wa.send(restore[0])
        replies = wa.frames_until_reply(Xid.AUTH)
        for r in replies:
            a.receive(r)
        record("auth_again", restore[0], replies)
        wa.send(restore[1])
        replies = wa.frames_until_reply(Xid.SET_WATCHES)
        for r in replies:
            a.receive(r)
        call("after_set_watches2", Sync(base))
        record("set_watches2", restore[1], replies)

        # A plain SetWatches (op 101) from B: an exist watch on a node that now exists.
        body = codec.encode_set_watches(b.last_zxid - 1, [], [base + "/m1"], [])
        frame = struct.pack(">iii", len(body) + 8, Xid.SET_WATCHES, OpCode.SET_WATCHES) + body
        wb.send(frame)
        record("set_watches", frame, wb.frames_until_reply(Xid.SET_WATCHES))

        old_id, old_passwd = a.session_id, a.passwd
        close = a.close_session("close")
        wa.send(close)
        record("close_session", close, wa.frames_until_reply(struct.unpack_from(">i", close, 4)[0]))
        wa.close()

        # Resuming a closed session: the server answers timeout 0 (expired) and hangs up.
        c = Session(timeout_ms=4000)
        c.session_id, c.passwd = old_id, old_passwd
        wc = Wire(server.port, c)
        request, reply, event = wc.handshake()
        record("connect_expired", request, [reply])
        wc.close()
        wb.close()

    OUT.write_text(json.dumps({"server": "ZooKeeper 3.8.0 (Debian)", "cases": cases}, indent=1))
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
