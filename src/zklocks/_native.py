"""What both front ends need to run flows on our own ``Connection``.

The connection speaks in futures and ``_connection.WatchEvent``s on its loop thread; the
drivers speak in flow replies (values or error *instances*) and ``_session.WatchEvent``s.
These few functions translate, so the sync and asyncio sessions stay thin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from zklocks import _connection
from zklocks._connection import Connection, EventType, SessionState
from zklocks._errors import ConnectionFailed
from zklocks._lease import SessionFacts
from zklocks._ops import Reply, Request
from zklocks._protocol.errors import ConnectionFailedError, ZooKeeperError
from zklocks._session import Watcher, WatchEvent, WatchKind

_KINDS = {
    EventType.CREATED: WatchKind.CREATED,
    EventType.DELETED: WatchKind.DELETED,
    EventType.CHANGED: WatchKind.CHANGED,
    EventType.CHILD: WatchKind.CHILD,
}


def to_watch_event(event: _connection.WatchEvent) -> WatchEvent:
    """A connection's watch event as the drivers see it (session end included)."""
    kind = _KINDS.get(event.type)
    if kind is None:
        closed = event.state is SessionState.CLOSED
        kind = WatchKind.CLOSED if closed else WatchKind.SESSION_LOST
    return WatchEvent(kind, event.path)


def wrap_watcher(watcher: Watcher | None) -> _connection.Watcher | None:
    if watcher is None:
        return None
    return _Translated(watcher)


class _Translated:
    """A driver watcher behind the connection's interface; equal ones dedupe in watch sets."""

    __slots__ = ("watcher",)

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def __call__(self, event: _connection.WatchEvent) -> None:
        self.watcher(to_watch_event(event))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Translated) and other.watcher == self.watcher

    def __hash__(self) -> int:
        return hash(self.watcher)


def submit_all(
    connection: Connection, requests: Sequence[Request], watcher: Watcher | None
) -> list[asyncio.Future[Any]]:
    """Submit back to back (pipelined, one write); call on the loop thread."""
    if len(requests) == 1:
        return [connection.submit(requests[0], watcher=wrap_watcher(watcher))]
    return connection.submit_many(requests, watcher=wrap_watcher(watcher))


def reply_of(future: asyncio.Future[Any]) -> Reply:
    """A done future as a flow reply: its value, or its ZooKeeper error as an instance."""
    error = future.exception()
    if error is None:
        result: Reply = future.result()
        return result
    if isinstance(error, ZooKeeperError):
        return error
    raise error


def facts_of(connection: Connection) -> SessionFacts:
    """The facts a lease reads, straight from the connection.

    The lease counts from ``lease_sent``: the last answer the session's timer has surely
    counted (``last_answered_sent`` on a standalone server; earlier on an ensemble).
    """
    return SessionFacts(
        clock=time.monotonic,
        session_timeout=lambda: connection.session_timeout,
        last_answered_sent=lambda: connection.lease_sent,
        lagging=lambda: connection.ensemble_lag > 0,
        connected=lambda: connection.state is SessionState.CONNECTED,
    )


def connection_failed(error: ConnectionFailedError) -> ConnectionFailed:
    """``start()``'s error: what went wrong, and what to try when nothing answered."""
    if error.refused:  # a TLS or credentials refusal: the message already says what to fix
        return ConnectionFailed(str(error))
    return ConnectionFailed(
        f"{error}; is ZooKeeper running there? Start one with `zklocks server`, "
        "or point --hosts / ZKLOCKS_HOSTS at yours"
    )
