"""Encode each request body and decode each reply body (jute records, no framing).

``plan(request, chroot)`` is the one entry point the session uses: it returns the op
code, the encoded body and how to read the answer (a decoder and which watch, if any,
the answer establishes). Decoders read from a frame in place: ``decode(buf, offset,
chroot)``; the session has already consumed the reply header.

Chroot: every path sent is prefixed with the chroot; every path received (created
names, sync, watch events) has it removed, so callers only ever see their own paths
(``zklocks._protocol.paths``, which also parses connect strings and checks paths; its
names are re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from zklocks._protocol import jute
from zklocks._protocol.constants import (
    PROTOCOL_VERSION,
    AddWatchMode,
    CreateMode,
    OpCode,
    WatchTable,
)
from zklocks._protocol.errors import error_for_code
from zklocks._protocol.jute import (
    BOOL,
    INT,
    LONG,
    MULTI_HEADER,
    STAT,
    Buffer,
    JuteError,
    read_buffer,
    read_int,
    read_string,
    read_string_vector,
    write_buffer,
    write_string,
    write_string_vector,
)
from zklocks._protocol.paths import (
    CONNECT_STRING_FORM,
    from_server,
    parse_hosts,
    path_problem,
    refused_char,
    shown_path,
    to_server,
    validate_path,
)
from zklocks._protocol.records import (
    OPEN_ACL_UNSAFE,
    AddWatch,
    Check,
    Children,
    Create,
    Created,
    CreatedPath,
    Delete,
    Exists,
    GetACL,
    GetChildren,
    GetData,
    GetSASLRequest,
    Id,
    Multi,
    MultiOp,
    NodeACL,
    NodeData,
    SetData,
    SetSASLResponse,
    Stat,
    Sync,
    WireACL,
)

Decoder: TypeAlias = Callable[[Buffer, int, str], Any]

# ---------------------------------------------------------------- encoding

_OPEN_ACL_BYTES = INT.pack(1) + INT.pack(31) + write_string("world") + write_string("anyone")


def _acl_bytes(acl: Sequence[WireACL]) -> bytes:
    if acl is OPEN_ACL_UNSAFE:
        return _OPEN_ACL_BYTES
    parts = [INT.pack(len(acl))]
    for entry in acl:
        parts.append(INT.pack(int(entry.perms)))
        parts.append(write_string(entry.id.scheme))
        parts.append(write_string(entry.id.id))
    return b"".join(parts)


def _path_watch(path: str, watch: bool) -> bytes:
    raw = path.encode("utf-8")
    return INT.pack(len(raw)) + raw + (b"\x01" if watch else b"\x00")


def _path_int(path: str, value: int) -> bytes:
    raw = path.encode("utf-8")
    return INT.pack(len(raw)) + raw + INT.pack(value)


_MODE_OPCODE: dict[int, int] = {int(mode): int(mode.opcode) for mode in CreateMode}


def encode_create(
    path: str, data: bytes, mode: CreateMode, acl: Sequence[WireACL], ttl_ms: int
) -> tuple[int, bytes]:
    """(op code, body) of a create in any mode."""
    raw = path.encode("utf-8")
    opcode = _MODE_OPCODE[mode]
    body = b"".join(
        (
            INT.pack(len(raw)),
            raw,
            INT.pack(len(data)),
            data,
            _acl_bytes(acl),
            INT.pack(mode),
        )
    )
    if opcode == OpCode.CREATE_TTL:
        body += LONG.pack(ttl_ms)
    return opcode, body


# The creates without a TTL, precomputed: (ephemeral, sequential, container) -> (op code,
# tail), the tail being the open ACL and the flags that end the body. Every lock cycle
# creates a node: this keeps enum arithmetic off its path.
_CREATE_TAILS: dict[tuple[bool, bool, bool], tuple[int, bytes]] = {
    (ephemeral, sequential, False): (
        OpCode.CREATE2,
        _OPEN_ACL_BYTES + INT.pack(int(ephemeral) | (2 if sequential else 0)),
    )
    for ephemeral in (False, True)
    for sequential in (False, True)
}
_CREATE_TAILS[(False, False, True)] = (
    OpCode.CREATE_CONTAINER,
    _OPEN_ACL_BYTES + INT.pack(CreateMode.CONTAINER),
)


def _encode_create_request(req: Create, chroot: str) -> tuple[int, bytes]:
    """(op code, body) of ``req``: the precomputed tail when it has one, else by its mode."""
    spec = None if req.ttl_ms else _CREATE_TAILS.get((req.ephemeral, req.sequential, req.container))
    acl = req.acl
    if spec is None:  # a TTL node, or flags that add up to no mode (``mode`` says why)
        path = to_server(req.path, chroot)
        return encode_create(path, req.data, req.mode, acl or OPEN_ACL_UNSAFE, req.ttl_ms)
    raw = (to_server(req.path, chroot) if chroot else req.path).encode("utf-8")
    data = req.data
    tail = spec[1]
    if acl:  # the open ACL's bytes start the precomputed tail: swap in ours
        tail = _acl_bytes(acl) + tail[len(_OPEN_ACL_BYTES) :]
    return spec[0], b"".join((INT.pack(len(raw)), raw, INT.pack(len(data)), data, tail))


def encode_connect(
    last_zxid: int, timeout_ms: int, session_id: int, passwd: bytes, read_only: bool = False
) -> bytes:
    """The ConnectRequest body (the first frame on a connection; it has no header)."""
    return b"".join(
        (
            INT.pack(PROTOCOL_VERSION),
            LONG.pack(last_zxid),
            INT.pack(timeout_ms),
            LONG.pack(session_id),
            write_buffer(passwd),
            BOOL.pack(read_only),
        )
    )


def encode_auth(scheme: str, credential: bytes) -> bytes:
    """AuthPacket body: type 0, scheme, credential."""
    return INT.pack(0) + write_string(scheme) + write_buffer(credential)


def encode_set_watches(
    relative_zxid: int,
    data: Sequence[str],
    exist: Sequence[str],
    child: Sequence[str],
    persistent: Sequence[str] | None = None,
    recursive: Sequence[str] | None = None,
) -> bytes:
    """SetWatches body, or SetWatches2 when ``persistent``/``recursive`` are given."""
    parts = [
        LONG.pack(relative_zxid),
        write_string_vector(data),
        write_string_vector(exist),
        write_string_vector(child),
    ]
    if persistent is not None or recursive is not None:
        parts.append(write_string_vector(persistent or ()))
        parts.append(write_string_vector(recursive or ()))
    return b"".join(parts)


def _multi_op(op: MultiOp, chroot: str) -> tuple[int, bytes]:
    if isinstance(op, Create):
        return _encode_create_request(op, chroot)
    if isinstance(op, Delete):
        return OpCode.DELETE, _path_int(to_server(op.path, chroot), op.version)
    if isinstance(op, SetData):
        return OpCode.SET_DATA, _set_data_body(op, chroot)
    if isinstance(op, Check):
        return OpCode.CHECK, _path_int(to_server(op.path, chroot), op.version)
    raise TypeError(f"{type(op).__name__} cannot be part of a multi")


def _set_data_body(req: SetData, chroot: str) -> bytes:
    path = write_string(to_server(req.path, chroot))
    return path + write_buffer(req.data) + INT.pack(req.version)


def encode_multi(ops: Sequence[MultiOp], chroot: str) -> bytes:
    parts: list[bytes] = []
    for op in ops:
        opcode, body = _multi_op(op, chroot)
        parts.append(MULTI_HEADER.pack(opcode, False, -1))
        parts.append(body)
    parts.append(MULTI_HEADER.pack(-1, True, -1))
    return b"".join(parts)


# ---------------------------------------------------------------- decoding


_new_tuple = tuple.__new__


def _stat(buf: Buffer, offset: int) -> Stat:
    if offset + 68 > len(buf):
        raise JuteError("truncated stat")
    stat: Stat = _new_tuple(Stat, STAT.unpack_from(buf, offset))  # wire order is field order
    return stat


def decode_nothing(buf: Buffer, offset: int, chroot: str) -> None:
    return None


def decode_created(buf: Buffer, offset: int, chroot: str) -> Created:
    path, offset = read_string(buf, offset)
    return Created(from_server(path or "", chroot), _stat(buf, offset))


def decode_stat(buf: Buffer, offset: int, chroot: str) -> Stat:
    return _stat(buf, offset)


def decode_exists(buf: Buffer, offset: int, chroot: str) -> Stat:
    """Exists: like ``decode_stat``; a NoNode answer to it means "absent", not an error."""
    return _stat(buf, offset)


def decode_node_data(buf: Buffer, offset: int, chroot: str) -> NodeData:
    data, offset = read_buffer(buf, offset)
    return NodeData(data, _stat(buf, offset))


def decode_children(buf: Buffer, offset: int, chroot: str) -> list[str]:
    return read_string_vector(buf, offset)[0]


def decode_children_with_stat(buf: Buffer, offset: int, chroot: str) -> Children:
    names, offset = read_string_vector(buf, offset)
    return Children(names, _stat(buf, offset))


def decode_acl(buf: Buffer, offset: int, chroot: str) -> NodeACL:
    """GetACLResponse: a vector of (perms, scheme, id), then the node's stat (dropped)."""
    count, offset = read_int(buf, offset)
    if count < 0 or count > len(buf):
        raise JuteError(f"bad ACL count {count}")
    entries: list[WireACL] = []
    for _ in range(count):
        perms, offset = read_int(buf, offset)
        scheme, offset = read_string(buf, offset)
        ident, offset = read_string(buf, offset)
        entries.append(WireACL(perms, Id(scheme or "", ident or "")))
    return NodeACL(tuple(entries))


def decode_path(buf: Buffer, offset: int, chroot: str) -> str:
    path, _ = read_string(buf, offset)
    return from_server(path or "", chroot)


def decode_sasl(buf: Buffer, offset: int, chroot: str) -> SetSASLResponse:
    """SetSASLResponse: the server's next token (a null buffer reads as empty)."""
    token, _ = read_buffer(buf, offset)
    return SetSASLResponse(bytes(token))


def decode_multi(buf: Buffer, offset: int, chroot: str) -> list[Any]:
    """MultiResponse: a MultiHeader before each result, one with ``done`` at the end."""
    results: list[Any] = []
    while True:
        if offset + MULTI_HEADER.size > len(buf):
            raise JuteError("truncated multi response")
        optype, done, _err = MULTI_HEADER.unpack_from(buf, offset)
        offset += MULTI_HEADER.size
        if done:
            return results
        if optype == OpCode.ERROR:
            code, offset = read_int(buf, offset)
            results.append(error_for_code(code))
        elif optype == OpCode.CREATE:  # 3.8.0 and 3.8.1 answer our create2 so
            path, offset = read_string(buf, offset)
            results.append(CreatedPath(from_server(path or "", chroot)))
        elif optype in (OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL):
            path, offset = read_string(buf, offset)  # 3.8.2+ and 3.9: with the Stat
            results.append(CreatedPath(from_server(path or "", chroot), _stat(buf, offset)))
            offset += STAT.size
        elif optype == OpCode.SET_DATA:
            results.append(_stat(buf, offset))
            offset += STAT.size
        elif optype in (OpCode.DELETE, OpCode.CHECK):
            results.append(None)
        else:
            raise JuteError(f"unexpected op type {optype} in a multi response")


def decode_connect_response(buf: Buffer, offset: int) -> tuple[int, int, int, bytes, bool]:
    """(protocol version, negotiated timeout ms, session id, password, read-only)."""
    if offset + 16 > len(buf):
        raise JuteError("truncated connect response")
    version, timeout = jute.INT_INT.unpack_from(buf, offset)
    (session_id,) = LONG.unpack_from(buf, offset + 8)
    passwd, offset = read_buffer(buf, offset + 16)
    read_only = bool(buf[offset]) if offset < len(buf) else False
    return version, timeout, session_id, passwd, read_only


def decode_watcher_event(buf: Buffer, offset: int) -> tuple[int, int, str]:
    """(event type, keeper state, server-side path)."""
    if offset + 8 > len(buf):
        raise JuteError("truncated watcher event")
    etype, state = jute.INT_INT.unpack_from(buf, offset)
    path, _ = read_string(buf, offset + 8)
    return etype, state, path or ""


# ---------------------------------------------------------------- the plan table


@dataclass(slots=True, eq=False)
class Plan:
    """How to send one request and read its answer."""

    opcode: int
    body: bytes
    decode: Decoder
    path: str | None
    ok_watch: WatchTable | None = None
    nonode_watch: WatchTable | None = None


def plan(request: object, chroot: str, watch: bool) -> Plan:
    """Encode ``request``; ``watch`` asks the server to set the watch the request allows."""
    kind = type(request)
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise TypeError(f"not a ZooKeeper request: {kind.__name__}")
    return builder(request, chroot, watch)


def _no_watch(kind: str, watch: bool) -> None:
    if watch:
        raise ValueError(f"{kind} cannot set a watch")


def _b_create(req: Any, chroot: str, watch: bool) -> Plan:
    if watch:
        _no_watch("create", watch)
    opcode, body = _encode_create_request(req, chroot)
    return Plan(opcode, body, decode_created, req.path)


def _b_get_acl(req: Any, chroot: str, watch: bool) -> Plan:
    _no_watch("getACL", watch)
    return Plan(OpCode.GET_ACL, write_string(to_server(req.path, chroot)), decode_acl, req.path)


def _b_delete(req: Any, chroot: str, watch: bool) -> Plan:
    _no_watch("delete", watch)
    body = _path_int(to_server(req.path, chroot), req.version)
    return Plan(OpCode.DELETE, body, decode_nothing, req.path)


def _b_exists(req: Any, chroot: str, watch: bool) -> Plan:
    body = _path_watch(to_server(req.path, chroot), watch)
    if watch:
        return Plan(OpCode.EXISTS, body, decode_exists, req.path, WatchTable.DATA, WatchTable.EXIST)
    return Plan(OpCode.EXISTS, body, decode_exists, req.path)


def _b_get_data(req: Any, chroot: str, watch: bool) -> Plan:
    body = _path_watch(to_server(req.path, chroot), watch)
    kind = WatchTable.DATA if watch else None
    return Plan(OpCode.GET_DATA, body, decode_node_data, req.path, kind)


def _b_get_children(req: Any, chroot: str, watch: bool) -> Plan:
    body = _path_watch(to_server(req.path, chroot), watch)
    kind = WatchTable.CHILD if watch else None
    if req.with_stat:
        return Plan(OpCode.GET_CHILDREN2, body, decode_children_with_stat, req.path, kind)
    return Plan(OpCode.GET_CHILDREN, body, decode_children, req.path, kind)


def _b_set_data(req: Any, chroot: str, watch: bool) -> Plan:
    _no_watch("setData", watch)
    return Plan(OpCode.SET_DATA, _set_data_body(req, chroot), decode_stat, req.path)


def _b_check(req: Any, chroot: str, watch: bool) -> Plan:
    raise TypeError("Check is only valid inside a Multi")


def _b_sync(req: Any, chroot: str, watch: bool) -> Plan:
    _no_watch("sync", watch)
    return Plan(OpCode.SYNC, write_string(to_server(req.path, chroot)), decode_path, req.path)


def _b_add_watch(req: Any, chroot: str, watch: bool) -> Plan:
    if not watch:
        raise ValueError("AddWatch needs a watcher")
    kind = (
        WatchTable.PERSISTENT_RECURSIVE
        if req.mode == AddWatchMode.PERSISTENT_RECURSIVE
        else WatchTable.PERSISTENT
    )
    body = _path_int(to_server(req.path, chroot), int(req.mode))
    return Plan(OpCode.ADD_WATCH, body, decode_nothing, req.path, kind)


def _b_multi(req: Any, chroot: str, watch: bool) -> Plan:
    _no_watch("multi", watch)
    return Plan(OpCode.MULTI, encode_multi(req.ops, chroot), decode_multi, None)


def _b_sasl(req: Any, chroot: str, watch: bool) -> Plan:
    _no_watch("sasl", watch)
    return Plan(OpCode.SASL, write_buffer(req.token), decode_sasl, None)


_BUILDERS: dict[type, Callable[[Any, str, bool], Plan]] = {
    Create: _b_create,
    Delete: _b_delete,
    Exists: _b_exists,
    GetData: _b_get_data,
    GetChildren: _b_get_children,
    GetACL: _b_get_acl,
    SetData: _b_set_data,
    Check: _b_check,
    Sync: _b_sync,
    AddWatch: _b_add_watch,
    Multi: _b_multi,
    GetSASLRequest: _b_sasl,
}

__all__ = [
    "CONNECT_STRING_FORM",
    "Plan",
    "decode_acl",
    "decode_connect_response",
    "decode_multi",
    "decode_sasl",
    "decode_watcher_event",
    "encode_auth",
    "encode_connect",
    "encode_create",
    "encode_multi",
    "encode_set_watches",
    "from_server",
    "parse_hosts",
    "path_problem",
    "plan",
    "refused_char",
    "shown_path",
    "to_server",
    "validate_path",
]
