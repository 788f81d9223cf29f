"""Revoke: asking the holders of a lock to let go, and a holder hearing it.

Revocation is cooperative. Nothing is deleted: the asker writes a marker into each
holder's node data, and a holder that watches its node's data hears the change and may
release (``lease.add_revoke_callback``). Curator's revocable locks use the same scheme
with the bytes ``__REVOKE__`` (its ``Revoker.attemptRevoke``, read back by
``LockInternals``), so a node named in Curator's (or kazoo's) dialect gets exactly those
bytes and a revocable Curator holder hears us. Our own nodes keep their JSON payload, so
``zklocks status`` still shows who holds, with one field added: ``"revoke": true``. A
holder recognises both markers, whatever its layout, so a revoke sent by Curator reaches
our callbacks too.

Who is a holder is decided as ``contenders()`` decides it (every layout's rules on the
one listing), so ``revoke`` needs no layout argument.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from zklocks._core import nodes as _nodes
from zklocks._core.contenders import read_line
from zklocks._core.flow import access_denied
from zklocks._core.ops import Op
from zklocks._errors import LockError
from zklocks._protocol.errors import (
    BadVersionError,
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import GetData, Multi, NodeData, SetData

CURATOR_MARKER = b"__REVOKE__"
"""What Curator's ``Revoker`` writes, and what its revocable holders listen for."""

_RETRIES = 2  # a connection lost (or a concurrent rewrite) this often in a row: give up


def is_request(data: bytes) -> bool:
    """Does a node's data ask its holder to let go (our marker or Curator's)?"""
    if data == CURATOR_MARKER:
        return True
    if not data.startswith(b"{"):
        return False
    try:
        fields = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(fields, dict) and fields.get("revoke") is True


def marked(data: bytes, dialect: str) -> bytes:
    """``data`` with the request written in: Curator's bytes for a peer's node, our
    payload with ``"revoke": true`` for ours (anything unreadable: Curator's bytes)."""
    if dialect != "zklocks":
        return CURATOR_MARKER
    try:
        fields = json.loads(data)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return CURATOR_MARKER
    if not isinstance(fields, dict):
        return CURATOR_MARKER
    fields["revoke"] = True
    return json.dumps(fields, separators=(",", ":")).encode()


def revoke(path: str) -> Generator[Op, Any, int]:
    """Ask every current holder of ``path`` to let go; how many were asked.

    Our payload is rewritten with a version check (a read-modify-write that another
    writer cannot interleave); a holder gone meanwhile is not counted.
    """
    read, holding = yield from read_line(path)
    asked = 0
    for node, reply in read:
        if node.name in holding and (yield from _ask(f"{path}/{node.name}", node, reply)):
            asked += 1
    return asked


def _ask(node_path: str, node: _nodes.NodeName, reply: NodeData) -> Generator[Op, Any, bool]:
    for _ in range(_RETRIES + 1):
        # a multi of one: the flows' requests carry a deadline, a bare setData does not
        ask = SetData(node_path, marked(reply.data, node.dialect), reply.stat.version)
        written = yield Multi((ask,))
        if isinstance(written, NoNodeError | SessionExpiredError):
            return False  # let go already
        if isinstance(written, NoAuthError):
            raise access_denied(node_path, "setData")
        if not isinstance(written, BadVersionError | ConnectionLossError):
            if isinstance(written, BaseException):
                raise LockError(f"cannot ask {node_path} to let go: {written}")
            return True
        fresh = yield GetData(node_path)  # rewritten meanwhile, or the reply was lost
        if not isinstance(fresh, NodeData):
            return False
        if is_request(fresh.data):
            return True  # asked already (by us, if a lost reply had been applied)
        reply = fresh
    return False


def read_data(node: str) -> Generator[Op, Any, bytes | None]:
    """A holder's look at its own node's data (None: gone, or no answer)."""
    for _ in range(_RETRIES + 1):
        reply = yield GetData(node)
        if isinstance(reply, NodeData):
            return reply.data
        if not isinstance(reply, ConnectionLossError):
            return None
    return None
