"""``Contender``: one node in a lock's line, as people and tools see it.

Its own module, below both ``contenders()`` (which lists them) and the acquire steps
(whose ``LockTimeout`` names the holder it waited for, from the data its watch read).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from zklocks._core import nodes as _nodes
from zklocks._protocol.records import NodeData

__all__ = ["Contender", "contender_of", "describe_holder"]


@dataclass(frozen=True, slots=True)
class Contender:
    """One contender node under a lock path.

    ``kind`` is "lock", "read", "write", "permit" (a semaphore's) or "elect"; ``sequence`` is
    the integer ZooKeeper appended (0 for the one-node ``fair=False`` lock); ``token`` is
    the fencing token the contender holds or will hold (its node's creation zxid).
    ``layout`` is whose naming the node follows: "zklocks", "curator" (Apache Curator,
    or zklocks with ``layout="curator"``) or "kazoo"; a Curator or kazoo node's data
    (Curator's: the client's IP address; kazoo's: its identifier) is its identifier.
    kazoo's ``Lock`` and ``WriteLock`` make the same node: it shows as a "write".
    ``ephemeral`` is False for a node that no session owns (a leftover, or a forgery):
    it never goes away by itself, so whoever queues behind it waits until it is deleted.
    """

    node: str
    kind: str
    sequence: int
    holder: bool
    identifier: str
    created: dt.datetime
    token: int
    host: str = ""
    pid: int = 0
    ephemeral: bool = True
    layout: str = "zklocks"
    owner: int = 0  # the session that owns the node (its ephemeralOwner; 0: none)

    def __str__(self) -> str:
        """As the command line names a holder: identifier, pid, host and token."""
        return describe_holder(self.identifier, self.pid, self.host, self.token)


def describe_holder(identifier: str, pid: int, host: str, token: int) -> str:
    """``name (pid 4242 on worker-3, token 17)``; foreign text shown printable."""
    return f"{_printable(identifier)} (pid {pid} on {_printable(host)}, token {token})"


def _printable(text: str) -> str:
    """Foreign text (another client wrote it) without control or bidi characters."""
    if text.isprintable():
        return text
    return repr(text)[1:-1]


def contender_of(path: str, node: _nodes.NodeName, reply: NodeData, holder: bool) -> Contender:
    """The contender a node of ``path`` and its data (a getData reply) describe."""
    payload = _nodes.decode_payload(reply.data)
    return Contender(
        node=f"{path}/{node.name}",
        kind=node.kind,
        sequence=node.sequence,
        holder=holder,
        identifier=payload.identifier,
        created=dt.datetime.fromtimestamp(reply.stat.ctime_ms / 1000, tz=dt.UTC),
        token=reply.stat.czxid,
        host=payload.host,
        pid=payload.pid,
        ephemeral=reply.stat.ephemeral_owner != 0,
        layout=node.dialect,
        owner=reply.stat.ephemeral_owner,
    )
