"""What both clients' transactions share: the ops added, checked as they are added, and
the rule that a transaction is committed once. The commit itself is the flow
``zklocks._core.transaction.commit``; each client's ``commit()`` only runs it."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

from zklocks._core import transaction as _transaction
from zklocks._core.lease import LeaseBase
from zklocks._core.ops import Op
from zklocks._core.security import AclPolicy
from zklocks._core.transaction import TransactionResult
from zklocks._errors import InvalidArgument
from zklocks._protocol.records import MultiOp


class TransactionBuilder:
    """The ops of one transaction, in the order they were added.

    Each method checks its arguments at once (``InvalidPath``, ``InvalidArgument``), so
    a mistake is reported where it was made rather than at commit. Nothing is sent
    before ``commit()``. A transaction is committed once: a second ``commit()``, or an op
    added after the first, raises ``InvalidArgument`` whatever the first one's outcome
    was (a retry is a new transaction, built from what the caller read again).
    """

    def __init__(self, guard: object, acl: AclPolicy | None) -> None:
        self._guard: LeaseBase | None = _transaction.guard_of(guard)
        self._acl = () if acl is None else acl.wire  # None: ZooKeeper's open ACL
        self._ops: list[MultiOp] = []
        self._committed = False
        self._mutex = threading.Lock()  # commit-once also holds across threads

    @property
    def guard(self) -> LeaseBase | None:
        """The lease the commit is conditional on (None: a plain multi)."""
        return self._guard

    def __repr__(self) -> str:
        state = "committed" if self._committed else f"{len(self._ops)} ops"
        guard = "" if self._guard is None else f" guard={self._guard.node}"
        return f"<{type(self).__name__} {state}{guard}>"

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> None:
        """Create ``path`` with ``data``: persistent unless ``ephemeral`` (then it ends with
        this client's session), ``sequential`` appends ZooKeeper's sequence number (the
        result says the path made). The client's ``acl`` applies. The parent must exist
        (or be created by an earlier op of the same transaction)."""
        self._add(
            _transaction.create_op(
                path, data, ephemeral=ephemeral, sequential=sequential, acl=self._acl
            )
        )

    def set_data(self, path: str, data: bytes, version: int = -1) -> None:
        """Replace ``path``'s data if its version is ``version`` (-1: any version)."""
        self._add(_transaction.set_data_op(path, data, version))

    def delete(self, path: str, version: int = -1) -> None:
        """Delete ``path`` (it must have no children) if its version is ``version``
        (-1: any version)."""
        self._add(_transaction.delete_op(path, version))

    def check(self, path: str, version: int) -> None:
        """Apply nothing unless ``path`` exists with ``version`` (-1: exists at all)."""
        self._add(_transaction.check_op(path, version))

    def _add(self, op: MultiOp) -> None:
        with self._mutex:
            if self._committed:
                raise InvalidArgument("this transaction was committed; build a new one")
            self._ops.append(op)

    def _commit_flow(self) -> Generator[Op, Any, list[TransactionResult]]:
        """The commit, to be run by a driver; marks the transaction spent first."""
        with self._mutex:
            if self._committed:
                raise InvalidArgument("a transaction is committed once; build a new one")
            self._committed = True
            ops = tuple(self._ops)
        return _transaction.commit(ops, self._guard)
