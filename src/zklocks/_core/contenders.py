"""``contenders()``: who holds and who waits on a lock path, for people and tools.

A flow like the acquire flow (no I/O): list the children, read every contender's data in
one pipelined round trip, and mark the holders with the same strategies the lock uses,
so what an operator sees is exactly what the lock decides.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from zklocks._core import dialects as _dialects
from zklocks._core import layouts as _layouts
from zklocks._core import nodes as _nodes
from zklocks._core.contender import Contender, contender_of
from zklocks._core.flow import access_denied
from zklocks._core.ops import Op, Pipeline
from zklocks._errors import LockError
from zklocks._protocol.errors import (
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
    ZooKeeperError,
)
from zklocks._protocol.records import GetACL, GetChildren, GetData, NodeACL, NodeData, Sync, WireACL

__all__ = ["Contender", "directory_acl", "list_contenders", "read_line"]


def list_contenders(path: str) -> Generator[Op, Any, list[Contender]]:
    """Holders first, then waiters in line order; nodes that vanish meanwhile are skipped."""
    read, holding = yield from read_line(path)
    found = [contender_of(path, node, reply, node.name in holding) for node, reply in read]
    return sorted(found, key=lambda c: not c.holder)  # stable: line order kept


def read_line(
    path: str,
) -> Generator[Op, Any, tuple[list[tuple[_nodes.NodeName, NodeData]], set[str]]]:
    """Every contender node of any layout with its data, in line order, and the names of
    the holders: what ``contenders()`` shows and whom ``revoke`` asks."""
    while True:
        children = yield GetChildren(path)
        if isinstance(children, NoNodeError):
            return [], set()
        if isinstance(children, ConnectionLossError):
            continue
        if isinstance(children, NoAuthError):
            raise access_denied(path, "list")
        if not isinstance(children, list):
            raise LockError(f"cannot list {path}: {children}")
        line = _dialects.line_of_any(children)
        replies = yield Pipeline(tuple(GetData(f"{path}/{node.name}") for node in line))
        if any(isinstance(reply, ConnectionLossError) for reply in replies):
            continue
        for node, reply in zip(line, replies, strict=True):
            if isinstance(reply, NoAuthError):  # a node whose ACL hides it from us
                raise access_denied(f"{path}/{node.name}", "read")
        read = [
            (node, reply)
            for node, reply in zip(line, replies, strict=True)
            if isinstance(reply, NodeData)
        ]
        vanished = {node.name for node, reply in zip(line, replies, strict=True)} - {
            node.name for node, _ in read
        }
        holding = _layouts.holders(
            (node for node, _ in read), (name for name in children if name not in vanished)
        )
        return read, holding


def sync(path: str) -> Generator[Op, Any, None]:
    """Let the member this session talks to catch up with the leader (for ``path``):
    what it answers next is at least as new as any write the leader had committed."""
    while True:
        reply = yield Sync(path)
        if isinstance(reply, ConnectionLossError):
            continue
        if isinstance(reply, NoAuthError):
            raise access_denied(path, "sync")
        if isinstance(reply, ZooKeeperError):
            raise LockError(f"cannot sync {path}: {reply}")
        return


def directory_acl(path: str) -> Generator[Op, Any, tuple[WireACL, ...] | None]:
    """The lock directory's ACL as stored (``None``: no such node), for ``status``."""
    while True:
        reply = yield GetACL(path)
        if isinstance(reply, NodeACL):
            return reply.entries
        if isinstance(reply, NoNodeError):
            return None
        if isinstance(reply, NoAuthError):
            raise access_denied(path, "getACL")
        if not isinstance(reply, ConnectionLossError):
            raise LockError(f"cannot read the ACL of {path}: {reply}")
