"""What a sync ``Client`` runs on: a carrier of requests, whatever the transport.

Drivers run flows; carriers carry their requests. "Carrier", not "session": the session
is ZooKeeper's (its id, its timeout, ``_protocol/session``'s state machine), and a carrier
is what takes our requests there (``NativeSyncCarrier``, our own connection; or the
simulator's ``SimSession``). ``AsyncCarrier`` (``_asyncio/carrier.py``) is the same role on
the caller's event loop. Keeping the interface this small lets the transport change
without touching a flow, a strategy or a lock class; the rules every carrier keeps are in
``_core/carrying.py``.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from zklocks._core.ops import Reply, Request
from zklocks._frontend.lockmaker import Carrier
from zklocks._vocabulary import SessionListener, Watcher

__all__ = ["SyncCarrier"]

T = TypeVar("T")


class SyncCarrier(Carrier, Protocol):
    """A carrier as the sync client, driver and locks see it. Every method is
    thread-safe."""

    def start(self) -> None:
        """Connect and make the session (``ConnectionFailed``, ``InvalidArgument``)."""
        ...

    def call(
        self,
        requests: Sequence[Request],
        deadline: float | None,
        watcher: Watcher | None = None,
    ) -> list[Reply]:
        """Send ``requests`` back to back and block for all replies.

        ``watcher`` (if given) is set on every request that can carry a watch. If the
        requests cannot be sent before ``deadline`` every reply is ``TIMED_OUT``
        (``carrying.never_sent``).
        """
        ...

    def watch_node(self, path: str, watcher: Watcher) -> None:
        """Set a getData watch without waiting for the reply (a lease watching its node).

        If the reply says the node is already gone, ``watcher`` gets a DELETED event
        (``carrying.watch_answer``).
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

    def close(self) -> None: ...
