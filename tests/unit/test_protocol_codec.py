"""Codec details not covered by captured bytes: hosts, chroot, sizes, xids, bad input."""

from __future__ import annotations

import pickle
import struct

import pytest

from zklocks._protocol import codec, jute
from zklocks._protocol import records as _records
from zklocks._protocol.constants import DEFAULT_MAX_BUFFER, CreateMode, OpCode, Perm
from zklocks._protocol.errors import (
    ApiError,
    ClientClosedError,
    ConnectionFailedError,
    MarshallingError,
    NoNodeError,
    RequestTooLargeError,
    RolledBackError,
    SystemZooKeeperError,
    ZooKeeperError,
    error_for_code,
    known_codes,
)
from zklocks._protocol.records import (
    OPEN_ACL_UNSAFE,
    AddWatch,
    Check,
    Create,
    CreatedPath,
    Exists,
    Multi,
    SetData,
    Stat,
    Sync,
    WireACL,
    digest_id,
)
from zklocks._protocol.session import Established, Session, WireReply


@pytest.mark.parametrize(
    ("hosts", "expected", "chroot"),
    [
        ("127.0.0.1:2181", [("127.0.0.1", 2181)], ""),
        ("a:1,b:2/app/locks", [("a", 1), ("b", 2)], "/app/locks"),
        ("a:1, b/", [("a", 1), ("b", 2181)], ""),
        ("[::1]:2182,[fe80::1]", [("::1", 2182), ("fe80::1", 2181)], ""),
    ],
)
def test_parse_hosts(hosts: str, expected: list[tuple[str, int]], chroot: str) -> None:
    assert codec.parse_hosts(hosts) == (expected, chroot)


@pytest.mark.parametrize("hosts", ["", "/chroot", "a:1/bad//path"])
def test_parse_hosts_rejects(hosts: str) -> None:
    with pytest.raises(ValueError):
        codec.parse_hosts(hosts)


@pytest.mark.parametrize(
    ("path", "chroot", "server"),
    [("/", "", "/"), ("/a", "", "/a"), ("/", "/app", "/app"), ("/a/b", "/app", "/app/a/b")],
)
def test_chroot_round_trip(path: str, chroot: str, server: str) -> None:
    assert codec.to_server(path, chroot) == server
    assert codec.from_server(server, chroot) == path


def test_from_server_leaves_paths_outside_the_chroot_alone() -> None:
    assert codec.from_server("/application", "/app") == "/application"


def established(chroot: str = "") -> Session:
    session = Session(timeout_ms=10_000, chroot=chroot)
    session.connect()
    reply = struct.pack(">iiqi", 0, 10_000, 0x1234, 16) + b"p" * 16 + b"\x00"
    (event,) = session.receive(struct.pack(">i", len(reply)) + reply)
    assert isinstance(event, Established)
    return session


def test_request_larger_than_jute_maxbuffer_is_refused_without_using_an_xid() -> None:
    session = established()
    too_big = Create("/n", b"x" * DEFAULT_MAX_BUFFER, ephemeral=False)
    with pytest.raises(RequestTooLargeError) as caught:
        session.request(too_big, "t")
    assert isinstance(caught.value, ValueError)
    assert session.in_flight == 0
    frame = session.request(Sync("/"), "t")
    assert struct.unpack_from(">i", frame, 4)[0] == 1


def test_largest_accepted_request_is_exactly_the_limit() -> None:
    session = established()
    overhead = len(session.request(Create("/n", b"", ephemeral=False), "t")) - 4
    fits = Create("/n", b"x" * (DEFAULT_MAX_BUFFER - overhead), ephemeral=False)
    assert len(session.request(fits, "t")) - 4 == DEFAULT_MAX_BUFFER


def test_xids_wrap_before_the_reserved_negative_range() -> None:
    session = established()
    session._xid = 2**31 - 2
    first = session.request(Sync("/"), "a")
    second = session.request(Sync("/"), "b")
    assert struct.unpack_from(">i", first, 4)[0] == 2**31 - 1
    assert struct.unpack_from(">i", second, 4)[0] == 1


def test_requests_that_cannot_be_sent() -> None:
    session = established()
    with pytest.raises(TypeError):
        session.request("not a request", "t")
    with pytest.raises(ValueError):
        session.request(_records.Create("/n"), "t", watcher=print)  # creates set no watch
    with pytest.raises(ValueError):
        session.request(AddWatch("/n"), "t")  # a persistent watch needs a caller
    with pytest.raises(TypeError):
        session.request(Check("/n", 1), "t")  # only inside a multi
    with pytest.raises(ValueError):
        codec.plan(_records.Create("/n", ephemeral=True, container=True), "", False)
    for no_mode in (
        Create("/n", ttl_ms=5000),  # ephemeral (the default) with a TTL
        Create("/n", ephemeral=False, ttl_ms=-1),
        Create("/n", ephemeral=False, container=True, ttl_ms=5000),
        Create("/n", ephemeral=False, sequential=True, container=True),
    ):
        with pytest.raises(ValueError):
            session.request(no_mode, "t")
    with pytest.raises(TypeError):
        Multi((Exists("/n"),))  # type: ignore[arg-type]
    assert session.in_flight == 0


def test_not_connected_session_refuses_to_build_requests() -> None:
    session = Session(timeout_ms=1000)
    with pytest.raises(RuntimeError):
        session.request(Sync("/"), "t")


@pytest.mark.parametrize(
    ("create", "mode", "opcode"),
    [
        (Create("/n", b"d", ephemeral=False), CreateMode.PERSISTENT, OpCode.CREATE2),
        (Create("/n", b"d", sequential=True), CreateMode.EPHEMERAL_SEQUENTIAL, OpCode.CREATE2),
        (
            Create("/n", b"d", ephemeral=False, container=True),
            CreateMode.CONTAINER,
            OpCode.CREATE_CONTAINER,
        ),
        (
            Create("/n", b"d", ephemeral=False, sequential=True, ttl_ms=5000),
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
            OpCode.CREATE_TTL,
        ),
    ],
)
def test_create_flags_pick_the_mode_and_its_op(
    create: Create, mode: CreateMode, opcode: OpCode
) -> None:
    assert create.mode is mode
    plan = codec.plan(create, "", False)
    assert plan.opcode == opcode
    ttl = create.ttl_ms
    flags_at = len(plan.body) - (12 if ttl else 4)
    assert struct.unpack_from(">i", plan.body, flags_at)[0] == mode
    if ttl:
        assert struct.unpack_from(">q", plan.body, len(plan.body) - 8)[0] == ttl


@pytest.mark.parametrize("chroot", ["", "/app"])
@pytest.mark.parametrize(
    "create",
    [
        Create("/n", b"d"),
        Create("/n", b"d", ephemeral=False, sequential=True),
        Create("/n", ephemeral=False, container=True),
        Create("/n", b"d", acl=(WireACL(Perm.READ, digest_id("u", "p")),)),
        Create("/n", b"d", ephemeral=False, acl=OPEN_ACL_UNSAFE),
    ],
)
def test_precomputed_creates_are_the_bytes_of_their_mode(create: Create, chroot: str) -> None:
    """The lock cycle's fast path (a precomputed tail) encodes what the general one does."""
    plan = codec.plan(create, chroot, False)
    path = codec.to_server(create.path, chroot)
    acl = create.acl or OPEN_ACL_UNSAFE
    assert (plan.opcode, plan.body) == codec.encode_create(path, create.data, create.mode, acl, 0)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", -5),  # negative length
        struct.pack(">iiqi", 12, 1, 0, 0),  # a reply shorter than its header
        struct.pack(">iiqi", 16, 99, 0, 0),  # an answer to nothing we asked
        struct.pack(">iiqi", 16, -2, 0, 0),  # a pong without a ping
    ],
)
def test_malformed_input_is_a_protocol_error(frame: bytes) -> None:
    session = established()
    with pytest.raises(MarshallingError):
        session.receive(frame)


def test_truncated_body_is_a_protocol_error() -> None:
    session = established()
    session.request(Sync("/"), "t")
    body = struct.pack(">iqi", 1, 5, 0) + struct.pack(">i", 50) + b"/short"
    with pytest.raises(MarshallingError):
        session.receive(struct.pack(">i", len(body)) + body)


def test_jute_null_values() -> None:
    assert jute.write_string(None) == jute.NULL
    assert jute.read_string(jute.NULL, 0) == (None, 4)
    assert jute.read_buffer(jute.NULL, 0) == (b"", 4)
    assert jute.read_string_vector(jute.NULL, 0) == ([], 4)
    assert jute.write_string_vector(["a"]) == b"\x00\x00\x00\x01\x00\x00\x00\x01a"


def test_every_code_maps_to_its_own_class() -> None:
    codes = known_codes()
    assert len(set(codes.values())) == len(codes)
    for code, cls in codes.items():
        error = error_for_code(code, path="/p")
        assert type(error) is cls and error.code == code and error.path == "/p"
        if code <= -100:
            assert isinstance(error, ApiError)
        elif code < 0:
            assert isinstance(error, SystemZooKeeperError)
    assert type(error_for_code(0)) is RolledBackError
    assert type(error_for_code(-101)) is NoNodeError
    unknown = error_for_code(-999)
    assert isinstance(unknown, ApiError) and unknown.code == -999
    for client_side in (ClientClosedError, ConnectionFailedError, RequestTooLargeError):
        assert client_side.code > 0 and issubclass(client_side, ZooKeeperError)


def test_digest_id_matches_zookeeper() -> None:
    # DigestAuthenticationProvider.generateDigest("super:test") from ZooKeeper's docs
    assert digest_id("super", "test").id == "super:D/InIHSb7yEEbrWz8b9l71RjZJU="


# ZooKeeper 3.9's multi reply, in the codec's layout: the 3.8.0 capture in data/ answers
# our create2 with a create result (the path); 3.8.2+ and 3.9 with a create2 one (the
# path, then the node's Stat: ZOOKEEPER-4026). Built by hand, as the server writes it:
# a MultiHeader (type, done, err 0) before each result, then (-1, true, -1).
_NODE_STAT = (40, 40, 1_700_000_000_000, 1_700_000_000_000, 0, 0, 0, 0, 1, 0, 40)
_SET_STAT = (40, 41, 1_700_000_000_000, 1_700_000_000_001, 1, 0, 0, 0, 1, 0, 40)


def _multi_reply(xid: int, *, with_stat: bool) -> bytes:
    create = jute.MULTI_HEADER.pack(OpCode.CREATE2 if with_stat else OpCode.CREATE, False, 0)
    create += jute.write_string("/app/m-0000000007")
    if with_stat:
        create += jute.STAT.pack(*_NODE_STAT)
    body = (
        jute.REPLY_HEADER.pack(xid, 41, 0)
        + create
        + jute.MULTI_HEADER.pack(OpCode.SET_DATA, False, 0)
        + jute.STAT.pack(*_SET_STAT)
        + jute.MULTI_HEADER.pack(OpCode.CHECK, False, 0)
        + jute.MULTI_HEADER.pack(-1, True, -1)
    )
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("with_stat", [False, True], ids=["3.8.0", "3.9"])
def test_a_create_in_a_multi_is_one_type_whatever_the_server(with_stat: bool) -> None:
    session = established(chroot="/app")
    multi = Multi(
        (
            Create("/m-", b"x", ephemeral=False, sequential=True),
            SetData("/m-0000000007", b"y", 0),
            Check("/m-0000000007", 1),
        )
    )
    request = session.request(multi, "t")
    xid = struct.unpack_from(">i", request, 4)[0]
    (reply,) = session.receive(_multi_reply(xid, with_stat=with_stat))
    assert isinstance(reply, WireReply) and reply.ok
    created, stat, checked = reply.value
    assert type(created) is CreatedPath and created == "/m-0000000007"  # chroot removed
    assert created.stat == (Stat(*_NODE_STAT) if with_stat else None)
    assert stat == Stat(*_SET_STAT) and checked is None
    assert session.last_zxid == 41
    copy = pickle.loads(pickle.dumps(created))
    assert (type(copy), copy, copy.stat) == (CreatedPath, created, created.stat)
