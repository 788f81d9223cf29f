"""A transaction: ZooKeeper ops applied all or none, optionally only while a lease holds.

Theory of operation
-------------------
A lock cannot stop a holder that was paused past its session from writing; only the
store it writes to can refuse. When that store is ZooKeeper itself, the refusal can be
exact: a ZooKeeper ``multi`` is applied in the server's one total order, all or nothing,
so a ``check`` that the lease's own node still exists, placed first in the same multi
as the writes, makes the writes conditional on still holding the lock *at the instant
they are applied*. No clock and no token comparison is involved: if the node is gone
(its session expired, it was released or deleted), the check fails and nothing is
applied.

``commit`` is the one flow both clients run (``Transaction.commit`` and
``AsyncTransaction.commit`` are shells around it):

1. **A lease already known to be over guards nothing.** Released (``ended``) or ``lost``
   on the client's own clock: ``LockLost``, and nothing is sent. This also covers the
   one-node lock (``fair=False``), whose node name ``lock`` the next holder creates
   again, so a check of the name alone cannot tell our node from theirs; the lease
   notices the end of its session before a new session can send the multi (only a
   session that ends in the microseconds between this look and the send slips by). The
   queued kinds' names are unique (an attempt token and a sequence number), so for them
   the server's check is exact.
2. **One multi.** ``Check(guard.node, -1)`` (version -1: the node exists) followed by the
   caller's ops, in order. Without a guard it is a plain multi.
3. **The reply.** Success: one result per op (the created path, ``None`` for delete and
   check, the new ``Stat`` for set_data). A failed multi names the op that failed (the
   error instance among ``results`` that is neither rolled back nor after the failure):
   the guard's check is ``LockLost``; any other op is ``TransactionFailed`` with its
   index among the caller's ops and ZooKeeper's name for the error. Either way nothing
   was applied.

A dropped connection with the multi in flight leaves its fate unknown (the server may
have applied it): that is a ``LockError`` saying so, never a silent retry, because a
retry of a create or of an unconditional set_data is not idempotent.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, TypeAlias, TypeVar

from zklocks._core.lease import LeaseBase
from zklocks._core.ops import Op
from zklocks._errors import (
    ClientClosed,
    InvalidArgument,
    InvalidPath,
    LockError,
    LockLost,
    TransactionFailed,
)
from zklocks._protocol import codec
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoNodeError,
    RequestTooLargeError,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import (
    Check,
    Create,
    CreatedPath,
    Delete,
    Multi,
    MultiOp,
    SetData,
    Stat,
    WireACL,
)

TransactionResult: TypeAlias = CreatedPath | Stat | None
"""One op's result: the created path (with its sequence suffix) for ``create``, a
``str`` whose ``.stat`` is the node's Stat where the server sends one (ZooKeeper 3.8.2+),
the new ``Stat`` for ``set_data`` (``.version`` is the node's version now), ``None`` for
``delete`` and ``check``."""

E = TypeVar("E", bound=LockError)

_MAX_VERSION = 2**31 - 1  # a node's version is a signed 32-bit counter


def create_op(
    path: object, data: object, *, ephemeral: object, sequential: object, acl: tuple[WireACL, ...]
) -> Create:
    """A checked create: persistent unless ``ephemeral``; the client's ACL."""
    # A sequential create may name its parent with a trailing "/" (ZooKeeper appends the
    # sequence number to whatever the path is), so the check sees the path it will be.
    checked = _path(path, suffix="0" if sequential is True else "")
    return Create(
        checked,
        _data(data),
        ephemeral=_flag("ephemeral", ephemeral),
        sequential=_flag("sequential", sequential),
        acl=acl,
    )


def set_data_op(path: object, data: object, version: object) -> SetData:
    return SetData(_path(path), _data(data), _version(version))


def delete_op(path: object, version: object) -> Delete:
    return Delete(_path(path), version=_version(version))


def check_op(path: object, version: object) -> Check:
    return Check(_path(path), _version(version))


def guard_of(guard: object) -> LeaseBase | None:
    """The lease a transaction is conditional on, or None for a plain multi."""
    if guard is None or isinstance(guard, LeaseBase):
        return guard
    raise InvalidArgument(f"guard must be a lease (what acquire returns), not {guard!r}")


def commit(
    ops: Sequence[MultiOp], guard: LeaseBase | None
) -> Generator[Op, Any, list[TransactionResult]]:
    """Apply ``ops`` as one multi, after a check of ``guard``'s node; see the module doc."""
    if guard is not None and (guard.ended or guard.lost):
        why = "it was released" if guard.ended else f"it was lost ({guard.lost_reason})"
        raise LockLost(f"the lease on {guard.node} guards nothing: {why}; nothing was applied")
    if guard is None and not ops:
        return []  # nothing to apply, nothing to ask
    head: tuple[MultiOp, ...] = () if guard is None else (Check(guard.node, -1),)
    reply = yield Multi(head + tuple(ops))
    if isinstance(reply, list):
        return [_result(value) for value in reply[len(head) :]]
    raise _failure(reply, ops, guard)


def _result(value: Any) -> TransactionResult:
    if value is None or isinstance(value, CreatedPath | Stat):
        return value
    raise LockError(f"unexpected result in a transaction's reply: {value!r}")


def _failure(reply: object, ops: Sequence[MultiOp], guard: LeaseBase | None) -> LockError:
    """What a refused multi (or a failure to send it) raises into the caller."""
    offset = 0 if guard is None else 1
    if isinstance(reply, ZooKeeperError) and reply.results is not None:
        index = _failed_index(reply, reply.results)
        if guard is not None and index == 0:
            if isinstance(reply, NoNodeError):
                message = f"the lease's node {guard.node} is gone; nothing was applied"
                return _caused(LockLost(message), reply)
            message = f"the check of the lease's node {guard.node} failed: {reply}"
            return _caused(LockError(message), reply)
        op = ops[index - offset]
        reason = type(reply).__name__.removesuffix("Error")
        message = (
            f"op {index - offset} of the transaction ({_describe(op)}) was refused: {reason}; "
            "nothing was applied"
        )
        failed = TransactionFailed(message, index=index - offset, reason=reason, path=op.path)
        return _caused(failed, reply)
    if isinstance(reply, SessionExpiredError):
        # The session that holds every ephemeral node of ours ended before the multi
        # could be sent (so it never was): a guard's node is gone with it.
        message = "the session expired before the transaction was sent; nothing was applied"
        return _caused(LockError(message) if guard is None else LockLost(message), reply)
    if isinstance(reply, ConnectionLossError):
        message = (
            "the connection dropped with the transaction in flight: ZooKeeper may or may "
            "not have applied it (read the nodes to find out before trying again)"
        )
        return _caused(LockError(message), reply)
    if isinstance(reply, ClientClosedError):
        message = "the client was stopped; the transaction was not sent"
        return _caused(ClientClosed(message), reply)
    if isinstance(reply, RequestTooLargeError):
        message = f"the transaction is too large to send: {reply}"
        return _caused(InvalidArgument(message), reply)
    if isinstance(reply, ZooKeeperError):
        return _caused(LockError(f"ZooKeeper refused the transaction: {reply}"), reply)
    return LockError(f"unexpected reply to a transaction: {reply!r}")


def _failed_index(failed: ZooKeeperError, results: Sequence[object]) -> int:
    """The position of the op that failed: the error that is the reply itself, else the
    first one that is neither rolled back (before it) nor skipped (after it)."""
    for index, result in enumerate(results):
        if result is failed:
            return index
    for index, result in enumerate(results):
        if isinstance(result, ZooKeeperError) and not isinstance(
            result, RolledBackError | RuntimeInconsistencyError
        ):
            return index
    return 0


def _caused(error: E, cause: ZooKeeperError) -> E:
    """``error`` raised from ZooKeeper's ``cause``: never a bare ZooKeeper error."""
    error.__cause__ = cause
    return error


def _describe(op: MultiOp) -> str:
    """An op for a message: its kind and path, never its data."""
    name = {Create: "create", SetData: "set_data", Delete: "delete", Check: "check"}[type(op)]
    return f"{name} {codec.shown_path(op.path)}"


def _path(path: object, suffix: str = "") -> str:
    if not isinstance(path, str):
        raise InvalidPath(f"a node path must be a str, not {type(path).__name__}")
    problem = codec.path_problem(path + suffix)
    if problem is not None:
        raise InvalidPath(f"node path {codec.shown_path(path)} {problem}")
    return path


def _data(data: object) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise InvalidArgument(f"data must be bytes, not {type(data).__name__}")


def _version(version: object) -> int:
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidArgument(f"version must be an int, not {type(version).__name__}")
    if not -1 <= version <= _MAX_VERSION:
        raise InvalidArgument(f"version must be -1 (any) or 0..{_MAX_VERSION}, not {version}")
    return version


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be True or False, not {value!r}")
    return value
