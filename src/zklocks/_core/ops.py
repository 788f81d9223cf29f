"""The operations a lock flow yields and the replies a driver sends back.

A flow (``zklocks._core.flow``) never performs I/O: it yields one of the operations below
and is resumed with the reply. Three drivers run flows — the sync front end, the asyncio
front end and the simulator — so this module is their whole contract:

* ``Create``, ``Delete``, ``GetChildren``, ``GetData``, ``Exists`` are single ZooKeeper
  requests. The reply is the value documented on the class, or an *instance* of a
  ``zklocks._protocol.errors.ZooKeeperError`` subclass (never raised into the flow: a
  refused request is an answer the flow inspects, not control flow).
* ``Pipeline`` sends several requests back to back without waiting in between (ZooKeeper
  answers one session's requests in order) and replies with a tuple of their replies.
* ``CreateParents`` makes the lock path and any missing ancestors as container nodes,
  ignoring ones that already exist. Reply: ``None`` or an error.
* ``AwaitDeletion`` sets an exists-watch on each node and waits until one of them is
  gone. Reply: ``Gone(node)`` (that node no longer exists; a data change is *not* a
  deletion, the driver re-arms the watch), ``TIMED_OUT`` (the deadline passed first), or
  an error such as ``SessionExpiredError``.
* ``SessionId`` asks which session the client currently has. Reply: ``int``.
* ``GetACL`` reads a node's access-control list. Reply: ``NodeACL`` or an error.

``Create`` and ``CreateParents`` carry ``acl``: the entries (``zklocks._protocol.records.ACL``)
the new nodes get; empty means ZooKeeper's open ACL (``world:anyone``, all permissions).

Requests carry ``deadline``: an absolute instant on the *driver's* clock, or ``None``.
A driver that cannot *send* the request by then (e.g. while reconnecting) replies
``TIMED_OUT``, which therefore always means "never sent, never applied"; a request once
sent is waited for until it is answered or fails with ``ConnectionLossError``.
Cleanup requests carry ``None``: they wait for a connection as long as the session
lives (if it expires, the server has removed our ephemeral nodes anyway).

An operation yielded again after a failure carries ``retry=True``: a driver never sends
a retry once its deadline has passed, connected or not, and replies ``TIMED_OUT``. A
first try is still sent while connected (``timeout=0`` on a free lock succeeds), but a
loop of fast failures (a deleted chroot, a server that breaks every connection) ends
at the deadline.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from zklocks._protocol.errors import ZooKeeperError
from zklocks._protocol.records import (
    ACL,
    Create,
    Created,
    Delete,
    Exists,
    GetACL,
    GetChildren,
    GetData,
    NodeACL,
    NodeData,
    Stat,
)

__all__ = [
    "ACL",
    "TIMED_OUT",
    "AwaitDeletion",
    "Create",
    "CreateParents",
    "Created",
    "Delete",
    "Exists",
    "GetACL",
    "GetChildren",
    "GetData",
    "Gone",
    "NodeACL",
    "NodeData",
    "Op",
    "Pipeline",
    "Reply",
    "Request",
    "SessionId",
    "Stat",
    "Wake",
]


class Wake(enum.Enum):
    """The deadline passed before the request could be sent (or the wait ended)."""

    TIMED_OUT = "timed out"


TIMED_OUT = Wake.TIMED_OUT


@dataclass(frozen=True, slots=True)
class Gone:
    """Reply to ``AwaitDeletion``: this watched node (full path) no longer exists."""

    node: str


@dataclass(frozen=True, slots=True)
class CreateParents:
    """Create ``path`` and its missing ancestors as container nodes. Reply: ``None`` or error."""

    path: str
    deadline: float | None = None
    retry: bool = False
    acl: tuple[ACL, ...] = ()


@dataclass(frozen=True, slots=True)
class AwaitDeletion:
    """Watch ``nodes`` (full paths) until one is gone. Reply: ``Gone``, ``TIMED_OUT``, error."""

    nodes: tuple[str, ...]
    deadline: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class SessionId:
    """Which session the client has now. Reply: ``int``."""


Request: TypeAlias = Create | Delete | GetChildren | GetData | Exists | GetACL


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Send ``requests`` back to back; reply with the tuple of their replies, in order."""

    requests: tuple[Request, ...]


Op: TypeAlias = Request | Pipeline | CreateParents | AwaitDeletion | SessionId

Reply: TypeAlias = (
    Created
    | NodeData
    | Stat
    | list[str]
    | tuple["Reply", ...]
    | Gone
    | Wake
    | int
    | NodeACL
    | ZooKeeperError
    | None
)
