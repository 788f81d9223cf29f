"""The public exception tree: defined in ``zklocks._errors`` (below both the lock engine and
the transport, which raise them alike); named here too for the engine's modules."""

from __future__ import annotations

from zklocks._errors import (
    AccessDenied,
    AlreadyHeld,
    ClientClosed,
    ConnectionFailed,
    InvalidArgument,
    InvalidPath,
    LockError,
    LockLost,
    LockTimeout,
    NotHeld,
    TransactionFailed,
)

__all__ = [
    "AccessDenied",
    "AlreadyHeld",
    "ClientClosed",
    "ConnectionFailed",
    "InvalidArgument",
    "InvalidPath",
    "LockError",
    "LockLost",
    "LockTimeout",
    "NotHeld",
    "TransactionFailed",
]
