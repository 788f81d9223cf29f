"""The records the client sends and receives, named after the jute records they encode.

The lock flows' requests are the first six here (``Create``, ``Delete``, ``GetChildren``,
``GetData``, ``Exists``, ``GetACL``) with their replies (``Created``, ``NodeData``,
``Stat``, ``NodeACL``); they also say when they may still be sent (``deadline``,
``retry``: read by drivers, ignored by the codec). The rest serve users of the
connection beyond locks: ``CreateRequest`` (every create mode, TTL), ``DeleteRequest``
and ``SetDataRequest`` (with a version), ``ExistsRequest`` / ``GetDataRequest`` /
``GetChildrenRequest`` (full stat), ``CheckRequest`` (multi only), ``MultiRequest``,
``SyncRequest``, ``AddWatchRequest``; ACLs and identities.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from zklocks._protocol.constants import AddWatchMode, CreateMode, Perm


@dataclass(frozen=True, slots=True)
class Stat:
    """The parts of a ZooKeeper ``Stat`` the lock flows and ``contenders()`` use."""

    czxid: int
    mzxid: int = 0
    ctime_ms: int = 0
    version: int = 0
    ephemeral_owner: int = 0
    num_children: int = 0


@dataclass(frozen=True, slots=True)
class Created:
    """Reply to ``Create``: the node's full path (with its sequence suffix) and its stat."""

    path: str
    stat: Stat


@dataclass(frozen=True, slots=True)
class NodeData:
    """Reply to ``GetData``."""

    data: bytes
    stat: Stat


@dataclass(frozen=True, slots=True)
class NodeACL:
    """Reply to ``GetACL``: the node's entries as the server stores them."""

    entries: tuple[ACL, ...]


@dataclass(frozen=True, slots=True)
class Create:
    """Create a node. Reply: ``Created``, or an error (``NoNodeError``: no parent)."""

    path: str
    data: bytes = b""
    ephemeral: bool = True
    sequential: bool = False
    container: bool = False
    deadline: float | None = None
    retry: bool = False
    acl: tuple[ACL, ...] = ()


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete a node, any version. Reply: ``None`` or an error."""

    path: str
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class GetChildren:
    """List a node's children (names only, no watch). Reply: ``list[str]`` or an error."""

    path: str
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class GetData:
    """Read a node. Reply: ``NodeData`` or an error."""

    path: str
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Exists:
    """Stat a node without a watch. Reply: ``Stat``, ``None`` when absent, or an error."""

    path: str
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class GetACL:
    """Read a node's ACL. Reply: ``NodeACL`` or an error (``NoNodeError``)."""

    path: str
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Id:
    """An ACL identity: ``scheme`` (world, auth, digest, ip, ...) and its ``id``."""

    scheme: str
    id: str


@dataclass(frozen=True, slots=True)
class ACL:
    """One access-control entry: permission bits for an identity."""

    perms: int
    id: Id


OPEN_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perm.ALL, Id("world", "anyone")),)
READ_ACL_UNSAFE: tuple[ACL, ...] = (ACL(Perm.READ, Id("world", "anyone")),)
CREATOR_ALL_ACL: tuple[ACL, ...] = (ACL(Perm.ALL, Id("auth", "")),)


def digest_id(user: str, password: str) -> Id:
    """The ``digest`` identity a session gets after ``addAuth("digest", b"user:password")``."""
    digest = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return Id("digest", f"{user}:{base64.b64encode(digest).decode('ascii')}")


def digest_acl(user: str, password: str, perms: int = Perm.ALL) -> ACL:
    """An ACL entry granting ``perms`` to whoever authenticates as ``user:password``."""
    return ACL(perms, digest_id(user, password))


@dataclass(frozen=True, slots=True)
class ZnodeStat(Stat):
    """Every field of ZooKeeper's ``Stat`` (a ``zklocks._core.ops.Stat`` with the rest added)."""

    mtime_ms: int = 0
    cversion: int = 0
    aversion: int = 0
    data_length: int = 0
    pzxid: int = 0


@dataclass(frozen=True, slots=True)
class Children:
    """Reply to ``GetChildrenRequest`` (getChildren2): child names and the parent's stat."""

    names: list[str]
    stat: ZnodeStat


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Create a node in any mode. Reply: ``Created`` (path with sequence suffix, full stat).

    TTL modes need ``ttl_ms > 0`` and a server started with
    ``zookeeper.extendedTypesEnabled=true``; other servers answer ``UnimplementedError``.
    """

    path: str
    data: bytes = b""
    mode: CreateMode = CreateMode.PERSISTENT
    acl: Sequence[ACL] = OPEN_ACL_UNSAFE
    ttl_ms: int = 0

    def __post_init__(self) -> None:
        if self.mode.is_ttl and self.ttl_ms <= 0:
            raise ValueError(f"{self.mode.name} needs ttl_ms > 0")
        if not self.mode.is_ttl and self.ttl_ms:
            raise ValueError(f"ttl_ms is only allowed with a TTL mode, not {self.mode.name}")
        if not self.acl:
            raise ValueError("a node needs at least one ACL entry")


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """Delete a node if its version matches (``-1``: any). Reply: ``None``."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class ExistsRequest:
    """Stat a node. Reply: ``ZnodeStat``, or ``None`` when absent (a watch is still set)."""

    path: str


@dataclass(frozen=True, slots=True)
class GetDataRequest:
    """Read a node. Reply: ``NodeData`` whose ``stat`` is a ``ZnodeStat``."""

    path: str


@dataclass(frozen=True, slots=True)
class SetDataRequest:
    """Replace a node's data if its version matches (``-1``: any). Reply: ``ZnodeStat``."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class GetChildrenRequest:
    """List children with the parent's stat (getChildren2). Reply: ``Children``."""

    path: str


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """Inside a multi only: fail the transaction unless the node has ``version``."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """Let the server this session talks to catch up with the leader. Reply: the path."""

    path: str


@dataclass(frozen=True, slots=True)
class AddWatchRequest:
    """Set a persistent (optionally recursive) watch (ZooKeeper 3.6+). Reply: ``None``.

    The watcher stays until the session ends; it sees ``CREATED``, ``DELETED``,
    ``CHANGED`` (and for a non-recursive watch ``CHILD``) for the path — a recursive one
    for every node below it too.
    """

    path: str
    mode: AddWatchMode = AddWatchMode.PERSISTENT_RECURSIVE


MultiOp: TypeAlias = CreateRequest | DeleteRequest | SetDataRequest | CheckRequest | Create | Delete


@dataclass(frozen=True, slots=True)
class MultiRequest:
    """Apply ``ops`` atomically. Reply: a list with one result per op.

    Results: the created path (``str``: inside a multi ZooKeeper 3.8 answers a create
    with the path only, no stat), ``None`` for delete and check, ``ZnodeStat`` for
    setData. When the transaction fails nothing is applied and the request fails with the
    error of the op that failed; that error's ``results`` holds one error per op
    (``RolledBackError`` before it, ``RuntimeInconsistencyError`` after it).
    """

    ops: tuple[MultiOp, ...]

    def __post_init__(self) -> None:
        for op in self.ops:
            if not isinstance(
                op, CreateRequest | DeleteRequest | SetDataRequest | CheckRequest | Create | Delete
            ):
                raise TypeError(f"{type(op).__name__} cannot be part of a multi")


MultiResult: TypeAlias = str | Created | ZnodeStat | None

__all__ = [
    "ACL",
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "AddWatchRequest",
    "CheckRequest",
    "Children",
    "CreateRequest",
    "DeleteRequest",
    "ExistsRequest",
    "GetChildrenRequest",
    "GetDataRequest",
    "Id",
    "MultiOp",
    "MultiRequest",
    "MultiResult",
    "NodeData",
    "SetDataRequest",
    "SyncRequest",
    "ZnodeStat",
    "digest_acl",
    "digest_id",
]
