"""The records the client sends and receives, named after the ZooKeeper operations.

One family: one request record per operation, used alike by the lock flows (through
``zklocks._core.ops``) and by the connection's convenience API. Every field a lock flow
does not set has a default that keeps the flows' calls and their bytes as they are:

* ``Create`` (reply ``Created``): ephemeral by default; ``sequential``, ``container``,
  ``ttl_ms`` (a persistent TTL node) and ``acl`` (empty: the open ACL) choose the rest
  of ZooKeeper's create modes (``mode`` names the one the flags add up to).
* ``Delete`` (``None``) and ``SetData`` (``Stat``): ``version`` ``-1`` means any.
* ``GetChildren`` (``list[str]``; ``Children`` with ``with_stat=True``: getChildren2),
  ``GetData`` (``NodeData``), ``Exists`` (``Stat``, ``None`` when absent), ``GetACL``
  (``NodeACL``).
* ``Check`` (inside a ``Multi`` only), ``Multi``, ``Sync``, ``AddWatch``.
* ``GetSASLRequest`` (reply ``SetSASLResponse``): one step of a SASL exchange, named
  after ZooKeeper's own jute records; the connection runs the exchange.

The flows' requests also say when they may still be sent (``deadline``, ``retry``: read
by drivers, ignored by the codec). ``Stat`` is ZooKeeper's whole stat, one record for
every reply that carries one.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

from zklocks._protocol.constants import AddWatchMode, CreateMode, Perm


class Stat(NamedTuple):
    """A node's ``Stat``, every field, in the order the wire carries them.

    A named tuple, not a frozen dataclass, for speed: every create, exists and getData
    reply of a lock cycle decodes one, and building it straight from the unpacked wire
    tuple costs a third of what a frozen dataclass's ``__init__`` does (about 0.7 µs
    against 2.3 µs measured on this machine, for 11 fields against the 6 the flows read).
    kazoo's ``ZnodeStat`` is a named tuple for the same reason. Fields other than
    ``czxid`` default to 0 so tests and the simulator name only the ones they mean.

    Public as ``zklocks.Stat`` (what ``client.get`` and ``exists`` return, and a
    transaction's ``set_data`` result): ``version`` is the data's version, which a
    read-modify-write passes back to ``set_data``; ``czxid`` / ``mzxid`` the
    transactions that created and last changed the node; ``ctime_ms`` / ``mtime_ms``
    when (ms since the epoch, the server's clock); ``cversion`` the children's version;
    ``ephemeral_owner`` the owning session (0: persistent); ``data_length``,
    ``num_children``; ``pzxid`` the last change to the children.
    """

    czxid: int
    mzxid: int = 0
    ctime_ms: int = 0
    mtime_ms: int = 0
    version: int = 0
    cversion: int = 0
    aversion: int = 0
    ephemeral_owner: int = 0
    data_length: int = 0
    num_children: int = 0
    pzxid: int = 0


@dataclass(frozen=True, slots=True)
class Created:
    """Reply to ``Create``: the node's full path (with its sequence suffix) and its stat."""

    path: str
    stat: Stat


class CreatedPath(str):
    """A create's result inside a multi (``client.transaction()``): the node's full path,
    a ``str``, with ``stat``, its ``Stat`` when the server sent one, else None.

    We send every create as ``create2``. ZooKeeper 3.8.0 and 3.8.1 answer one inside a
    multi with the path only; 3.8.2 and later, 3.9 included, with the path and the
    node's Stat (ZOOKEEPER-4026). One type for both, and a ``str``, so code written for
    the path works whatever the server; ``stat.czxid`` (the node's token) comes without
    another read where the server sends it. Equality, hashing and ``repr`` are the
    path's. (A ``str`` subclass cannot have slots, hence the instance dict.)
    """

    _stat: Stat | None

    def __new__(cls, path: str, stat: Stat | None = None) -> CreatedPath:
        created = super().__new__(cls, path)
        created._stat = stat
        return created

    @property
    def stat(self) -> Stat | None:
        return self._stat


@dataclass(frozen=True, slots=True)
class NodeData:
    """Reply to ``GetData``."""

    data: bytes
    stat: Stat


@dataclass(frozen=True, slots=True)
class NodeACL:
    """Reply to ``GetACL``: the node's entries as the server stores them."""

    entries: tuple[WireACL, ...]


@dataclass(frozen=True, slots=True)
class Children:
    """Reply to ``GetChildren(with_stat=True)`` (getChildren2): names and the parent's stat."""

    names: list[str]
    stat: Stat


@dataclass(frozen=True, slots=True)
class Create:
    """Create a node. Reply: ``Created``, or an error (``NoNodeError``: no parent).

    The flags add up to one of ZooKeeper's create modes (``mode``); a combination that
    is none (a container that is ephemeral or sequential, a TTL node that is ephemeral
    or a container) is refused with ``ValueError`` when the request is encoded. TTL
    nodes (``ttl_ms > 0``, with ``ephemeral=False``) need a server started with
    ``zookeeper.extendedTypesEnabled=true``; others answer ``UnimplementedError``.
    """

    path: str
    data: bytes = b""
    ephemeral: bool = True
    sequential: bool = False
    container: bool = False
    deadline: float | None = None
    retry: bool = False
    acl: tuple[WireACL, ...] = ()
    ttl_ms: int = 0

    @property
    def mode(self) -> CreateMode:
        """The create mode the flags add up to; ``ValueError`` if they add up to none."""
        if self.container:
            if self.ephemeral or self.sequential or self.ttl_ms:
                raise ValueError("a container node cannot be ephemeral, sequential or TTL")
            return CreateMode.CONTAINER
        if self.ttl_ms:
            if self.ttl_ms < 0:
                raise ValueError(f"ttl_ms must be positive, not {self.ttl_ms}")
            if self.ephemeral:
                raise ValueError("a TTL node cannot be ephemeral (pass ephemeral=False)")
            if self.sequential:
                return CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL
            return CreateMode.PERSISTENT_WITH_TTL
        return CreateMode(int(self.ephemeral) | (2 if self.sequential else 0))


@dataclass(frozen=True, slots=True)
class _NodeRequest:
    """A flow's request on one node: its path, and when a driver may still send it.

    ``deadline`` and ``retry`` are read by drivers and ignored by the codec (the rules:
    ``zklocks._core.ops``). Each subclass is its own request; this base only spares
    them the fields they share.
    """

    path: str
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Delete(_NodeRequest):
    """Delete a node if its version matches (``-1``: any). Reply: ``None`` or an error."""

    version: int = -1


@dataclass(frozen=True, slots=True)
class GetChildren(_NodeRequest):
    """List a node's children. Reply: ``list[str]`` or an error.

    ``with_stat=True`` sends getChildren2 instead, whose reply ``Children`` adds the
    parent's stat.
    """

    with_stat: bool = False


@dataclass(frozen=True, slots=True)
class GetData(_NodeRequest):
    """Read a node. Reply: ``NodeData`` or an error."""


@dataclass(frozen=True, slots=True)
class Exists(_NodeRequest):
    """Stat a node. Reply: ``Stat``, ``None`` when absent (a watch is still set), or an error."""


@dataclass(frozen=True, slots=True)
class GetACL(_NodeRequest):
    """Read a node's ACL. Reply: ``NodeACL`` or an error (``NoNodeError``)."""


@dataclass(frozen=True, slots=True)
class SetData:
    """Replace a node's data if its version matches (``-1``: any). Reply: ``Stat``."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    """Inside a multi only: fail the transaction unless the node has ``version``."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class Sync(_NodeRequest):
    """Let the server this session talks to catch up with the leader. Reply: the path."""


@dataclass(frozen=True, slots=True)
class AddWatch:
    """Set a persistent (optionally recursive) watch (ZooKeeper 3.6+). Reply: ``None``.

    The watcher stays until the session ends; it sees ``CREATED``, ``DELETED``,
    ``CHANGED`` (and for a non-recursive watch ``CHILD``) for the path — a recursive one
    for every node below it too.
    """

    path: str
    mode: AddWatchMode = AddWatchMode.PERSISTENT_RECURSIVE
    # read by drivers, as a ``_NodeRequest``'s (``client.watch_tree`` runs it as a flow)
    deadline: float | None = None
    retry: bool = False


MultiOp: TypeAlias = Create | Delete | SetData | Check


@dataclass(frozen=True, slots=True)
class Multi:
    """Apply ``ops`` atomically. Reply: a list with one result per op.

    Results: the created path (``str``: inside a multi ZooKeeper 3.8 answers a create
    with the path only, no stat), ``None`` for delete and check, ``Stat`` for setData.
    When the transaction fails nothing is applied and the request fails with the error
    of the op that failed; that error's ``results`` holds one error per op
    (``RolledBackError`` before it, ``RuntimeInconsistencyError`` after it).
    ``deadline`` and ``retry`` are read by drivers, as on the flows' other requests.
    """

    ops: tuple[MultiOp, ...]
    deadline: float | None = None
    retry: bool = False

    @property
    def path(self) -> str:
        """The first op's path ("/" with none): what a trace or a log shows for it."""
        return self.ops[0].path if self.ops else "/"

    def __post_init__(self) -> None:
        for op in self.ops:
            if not isinstance(op, Create | Delete | SetData | Check):
                raise TypeError(f"{type(op).__name__} cannot be part of a multi")


MultiResult: TypeAlias = CreatedPath | Stat | None


@dataclass(frozen=True, slots=True)
class GetSASLRequest:
    """One client token of a SASL exchange (opcode ``sasl``). Reply: ``SetSASLResponse``.

    Tokens are derived from secrets, so their bytes stay out of the repr.
    """

    token: bytes

    def __repr__(self) -> str:
        return f"GetSASLRequest(<{len(self.token)} bytes>)"


@dataclass(frozen=True, slots=True)
class SetSASLResponse:
    """The server's token in answer to a ``GetSASLRequest`` (empty once it has none)."""

    token: bytes

    def __repr__(self) -> str:
        return f"SetSASLResponse(<{len(self.token)} bytes>)"


@dataclass(frozen=True, slots=True)
class Id:
    """An ACL identity: ``scheme`` (world, auth, digest, ip, ...) and its ``id``."""

    scheme: str
    id: str


@dataclass(frozen=True, slots=True)
class WireACL:
    """One access-control entry as the wire carries it: permission bits for an identity.

    The public ``zklocks.ACL`` (scheme, id, perms) is turned into these by
    ``zklocks._core.security``; the two names differ so that neither reads as the other.
    """

    perms: int
    id: Id


OPEN_ACL_UNSAFE: tuple[WireACL, ...] = (WireACL(Perm.ALL, Id("world", "anyone")),)
READ_ACL_UNSAFE: tuple[WireACL, ...] = (WireACL(Perm.READ, Id("world", "anyone")),)
CREATOR_ALL_ACL: tuple[WireACL, ...] = (WireACL(Perm.ALL, Id("auth", "")),)


def digest_id(user: str, password: str) -> Id:
    """The ``digest`` identity a session gets after ``addAuth("digest", b"user:password")``."""
    digest = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return Id("digest", f"{user}:{base64.b64encode(digest).decode('ascii')}")


def digest_acl(user: str, password: str, perms: int = Perm.ALL) -> WireACL:
    """An ACL entry granting ``perms`` to whoever authenticates as ``user:password``."""
    return WireACL(perms, digest_id(user, password))


__all__ = [
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "AddWatch",
    "Check",
    "Children",
    "Create",
    "Created",
    "CreatedPath",
    "Delete",
    "Exists",
    "GetACL",
    "GetChildren",
    "GetData",
    "GetSASLRequest",
    "Id",
    "Multi",
    "MultiOp",
    "MultiResult",
    "NodeACL",
    "NodeData",
    "SetData",
    "SetSASLResponse",
    "Stat",
    "Sync",
    "WireACL",
    "digest_acl",
    "digest_id",
]
