"""Every ZooKeeper error code as a typed exception.

The server answers a failed request with a negative code in the reply header; the
protocol core turns it into an instance of the class registered for that code, so the
lock flow can ask ``isinstance(reply, NoNodeError)`` instead of comparing integers.
Some errors never come from the server but from the client side of the wire:
``ConnectionLossError`` (the request was in flight when the connection dropped; the
server may or may not have applied it), ``ClientClosedError``, ``ConnectionFailedError``
(no server answered within the start timeout; also a ``TimeoutError``) and
``RequestTooLargeError`` (refused before sending; also a ``ValueError``).

    ZooKeeperError
     +-- SystemZooKeeperError (codes -1..-99: server or transport trouble)
     |    +-- ConnectionLossError, OperationTimeoutError, MarshallingError, ...
     +-- ApiError (codes <= -100: the request was refused)
          +-- NoNodeError, NodeExistsError, NotEmptyError, BadVersionError,
              SessionExpiredError, NoAuthError, ...
     +-- ClientClosedError, ConnectionFailedError, RequestTooLargeError (client side)

A failed multi answers with the error of the op that failed; its ``results`` attribute
holds every op's outcome: ``RolledBackError`` (code 0) for the ops before it,
``RuntimeInconsistencyError`` for the ops after it (``results`` is ``None`` otherwise).
"""

from __future__ import annotations


class ZooKeeperError(Exception):
    """A request failed; ``code`` is ZooKeeper's numeric error code."""

    code: int = -1
    results: list[object] | None = None

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        self.path = path
        text = message or type(self).__doc__ or type(self).__name__
        if path is not None:
            text = f"{text.strip()} (path {path!r})"
        super().__init__(text.strip())


class RolledBackError(ZooKeeperError):
    """In a failed multi: this op was valid but is not applied, because another op failed."""

    code = 0


class SystemZooKeeperError(ZooKeeperError):
    """Server-side or transport trouble rather than a refused request."""

    code = -1


class ApiError(ZooKeeperError):
    """The server refused the request."""

    code = -100


class RuntimeInconsistencyError(SystemZooKeeperError):
    """A runtime inconsistency was found."""

    code = -2


class DataInconsistencyError(SystemZooKeeperError):
    """A data inconsistency was found."""

    code = -3


class ConnectionLossError(SystemZooKeeperError):
    """The connection dropped while the request was in flight; the server may have applied it."""

    code = -4


class MarshallingError(SystemZooKeeperError):
    """A request or reply could not be (de)serialised."""

    code = -5


class UnimplementedError(SystemZooKeeperError):
    """The server does not implement this operation."""

    code = -6


class OperationTimeoutError(SystemZooKeeperError):
    """The operation timed out."""

    code = -7


class BadArgumentsError(SystemZooKeeperError):
    """The server rejected the request's arguments."""

    code = -8


class NewConfigNoQuorumError(SystemZooKeeperError):
    """No quorum of the new configuration."""

    code = -13


class ReconfigInProgressError(SystemZooKeeperError):
    """A reconfiguration is in progress."""

    code = -14


class UnknownSessionError(SystemZooKeeperError):
    """The server does not know this session."""

    code = -15


class NoNodeError(ApiError):
    """The node does not exist."""

    code = -101


class NoAuthError(ApiError):
    """Not authorised for this node."""

    code = -102


class BadVersionError(ApiError):
    """The node's version did not match."""

    code = -103


class NoChildrenForEphemeralsError(ApiError):
    """Ephemeral nodes may not have children."""

    code = -108


class NodeExistsError(ApiError):
    """The node already exists."""

    code = -110


class NotEmptyError(ApiError):
    """The node has children."""

    code = -111


class SessionExpiredError(ApiError):
    """The session expired; its ephemeral nodes are gone."""

    code = -112


class InvalidCallbackError(ApiError):
    """Invalid callback."""

    code = -113


class InvalidACLError(ApiError):
    """The ACL is invalid."""

    code = -114


class AuthFailedError(ApiError):
    """Authentication failed."""

    code = -115


class SessionMovedError(ApiError):
    """The session moved to another server."""

    code = -118


class NotReadOnlyError(ApiError):
    """A write was sent to a read-only server."""

    code = -119


class EphemeralOnLocalSessionError(ApiError):
    """Ephemeral nodes need a global session."""

    code = -120


class NoWatcherError(ApiError):
    """No such watcher to remove."""

    code = -121


class RequestTimeoutError(ApiError):
    """The request timed out."""

    code = -122


class ReconfigDisabledError(ApiError):
    """Dynamic reconfiguration is disabled."""

    code = -123


class SessionClosedRequireSaslAuthError(ApiError):
    """The server requires SASL authentication."""

    code = -124


class QuotaExceededError(ApiError):
    """A quota was exceeded."""

    code = -125


class ThrottledOpError(ApiError):
    """The server throttled the op."""

    code = -127


class ClientClosedError(ZooKeeperError):
    """The client was stopped (or never started); nothing was sent."""

    code = 1


class ConnectionFailedError(ZooKeeperError, TimeoutError):
    """No ZooKeeper server answered in time; ``hosts`` lists every ``host:port`` tried."""

    code = 2

    def __init__(
        self,
        message: str = "",
        *,
        hosts: tuple[str, ...] = (),
        path: str | None = None,
        reasons: tuple[str, ...] = (),
        refused: bool = False,
    ) -> None:
        self.hosts = hosts
        self.reasons = reasons  # what went wrong with each host, in words
        #: a server answered and refused us (TLS, credentials): it runs, so "is ZooKeeper
        #: running there?" would mislead; the reasons say what to fix
        self.refused = refused
        if not message:
            message = "no ZooKeeper server answered"
            if hosts:
                message = f"{message} (tried {', '.join(hosts)})"
        super().__init__(message, path=path)


class RequestTooLargeError(ZooKeeperError, ValueError):
    """The request is larger than the server's ``jute.maxbuffer``; it was not sent.

    The server would drop the whole connection on reading its length, failing every other
    request in flight, so the client refuses it up front and the connection carries on.
    """

    code = 3


_BY_CODE: dict[int, type[ZooKeeperError]] = {
    cls.code: cls
    for cls in (
        RolledBackError,
        RuntimeInconsistencyError,
        DataInconsistencyError,
        ConnectionLossError,
        MarshallingError,
        UnimplementedError,
        OperationTimeoutError,
        BadArgumentsError,
        NewConfigNoQuorumError,
        ReconfigInProgressError,
        UnknownSessionError,
        NoNodeError,
        NoAuthError,
        BadVersionError,
        NoChildrenForEphemeralsError,
        NodeExistsError,
        NotEmptyError,
        SessionExpiredError,
        InvalidCallbackError,
        InvalidACLError,
        AuthFailedError,
        SessionMovedError,
        NotReadOnlyError,
        EphemeralOnLocalSessionError,
        NoWatcherError,
        RequestTimeoutError,
        ReconfigDisabledError,
        SessionClosedRequireSaslAuthError,
        QuotaExceededError,
        ThrottledOpError,
    )
}


def error_for_code(code: int, *, path: str | None = None) -> ZooKeeperError:
    """The exception instance for a (negative) ZooKeeper error code."""
    cls = _BY_CODE.get(code)
    if cls is None:
        base: type[ZooKeeperError] = ApiError if code <= -100 else SystemZooKeeperError
        error = base(f"ZooKeeper error code {code}", path=path)
        error.code = code
        return error
    return cls(path=path)


def known_codes() -> dict[int, type[ZooKeeperError]]:
    """Every error code this module maps (a copy), for tests and docs."""
    return dict(_BY_CODE)
