"""The protocol core against bytes captured from a real ZooKeeper 3.8 (tests/unit/data).

Each row names a captured exchange, the request we encoded for it (the server accepted
those exact bytes) and what the decoded reply must say. Varying values (zxids, times,
session ids) are checked by relation to the raw reply header, parsed here independently
of the code under test.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from zklocks._protocol import codec
from zklocks._protocol import records as _records
from zklocks._protocol.constants import AddWatchMode, EventType, OpCode, WatchTable
from zklocks._protocol.errors import (
    AuthFailedError,
    BadVersionError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from zklocks._protocol.records import (
    AddWatch,
    Check,
    Children,
    Create,
    Created,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    NodeData,
    SetData,
    Stat,
    Sync,
    digest_acl,
)
from zklocks._protocol.session import Established, Expired, Session, WatchFired, WireReply

DATA = json.loads((Path(__file__).parent / "data" / "captured.json").read_text())
CAPTURED: dict[str, dict[str, Any]] = {case["name"]: case for case in DATA["cases"]}
BASE = "/zkl-capture"


def frames(name: str) -> list[bytes]:
    return [bytes.fromhex(r) for r in CAPTURED[name]["replies"]]


def sent(name: str) -> bytes:
    return bytes.fromhex(CAPTURED[name]["request"])


def header(frame: bytes) -> tuple[int, int, int]:
    """(xid, zxid, err) read straight from the bytes."""
    return struct.unpack_from(">iqi", frame, 4)


def connected_session(chroot: str = "") -> Session:
    session = Session(timeout_ms=4000, chroot=chroot)
    session.connect()
    (event,) = session.receive(frames("connect_new")[0])
    assert isinstance(event, Established)
    return session


def watcher(events: list[Any]) -> Callable[[Any], None]:
    return events.append


@dataclass
class Row:
    name: str
    request: object
    check: Callable[[Any, tuple[int, int, int]], None]
    watch: bool = False
    ok: bool = True
    registered: dict[WatchTable, list[str]] = field(default_factory=dict)


def _created(path: str, *, data_length: int | None = None, ephemeral: bool = False) -> Any:
    def check(value: Any, hdr: tuple[int, int, int]) -> None:
        assert isinstance(value, Created)
        assert value.path == path
        assert value.stat.czxid == hdr[1] == value.stat.mzxid
        assert value.stat.version == 0
        assert (value.stat.ephemeral_owner != 0) is ephemeral
        if data_length is not None:
            assert isinstance(value.stat, Stat)
            assert value.stat.data_length == data_length
        else:
            assert type(value.stat) is Stat  # _ops requests answer with _records.Stat exactly

    return check


def _error(cls: type[Exception], path: str | None) -> Any:
    def check(value: Any, hdr: tuple[int, int, int]) -> None:
        assert type(value) is cls
        assert getattr(value, "path", None) == path
        assert hdr[2] == value.code

    return check


def _seq(prefix: str) -> Any:
    def check(value: Any, hdr: tuple[int, int, int]) -> None:
        assert isinstance(value, Created)
        assert value.path.startswith(prefix)
        suffix = value.path[len(prefix) :]
        assert len(suffix) == 10 and suffix.isdigit()

    return check


def _check_children(value: Any, hdr: tuple[int, int, int]) -> None:
    assert sorted(value) == ["eph", "pseq-0000000002", "seq-0000000001", "ttl"]


def _check_children2(value: Any, hdr: tuple[int, int, int]) -> None:
    assert isinstance(value, Children)
    assert sorted(value.names) == ["eph", "pseq-0000000002", "seq-0000000001", "ttl"]
    assert value.stat.num_children == 4
    assert value.stat.version == 1  # set_data ran before


def _check_exists(value: Any, hdr: tuple[int, int, int]) -> None:
    assert isinstance(value, Stat)
    assert value.data_length == 5 and value.version == 0 and value.num_children == 4


def _check_get_data(value: Any, hdr: tuple[int, int, int]) -> None:
    assert isinstance(value, NodeData)
    assert value.data == b"hello"
    assert isinstance(value.stat, Stat) and value.stat.data_length == 5


def _check_get_data_ops(value: Any, hdr: tuple[int, int, int]) -> None:
    assert value == NodeData(b"e", value.stat)
    assert type(value.stat) is Stat and value.stat.ephemeral_owner != 0


def _check_set_data(value: Any, hdr: tuple[int, int, int]) -> None:
    assert isinstance(value, Stat)
    assert value.version == 1 and value.mzxid == hdr[1] and value.data_length == 5
    assert value.czxid < value.mzxid


def _check_multi_ok(value: Any, hdr: tuple[int, int, int]) -> None:
    created, stat, checked, created2, deleted = value
    assert created == BASE + "/m1"  # ZooKeeper 3.8 answers a create in a multi with the path
    assert isinstance(stat, Stat) and stat.version == 1 and stat.mzxid == hdr[1]
    assert checked is None and deleted is None
    assert created2 == BASE + "/m2"


def _check_multi_fail(value: Any, hdr: tuple[int, int, int]) -> None:
    assert hdr[2] == 0  # the header does not say the transaction failed; the results do
    assert type(value) is BadVersionError
    assert value.results is not None
    assert [type(r) for r in value.results] == [RolledBackError, BadVersionError]


def _check_none(value: Any, hdr: tuple[int, int, int]) -> None:
    assert value is None


def _check_sync(value: Any, hdr: tuple[int, int, int]) -> None:
    assert value == BASE


ROWS = [
    Row(
        "create_persistent", Create(BASE, b"hello", ephemeral=False), _created(BASE, data_length=5)
    ),
    Row(
        "create_ephemeral_ops",
        _records.Create(BASE + "/eph", b"e", ephemeral=True),
        _created(BASE + "/eph", ephemeral=True),
    ),
    Row(
        "create_ephemeral_sequential_ops",
        _records.Create(BASE + "/seq-", b"", ephemeral=True, sequential=True),
        _seq(BASE + "/seq-"),
    ),
    Row(
        "create_persistent_sequential",
        Create(BASE + "/pseq-", b"", ephemeral=False, sequential=True),
        _seq(BASE + "/pseq-"),
    ),
    Row(
        "create_container_ops",
        _records.Create("/zkl-container", ephemeral=False, container=True),
        _created("/zkl-container"),
    ),
    Row(
        "create_ttl",
        Create(BASE + "/ttl", b"t", ephemeral=False, ttl_ms=60000),
        _created(BASE + "/ttl", data_length=1),  # the server hides the TTL bits in the stat
    ),
    Row(
        "create_exists_error",
        Create(BASE, b"", ephemeral=False),
        _error(NodeExistsError, BASE),
        ok=False,
    ),
    Row(
        "create_no_parent_error",
        _records.Create("/zkl-missing/child"),
        _error(NoNodeError, "/zkl-missing/child"),
        ok=False,
    ),
    Row(
        "exists_found_watch",
        Exists(BASE),
        _check_exists,
        watch=True,
        registered={WatchTable.DATA: [BASE]},
    ),
    Row(
        "exists_missing_watch_ops",
        _records.Exists(BASE + "/later"),
        _check_none,
        watch=True,
        registered={WatchTable.EXIST: [BASE + "/later"]},
    ),
    Row(
        "get_data_watch",
        GetData(BASE),
        _check_get_data,
        watch=True,
        registered={WatchTable.DATA: [BASE]},
    ),
    Row("get_data_ops", _records.GetData(BASE + "/eph"), _check_get_data_ops),
    Row("set_data", SetData(BASE, b"world", 0), _check_set_data),
    Row(
        "set_data_bad_version",
        SetData(BASE, b"x", 7),
        _error(BadVersionError, BASE),
        ok=False,
    ),
    Row(
        "get_children_ops_watch",
        _records.GetChildren(BASE),
        _check_children,
        watch=True,
        registered={WatchTable.CHILD: [BASE]},
    ),
    Row("get_children2", GetChildren(BASE, with_stat=True), _check_children2),
    Row("sync", Sync(BASE), _check_sync),
    Row("delete_not_empty", Delete(BASE), _error(NotEmptyError, BASE), ok=False),
    Row(
        "delete_ops_missing",
        _records.Delete(BASE + "/nope"),
        _error(NoNodeError, BASE + "/nope"),
        ok=False,
    ),
    Row(
        "create_digest_acl",
        Create(BASE + "/secret", b"s", ephemeral=False, acl=(digest_acl("alice", "secret"),)),
        _created(BASE + "/secret", data_length=1),
    ),
    Row(
        "get_data_no_auth",
        GetData(BASE + "/secret"),
        _error(NoAuthError, BASE + "/secret"),
        ok=False,
    ),
    Row(
        "multi_ok",
        Multi(
            (
                Create(BASE + "/m1", b"1", ephemeral=False),
                SetData(BASE + "/m1", b"2", 0),
                Check(BASE + "/m1", 1),
                _records.Create(BASE + "/m2", ephemeral=False),
                Delete(BASE + "/m2"),
            )
        ),
        _check_multi_ok,
    ),
    Row(
        "multi_fail",
        Multi((Create(BASE + "/m3", ephemeral=False), Check(BASE + "/m1", 99))),
        _check_multi_fail,
        ok=False,
    ),
    Row(
        "add_watch_recursive",
        AddWatch(BASE, AddWatchMode.PERSISTENT_RECURSIVE),
        _check_none,
        watch=True,
        registered={WatchTable.PERSISTENT_RECURSIVE: [BASE]},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_request_bytes_are_what_the_server_accepted(row: Row) -> None:
    frame = sent(row.name)
    length, _xid, opcode = struct.unpack_from(">iii", frame)
    plan = codec.plan(row.request, "", row.watch)
    assert length == len(frame) - 4
    assert plan.opcode == opcode
    assert plan.body == frame[12:]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_reply_decodes(row: Row) -> None:
    session = connected_session()
    xid = struct.unpack_from(">i", sent(row.name), 4)[0]
    session._xid = xid - 1  # replay with the xid the server answered
    seen: list[Any] = []
    frame = session.request(row.request, "token", watcher(seen) if row.watch else None)
    assert frame == sent(row.name)
    replies = frames(row.name)
    events: list[Any] = []
    for reply in replies:
        events.extend(session.receive(reply))
    reply = events[-1]
    assert isinstance(reply, WireReply)
    assert reply.token == "token"
    assert reply.ok is row.ok
    row.check(reply.value, header(replies[-1]))
    for kind in WatchTable:
        assert session.watches.paths(kind) == row.registered.get(kind, [])
    assert session.in_flight == 0
    # the reply's zxid; a notification's never counts (see the 3.9 test below)
    assert session.last_zxid == max(
        (header(r)[1] for r in replies if header(r)[0] != -1 and header(r)[1] > 0), default=0
    )


def test_handshake_new_session() -> None:
    session = Session(timeout_ms=4000)
    request = session.connect()
    assert request == sent("connect_new")
    proto, last_zxid, timeout, session_id = struct.unpack_from(">iqiq", request, 4)
    assert (proto, last_zxid, timeout, session_id) == (0, 0, 4000, 0)
    (event,) = session.receive(frames("connect_new")[0])
    assert isinstance(event, Established)
    assert event.timeout_ms == 4000 and not event.resumed and not event.read_only
    assert event.session_id == session.session_id != 0
    assert len(session.passwd) == 16
    assert session.connected


def test_handshake_resume_sends_id_password_and_last_zxid() -> None:
    reply = frames("connect_resume")[0]
    session_id = struct.unpack_from(">q", reply, 12)[0]
    request = sent("connect_resume")
    session = Session(timeout_ms=4000)
    session.session_id = session_id
    session.passwd = bytes.fromhex(request[-17:-1].hex())
    session.last_zxid = struct.unpack_from(">q", request, 8)[0]
    assert session.connect() == request
    (event,) = session.receive(reply)
    assert isinstance(event, Established) and event.resumed


def test_handshake_expired_forgets_session_and_drains_watchers() -> None:
    session = connected_session()
    calls: list[Any] = []
    session.watches.add(WatchTable.DATA, "/a", calls.append)
    session.watches.add(WatchTable.CHILD, "/b", calls.append)
    old = session.session_id
    session.disconnect()
    session.connect()
    (event,) = session.receive(frames("connect_expired")[0])
    assert isinstance(event, Expired)
    assert event.session_id == old
    assert sorted(path for path, _ in event.watchers) == ["/a", "/b"]
    assert session.session_id == 0 and session.last_zxid == 0 and not session.watches
    assert not session.connected
    request = session.connect()
    assert struct.unpack_from(">q", request, 20)[0] == 0  # asks for a new session


def test_ping_and_auth_replies() -> None:
    session = connected_session()
    assert session.ping("p") == sent("ping")
    (event,) = session.receive(frames("ping")[0])
    assert isinstance(event, WireReply) and event.token == "p" and event.ok
    assert session.add_auth("digest", b"alice:secret", "a") == sent("auth_digest")
    (event,) = session.receive(frames("auth_digest")[0])
    assert isinstance(event, WireReply) and event.token == "a" and event.ok
    assert session.auth == [("digest", b"alice:secret")]


def test_auth_failure_reply() -> None:
    session = connected_session()
    session.add_auth("nosuchscheme", b"x", "a")
    frame = struct.pack(">iiqi", 16, -4, 0, AuthFailedError.code)
    (event,) = session.receive(frame)
    assert isinstance(event, WireReply) and not event.ok and type(event.value) is AuthFailedError


def test_notifications_are_routed_to_watchers() -> None:
    session = connected_session()
    data: list[Any] = []
    recursive: list[Any] = []
    session.watches.add(WatchTable.DATA, BASE, data.append)
    session.watches.add(WatchTable.PERSISTENT_RECURSIVE, BASE, recursive.append)
    session.watches.add(WatchTable.EXIST, BASE + "/later", data.append)
    (changed,) = [e for e in session.receive(frames("notify_data_changed")[0])]
    assert isinstance(changed, WatchFired)
    assert (changed.event_type, changed.path) == (EventType.CHANGED, BASE)
    assert changed.watchers == [data.append, recursive.append]
    (created,) = session.receive(frames("notify_created")[0])
    assert isinstance(created, WatchFired)
    assert (created.event_type, created.path) == (EventType.CREATED, BASE + "/later")
    assert created.watchers == [data.append, recursive.append]
    # one-shot watches are gone, the recursive one stays
    assert session.watches.paths(WatchTable.DATA) == []
    assert session.watches.paths(WatchTable.EXIST) == []
    assert session.watches.paths(WatchTable.PERSISTENT_RECURSIVE) == [BASE]


@pytest.mark.parametrize("zxid", [1, 0x7FFF_0000_0000])
def test_a_notification_with_a_zxid_leaves_last_zxid_alone(zxid: int) -> None:
    """ZooKeeper 3.9 (ZOOKEEPER-4655) puts the triggering transaction's zxid in a
    notification's header, where 3.8 put -1. The Java client returns from its
    notification branch before it reads the header's zxid, so only replies to requests
    move ``last_zxid``, which a reconnect then shows the server: moved by a notification
    it could go back (a lower zxid) or ahead of what our own requests saw."""
    session = connected_session()
    session._xid = header(frames("set_data")[-1])[0] - 1
    session.request(SetData(BASE, b"world", 0), "t")
    session.receive(frames("set_data")[-1])
    seen = session.last_zxid
    assert seen > 1
    captured = bytearray(frames("notify_data_changed")[0])
    assert header(bytes(captured))[:2] == (-1, -1)  # 3.8: no zxid
    struct.pack_into(">q", captured, 8, zxid)  # as 3.9 sends it
    (event,) = session.receive(bytes(captured))
    assert isinstance(event, WatchFired) and event.path == BASE
    assert session.last_zxid == seen


def test_notifications_ahead_of_a_reply() -> None:
    # Our own setData fires our own data watch; the event arrives before the reply.
    session = connected_session()
    calls: list[Any] = []
    session.watches.add(WatchTable.DATA, BASE, calls.append)
    session._xid = header(frames("set_data")[-1])[0] - 1
    session.request(SetData(BASE, b"world", 0), "t")
    events = session.receive(b"".join(frames("set_data")))
    assert [type(e) for e in events] == [WatchFired, WireReply]
    assert events[0].watchers == [calls.append]


def test_set_watches_requests_match_capture() -> None:
    session = connected_session()
    session.auth.append(("digest", b"alice:secret"))
    noop: Callable[[Any], None] = lambda event: None  # noqa: E731
    session.watches.add(WatchTable.CHILD, BASE, noop)
    session.watches.add(WatchTable.PERSISTENT_RECURSIVE, BASE, noop)
    session.last_zxid = struct.unpack_from(">q", sent("set_watches2"), 12)[0]
    auth, set_watches = session.restore()
    assert auth == sent("auth_again")
    assert set_watches == sent("set_watches2")
    assert struct.unpack_from(">ii", set_watches, 4) == (-8, OpCode.SET_WATCHES2)
    events = session.receive(b"".join(frames("set_watches2")))
    assert [type(e) for e in events] == [WatchFired, WireReply]  # the child watch fired at once
    assert events[0].event_type == EventType.CHILD and events[0].watchers == [noop]
    session.receive(frames("auth_again")[0])
    assert session.in_flight == 0


def test_plain_set_watches_without_persistent_watches() -> None:
    session = connected_session()
    noop: Callable[[Any], None] = lambda event: None  # noqa: E731
    session.watches.add(WatchTable.EXIST, BASE + "/m1", noop)
    session.last_zxid = struct.unpack_from(">q", sent("set_watches"), 12)[0]
    (frame,) = session.restore()
    assert frame == sent("set_watches")
    created, done = session.receive(b"".join(frames("set_watches")))
    assert isinstance(created, WatchFired) and created.event_type == EventType.CREATED
    assert created.watchers == [noop]
    assert isinstance(done, WireReply) and done.ok


def test_close_session_reply_after_ephemeral_deletions() -> None:
    session = connected_session()
    calls: list[Any] = []
    session.watches.add(WatchTable.PERSISTENT_RECURSIVE, BASE, calls.append)
    close_xid = header(frames("close_session")[-1])[0]
    session._xid = close_xid - 1
    assert session.close_session("close") == sent("close_session")
    events = session.receive(b"".join(frames("close_session")))
    assert [type(e) for e in events] == [WatchFired, WatchFired, WireReply]
    assert [(e.event_type, e.path) for e in events[:2]] == [
        (EventType.DELETED, BASE + "/eph"),
        (EventType.DELETED, BASE + "/seq-0000000001"),
    ]
    assert events[2].token == "close" and events[2].ok


@pytest.mark.parametrize("chunk", [1, 3, 7, 50])
def test_replies_fed_in_any_chunks(chunk: int) -> None:
    session = connected_session()
    stream = b"".join(frames("close_session"))
    session._xid = header(frames("close_session")[-1])[0] - 1
    session.close_session("close")
    events: list[Any] = []
    for start in range(0, len(stream), chunk):
        events.extend(session.receive(stream[start : start + chunk]))
    assert [type(e) for e in events] == [WatchFired, WatchFired, WireReply]


def test_pipelined_replies_in_one_read() -> None:
    session = connected_session()
    names = ["create_persistent", "create_ephemeral_ops", "create_ephemeral_sequential_ops"]
    rows = {row.name: row for row in ROWS}
    session._xid = 0
    for index, name in enumerate(names):
        session.request(rows[name].request, index)
    events = session.receive(b"".join(frames(n)[0] for n in names))
    assert [e.token for e in events] == [0, 1, 2]
    assert all(e.ok for e in events)


def test_chroot_is_added_and_removed() -> None:
    session = connected_session(chroot="/zkl-capture")
    session._xid = header(frames("create_ephemeral_sequential_ops")[0])[0] - 1
    frame = session.request(_records.Create("/seq-", b"", ephemeral=True, sequential=True), "t")
    assert frame == sent("create_ephemeral_sequential_ops")
    (reply,) = session.receive(frames("create_ephemeral_sequential_ops")[0])
    assert reply.value.path.startswith("/seq-")
    calls: list[Any] = []
    session.watches.add(WatchTable.EXIST, "/later", calls.append)
    (event,) = session.receive(frames("notify_created")[0])
    assert event.path == "/later" and event.watchers == [calls.append]


def test_out_of_order_reply_is_a_protocol_error() -> None:
    from zklocks._protocol.errors import MarshallingError

    session = connected_session()
    session._xid = 40
    session.request(Sync(BASE), "t")
    with pytest.raises(MarshallingError):
        session.receive(frames("sync")[0])  # xid 17, we expected 41


def test_disconnect_returns_in_flight_tokens_oldest_first() -> None:
    session = connected_session()
    session.request(Sync("/"), "a")
    session.ping("p")
    session.request(Sync("/"), "b")
    assert session.in_flight == 3
    assert session.disconnect() == ["a", "b", "p"]
    assert session.in_flight == 0 and not session.connected
