"""The narrow interface a driver needs from a ZooKeeper session, whatever the transport.

Drivers run flows; sessions carry requests. Keeping the interface this small lets the
transport change (kazoo for the first lock, our own asyncio connection after) without
touching a flow, a strategy or a lock class.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from zklocks._core.ops import Reply, Request
from zklocks._vocabulary import SessionFacts, SessionListener, Watcher

__all__ = ["SyncSession"]

T = TypeVar("T")


class SyncSession(Protocol):
    """A session as the sync driver sees it. Every method is thread-safe."""

    facts: SessionFacts

    def call(
        self,
        requests: Sequence[Request],
        deadline: float | None,
        watcher: Watcher | None = None,
    ) -> list[Reply]:
        """Send ``requests`` back to back and block for all replies.

        ``watcher`` (if given) is set on every request that can carry a watch. If the
        requests cannot be sent before ``deadline`` every reply is ``TIMED_OUT``.
        """
        ...

    def watch_node(self, path: str, watcher: Watcher) -> None:
        """Set a getData watch without waiting for the reply (a lease watching its node).

        If the reply says the node is already gone, ``watcher`` gets a DELETED event.
        """
        ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        """Run ``fn`` after ``delay`` seconds on the session's event thread; returns a
        canceller. The lease keeper's timers use it: no thread per timer."""
        ...

    def in_background(self, work: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``work`` apart from the caller (a flow's cleanup, which must not hold its
        caller past the call's deadline); ``close()`` waits for it to end."""
        ...

    def session_id(self) -> int: ...

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]: ...

    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...
