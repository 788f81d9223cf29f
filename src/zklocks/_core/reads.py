"""The public reads: ``get``, ``exists`` and ``get_children``, as flows both clients run.

Why a lock library reads at all: a read-modify-write under a lock needs the node's
``Stat`` (its ``version``) for ``txn.set_data(path, data, version=stat.version)``, and a
service that keeps its configuration in ZooKeeper should not need a second client, and a
second session, for it (docs/fencing.md).

Each read is one request, written once here and run by the sync driver, the asyncio
driver and the simulator alike, like every lock operation. A read has no deadline of its
own: while cut off it waits for a connection as long as the session lives (as a
transaction's commit does). A read is idempotent, so one whose connection drops (or
whose session expires) before the answer is simply asked again; its watch is
registered only with the reply that sets it (as the Java client does), so a retry never
leaves a second registration behind.

``watcher``, when given, is the caller's one-shot watch: ZooKeeper sets it with the read
and the client calls it once, with a ``WatchedEvent``, for the first change it reports
(or with ``SESSION_LOST`` / ``CLOSED`` if the session ends first). The same callable set
twice on one node is called once, as in ZooKeeper's own clients.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from typing import Any, NoReturn

from zklocks._core.acquire_steps import access_denied
from zklocks._core.ops import Op, Pipeline, Request
from zklocks._errors import ClientClosed, InvalidArgument, LockError, NoNode
from zklocks._protocol import codec
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Exists, GetChildren, GetData, NodeData, Stat
from zklocks._vocabulary import WatchedEvent, Watcher

__all__ = [
    "Read",
    "UserWatch",
    "exists",
    "get",
    "get_children",
    "required_watcher",
    "watcher_of",
]

UserWatch = Callable[[WatchedEvent], object]
"""What ``watch=`` takes: a callable given one ``WatchedEvent``."""

Read = Callable[[str, "Watcher | None"], Generator[Op, Any, Any]]
"""One of the reads below, as a client method runs it."""


def watcher_of(watch: object) -> Watcher | None:
    """``watch=`` checked: None, or a callable that takes one ``WatchedEvent``. An ``async
    def`` is refused: called, it would make a coroutine that nobody awaits."""
    if inspect.iscoroutinefunction(watch):
        raise InvalidArgument(
            "watch must be a plain callable, not an async function: "
            "start a task from it for async work (loop.create_task)"
        )
    if watch is None or callable(watch):
        return watch
    raise InvalidArgument(f"watch must be a callable taking a WatchedEvent, or None, not {watch!r}")


def required_watcher(watch: object) -> Watcher:
    """``watch=`` where a watch is the point of the call: None is refused too."""
    checked = watcher_of(watch)
    if checked is None:
        raise InvalidArgument("watch must be a callable taking a WatchedEvent, not None")
    return checked


def get(path: str, watcher: Watcher | None) -> Generator[Op, Any, tuple[bytes, Stat]]:
    """The node's data and ``Stat``; ``NoNode`` if there is no such node (no watch set)."""
    reply = yield from _read(GetData(path), watcher)
    if isinstance(reply, NodeData):
        return reply.data, reply.stat
    if isinstance(reply, NoNodeError):
        raise _no_node(path, reply)
    _refused(reply, path, "read")


def exists(path: str, watcher: Watcher | None) -> Generator[Op, Any, Stat | None]:
    """The node's ``Stat``, or None if there is none. A watch is set either way: on a
    missing node it fires when the node is created."""
    reply = yield from _read(Exists(path), watcher)
    if reply is None or isinstance(reply, Stat):
        return reply
    _refused(reply, path, "read")


def get_children(path: str, watcher: Watcher | None) -> Generator[Op, Any, list[str]]:
    """The names of the node's children, in ZooKeeper's (unspecified) order; ``NoNode``
    if there is no such node. The watch fires when a child is added or removed, or the
    node itself is deleted."""
    reply = yield from _read(GetChildren(path), watcher)
    if isinstance(reply, list):
        return list(reply)
    if isinstance(reply, NoNodeError):
        raise _no_node(path, reply)
    _refused(reply, path, "list")


def _read(request: Request, watcher: Watcher | None) -> Generator[Op, Any, Any]:
    """One request's reply, asked again while the connection drops under it or the
    session it was queued for expires (a read means the same on the next session)."""
    while True:
        (reply,) = yield Pipeline((request,), watcher=watcher)
        if not isinstance(reply, ConnectionLossError | SessionExpiredError):
            return reply


def _no_node(path: str, cause: NoNodeError) -> NoNode:
    error = NoNode(f"no node {codec.shown_path(path)}", path=path)
    error.__cause__ = cause
    return error


def _refused(reply: object, path: str, operation: str) -> NoReturn:
    """Every other answer as the public error: never a bare ZooKeeper error."""
    shown = codec.shown_path(path)
    error: LockError
    if isinstance(reply, ClientClosedError):
        error = ClientClosed(f"cannot read {shown}: the client is stopped")
    elif isinstance(reply, NoAuthError):
        error = access_denied(path, operation)
    elif isinstance(reply, BaseException):
        error = LockError(f"ZooKeeper refused to {operation} {shown}: {reply}")
    else:
        error = LockError(f"unexpected reply to a read of {shown}: {reply!r}")
    if isinstance(reply, BaseException):
        error.__cause__ = reply
    raise error
