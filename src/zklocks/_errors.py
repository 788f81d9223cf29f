"""The public exception tree (the words every layer may raise; imports nothing of ours).

Every error a lock raises is a ``LockError``, and where a builtin means the same thing
the error is that builtin too, so ``except TimeoutError`` and ``except ValueError`` work
as a Python user expects::

    LockError
     +-- LockTimeout        (also TimeoutError)  acquire did not get the lock in time
     +-- LockLost                                 the lease ended while the caller held it
     +-- LeaseUnkeepable                          no lease can be kept on this session (an
     |                                            ensemble: a session too short for its
     |                                            tickTime, or tickTime unknown)
     +-- NotHeld            (also RuntimeError)   release() by a caller that holds nothing
     +-- AlreadyHeld        (also RuntimeError)   re-acquire without reentrant=True
     +-- InvalidArgument    (also ValueError)     bad path, permits, timeout, identifier...
     |    +-- InvalidPath
     +-- ClientClosed                             the client is not started or was stopped
     +-- ConnectionFailed   (not TimeoutError)    no ZooKeeper server answered in time,
     |                                            or it refused our credentials or TLS
     +-- AccessDenied                             ZooKeeper refused an operation (ACL), or a
     |                                            lock directory's ACL is weaker than asked
     +-- TransactionFailed                        an op of a transaction was refused; none
     |                                            of its ops was applied
     +-- NoNode             (also LookupError)    ``client.get`` of a node that does not exist

ZooKeeper's own refusals (``zklocks._protocol.errors``) never escape a lock call bare:
an unexpected one is raised as ``LockError`` with the original as ``__cause__``.

It sits at the bottom of the layers, beside ``_vocabulary``, so that the transport (which
raises ``InvalidArgument`` for a bad ``SASL`` and ``ConnectionFailed`` from ``start()``)
and the lock engine share one definition without importing each other.
``zklocks._errors`` names the same classes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AccessDenied",
    "AlreadyHeld",
    "ClientClosed",
    "ConnectionFailed",
    "InvalidArgument",
    "InvalidPath",
    "LeaseUnkeepable",
    "LockError",
    "LockLost",
    "LockTimeout",
    "NoNode",
    "NotHeld",
    "TransactionFailed",
]


class LockError(Exception):
    """Base class of every error zklocks raises."""


class LockTimeout(LockError, TimeoutError):
    """The lock was not acquired before the timeout; no node of ours is left behind.

    ``path`` is the lock's path (None where no one lock is meant, as for a multi-lock's
    connection wait). ``holder`` is the ``zklocks.Contender`` that held it when the
    wait ended, where the waiter knew it: it was waiting on the holder's own node, whose
    data its watch had read (second in line; for a reader, the writer before it). Else
    None. The message names the holder as the command line does.
    """

    def __init__(self, message: str, *, path: str | None = None, holder: Any = None) -> None:
        super().__init__(message)
        self.path = path
        self.holder = holder

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_timeout, (str(self), self.path, self.holder))


def _rebuild_timeout(message: str, path: str | None, holder: Any) -> LockTimeout:
    return LockTimeout(message, path=path, holder=holder)


class LockLost(LockError):
    """The lease was lost (session expired, node deleted, or cut off too long)."""


class LeaseUnkeepable(LockError):
    """No lease can be kept on this client's session, so acquire refuses to grant one.

    On an ensemble a lease is proven through the leader, which takes a few of the
    servers' ticks: a session shorter than about 4.2 ticks, or one whose servers'
    tickTime could not be learnt, would lose every lease within seconds of the grant.
    The message names the cause and the fix (a longer ``session_timeout``, or
    ``tick_time=``); the command line exits with EX_CONFIG (78). Nothing was created.
    """


class NoNode(LockError, LookupError):
    """The node a read asked for (``client.get``, ``client.get_children``) does not exist.

    A ``LookupError`` too, as ``KeyError`` is: the node is a key that is not there.
    ``path`` is the node's path as the caller named it (inside the client's chroot).
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_no_node, (str(self), self.path))


def _rebuild_no_node(message: str, path: str) -> NoNode:
    return NoNode(message, path=path)


class NotHeld(LockError, RuntimeError):
    """The calling thread or task does not hold this lock."""


class AlreadyHeld(LockError, RuntimeError):
    """The calling thread or task already holds this lock and it is not reentrant."""


class InvalidArgument(LockError, ValueError):
    """An argument was rejected before anything was sent to ZooKeeper."""


class TickTimeBelowServers(InvalidArgument):
    """``tick_time=`` is below the tickTime the servers' session bounds prove: the lease
    rule would count too short a session, so no lease is kept on it (the command line
    exits 78 for it, not 2: the configuration, not the usage, is wrong)."""


class InvalidPath(InvalidArgument):
    """The lock path is not an absolute, normalised ZooKeeper path we may use."""


class ClientClosed(LockError):
    """The client is not started, or was stopped: nothing can be sent."""


class ConnectionFailed(LockError):
    """No ZooKeeper server could be reached within the timeout, or one refused us.

    Not a ``TimeoutError``, on purpose: the same error reports refusals that no retry
    fixes (TLS, AUTH_FAILED, a SASL login, a server that requires one), and a caller's
    ``except TimeoutError: retry`` must not loop on those. Catch ``ConnectionFailed``.
    """


class TransactionFailed(LockError):
    """An op of a transaction (``client.transaction()``) was refused, so none was applied.

    ``index`` is the op's position, counting from 0 in the order the ops were added (a
    guard's own check is not counted: its failure is ``LockLost``); ``reason`` is
    ZooKeeper's name for the error ("BadVersion", "NoNode", "NodeExists", "NotEmpty",
    "NoAuth", ...), which a caller can act on (re-read and retry on "BadVersion"); ``path``
    is the op's path. The data of the ops is never part of the message.
    """

    def __init__(self, message: str, *, index: int, reason: str, path: str) -> None:
        super().__init__(message)
        self.index = index
        self.reason = reason
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt with its fields, so it survives pickling (a worker process's error
        # reported to its parent).
        return (_rebuild_failed, (str(self), self.index, self.reason, self.path))


def _rebuild_failed(message: str, index: int, reason: str, path: str) -> TransactionFailed:
    return TransactionFailed(message, index=index, reason=reason, path=path)


class AccessDenied(LockError):
    """ZooKeeper's ACL refused an operation on ``path``, or the lock directory at ``path``
    is less protected than the client's ``acl`` asks for (nothing was left behind).

    ``operation`` says what was refused: "create", "delete", "list", "read", "watch",
    "getACL", or "use" for a directory whose ACL is too weak to trust.
    """

    def __init__(self, message: str, *, path: str, operation: str) -> None:
        super().__init__(message)
        self.path = path
        self.operation = operation
