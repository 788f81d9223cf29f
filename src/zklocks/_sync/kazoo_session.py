"""A ``SyncSession`` over a ``KazooClient``: the first transport, kept small.

kazoo answers a session's requests in order and queues the ``*_async`` calls, so calling
them back to back pipelines them. kazoo does not expose when the last answered request
was sent, so the lease-loss instant is approximated from when kazoo reports SUSPENDED:
kazoo notices silence after two thirds of the session timeout, so the server may expire
the session one third of a timeout after that. The native transport is exact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from zklocks._errors import ConnectionFailed
from zklocks._lease import SessionFacts
from zklocks._ops import (
    TIMED_OUT,
    Create,
    Created,
    Delete,
    Exists,
    GetChildren,
    GetData,
    NodeData,
    Reply,
    Request,
    Stat,
)
from zklocks._protocol import errors as zk_errors
from zklocks._session import SessionState, StateListener, Watcher, WatchEvent, WatchKind

_CONTAINER = 4


def _stat(stat: Any) -> Stat:
    return Stat(
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        ctime_ms=stat.ctime,
        version=stat.version,
        ephemeral_owner=stat.ephemeralOwner,
        num_children=stat.numChildren,
    )


def _error(exc: BaseException) -> zk_errors.ZooKeeperError:
    from kazoo.exceptions import ConnectionClosedError

    if isinstance(exc, ConnectionClosedError):
        return zk_errors.ClientClosedError()
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return zk_errors.error_for_code(code)
    return zk_errors.ConnectionLossError(str(exc))


class KazooSession:
    """One kazoo client, seen through the ``SyncSession`` interface."""

    def __init__(self, hosts: str, *, session_timeout: float, connect_timeout: float) -> None:
        from kazoo.client import KazooClient

        self._client = KazooClient(hosts=hosts, timeout=session_timeout)
        self._hosts = hosts
        self._connect_timeout = connect_timeout
        self._closed = False
        self._connected = threading.Event()
        self._listeners: list[StateListener] = []
        self._watchers: set[tuple[str, Watcher]] = set()
        self._mutex = threading.Lock()
        self._loss_at: float | None = None
        self._requested_timeout = session_timeout
        self.facts = SessionFacts(
            clock=time.monotonic,
            session_timeout=lambda: self._requested_timeout,
            last_answered_sent=self._last_answered_sent,
            connected=self._connected.is_set,
        )
        self._client.add_listener(self._on_kazoo_state)

    def start(self) -> None:
        try:
            self._client.start(timeout=self._connect_timeout)
        except Exception as exc:
            self._client.close()
            raise ConnectionFailed(
                f"no ZooKeeper server at {self._hosts} answered within "
                f"{self._connect_timeout:g}s; is it running? (start one with `zklocks server`)"
            ) from exc
        self._connected.set()

    def _last_answered_sent(self) -> float | None:
        if self._loss_at is None:
            return None
        return self._loss_at - self._requested_timeout

    def _on_kazoo_state(self, state: str) -> None:
        if state == "SUSPENDED":
            self._connected.clear()
            self._loss_at = time.monotonic() + self._requested_timeout / 3
            self._notify(SessionState.SUSPENDED)
        elif state == "LOST":
            self._connected.clear()
            self._loss_at = None
            self._fire_all(WatchKind.SESSION_LOST)
            self._notify(SessionState.LOST)
        else:
            self._loss_at = None
            self._connected.set()
            self._notify(SessionState.CONNECTED)

    def _notify(self, state: SessionState) -> None:
        for listener in list(self._listeners):
            listener(state)

    def _fire_all(self, kind: WatchKind) -> None:
        with self._mutex:
            watchers, self._watchers = self._watchers, set()
        for path, watcher in watchers:
            watcher(WatchEvent(kind, path))

    def add_state_listener(self, fn: StateListener) -> Callable[[], None]:
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def watch_node(self, path: str, watcher: Watcher) -> None:
        if self._closed:
            watcher(WatchEvent(WatchKind.CLOSED, path))
            return
        result = self._client.exists_async(path, watch=self._wrap(path, watcher))

        def on_reply(result: Any) -> None:
            try:
                gone = result.get() is None
            except Exception:
                return  # the watch is restored with the session, or the session ends
            if gone:
                watcher(WatchEvent(WatchKind.DELETED, path))

        result.rawlink(on_reply)

    def credentials(self) -> tuple[int, bytes]:
        """(session id, password): lets a test make the server expire this session."""
        session_id, password = self._client.client_id
        return int(session_id), bytes(password)

    def session_id(self) -> int:
        session = self._client.client_id
        return int(session[0]) if session else 0

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._fire_all(WatchKind.CLOSED)
        self._notify(SessionState.CLOSED)
        self._client.stop()
        self._client.close()

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        if self._closed:
            return [zk_errors.ClientClosedError() for _ in requests]
        if not self._connected.is_set():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._connected.wait(remaining):
                return [TIMED_OUT for _ in requests]
        results = [(request, self._send(request, watcher)) for request in requests]
        return [self._reply(request, result) for request, result in results]

    def _send(self, request: Request, watcher: Watcher | None) -> Any:
        client = self._client
        if isinstance(request, Create):
            if request.container:
                from kazoo.protocol.serialization import Create2
                from kazoo.security import OPEN_ACL_UNSAFE

                result = client.handler.async_result()
                client._call(
                    Create2(
                        request.path,
                        request.data,
                        client.default_acl or OPEN_ACL_UNSAFE,
                        _CONTAINER,
                    ),
                    result,
                )
                return result
            return client.create_async(
                request.path,
                request.data,
                ephemeral=request.ephemeral,
                sequence=request.sequential,
                include_data=True,
            )
        if isinstance(request, Delete):
            return client.delete_async(request.path)
        if isinstance(request, GetChildren):
            return client.get_children_async(request.path, watch=self._wrap(request.path, watcher))
        if isinstance(request, GetData):
            return client.get_async(request.path)
        if isinstance(request, Exists):
            return client.exists_async(request.path, watch=self._wrap(request.path, watcher))
        raise TypeError(f"not a request: {request!r}")

    def _wrap(self, path: str, watcher: Watcher | None) -> Callable[[Any], None] | None:
        if watcher is None:
            return None
        with self._mutex:
            self._watchers.add((path, watcher))

        def on_event(event: Any) -> None:
            with self._mutex:
                self._watchers.discard((path, watcher))
            kind = {
                "CREATED": WatchKind.CREATED,
                "DELETED": WatchKind.DELETED,
                "CHANGED": WatchKind.CHANGED,
                "CHILD": WatchKind.CHILD,
            }.get(event.type, WatchKind.SESSION_LOST)
            watcher(WatchEvent(kind, path))

        return on_event

    def _reply(self, request: Request, result: Any) -> Reply:
        try:
            value = result.get()
        except Exception as exc:
            return _error(exc)
        if isinstance(request, Create):
            if request.container:
                path, stat = value if isinstance(value, tuple) else (value, None)
                return Created(path, _stat(stat) if stat is not None else Stat(czxid=0))
            path, stat = value
            return Created(path, _stat(stat))
        if isinstance(request, GetChildren):
            return list(value)
        if isinstance(request, GetData):
            data, stat = value
            return NodeData(data, _stat(stat))
        if isinstance(request, Exists):
            return None if value is None else _stat(value)
        return None
