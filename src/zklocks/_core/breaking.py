"""Break: an administrator's forced release of a lock's current holders.

Unlike a revoke (a request the holder may honour), a break deletes the holders' nodes:
the next waiter is granted at once, while the old holder may still be working. Only
fencing tokens protect the resource then (docs/fencing.md), which is why a break names
every token it broke.

The holders are read first (shown, confirmed, matched against ``--token``), then deleted
in one multi that checks each node's version before deleting it: if any holder changed
(released, revoked, re-taken) after it was read, nothing is deleted at all.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from zklocks._core import nodes as _nodes
from zklocks._core.contenders import read_line
from zklocks._core.flow import access_denied
from zklocks._core.ops import Op
from zklocks._protocol.errors import (
    BadVersionError,
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
)
from zklocks._protocol.records import Check, Delete, Multi


@dataclass(frozen=True, slots=True)
class Holder:
    """A holder's node as read before the break: what to show, and what to check."""

    node: str
    token: int
    version: int
    identifier: str
    host: str
    pid: int


def current_holders(path: str) -> Generator[Op, Any, list[Holder]]:
    """Every current holder of ``path``, of any layout, in line order."""
    read, holding = yield from read_line(path)
    holders = []
    for node, reply in read:
        if node.name in holding:
            payload = _nodes.decode_payload(reply.data)
            holders.append(
                Holder(
                    node=f"{path}/{node.name}",
                    token=reply.stat.czxid,
                    version=reply.stat.version,
                    identifier=payload.identifier,
                    host=payload.host,
                    pid=payload.pid,
                )
            )
    return holders


def choose(holders: Sequence[Holder], token: int | None) -> list[Holder]:
    """Whom to break: every holder, or only the one whose token is ``token``."""
    if token is None:
        return list(holders)
    return [holder for holder in holders if holder.token == token]


def break_holders(holders: Sequence[Holder]) -> Generator[Op, Any, str | None]:
    """Delete ``holders`` all at once, each only if unchanged since read; None when
    done, else why nothing was deleted."""
    if not holders:
        return "no holder to break"
    ops: list[Check | Delete] = []
    for holder in holders:
        ops += [Check(holder.node, holder.version), Delete(holder.node, version=holder.version)]
    reply = yield Multi(tuple(ops))
    if isinstance(reply, list):
        return None
    if isinstance(reply, NoAuthError):
        raise access_denied(holders[0].node, "delete")
    if isinstance(reply, BadVersionError | NoNodeError):
        return "a holder changed (released, re-taken or asked to let go) since it was read"
    if isinstance(reply, ConnectionLossError):
        return "the connection was lost: the break may or may not have been applied"
    return f"ZooKeeper refused the break: {reply}"
