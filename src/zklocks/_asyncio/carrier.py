"""What ``AsyncClient`` runs on: a carrier of requests on the caller's loop.

The asyncio twin of ``SyncCarrier`` (``_sync/carrier.py``, which says why "carrier"):
one protocol, used by the client, the asyncio driver and the lock classes. The default is
``NativeAsyncCarrier`` (``_asyncio/native_carrier.py``); ``AsyncClient(session_factory=...)``
replaces it (``zklocks.sim.async_session_factory`` runs a client on the simulator). The
rules every carrier keeps are in ``_core/carrying.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from zklocks._core.ops import Reply, Request
from zklocks._frontend.lockmaker import Carrier
from zklocks._vocabulary import SessionListener, SessionState, Watcher

__all__ = ["AsyncCarrier"]

T = TypeVar("T")


class AsyncCarrier(Carrier, Protocol):
    """A carrier as the asyncio client, driver and locks see it; every method runs on
    the client's loop."""

    @property
    def state(self) -> SessionState: ...

    async def start(self) -> None:
        """Connect and make the session (``ConnectionFailed``, ``InvalidArgument``)."""
        ...

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        """Send ``requests`` back to back and await every reply (``TIMED_OUT`` for each
        when they cannot be sent before ``deadline``: ``carrying.never_sent``)."""
        ...

    def watch_node(self, path: str, watcher: Watcher) -> None:
        """Set a getData watch without awaiting it; a node already gone is DELETED
        (``carrying.watch_answer``)."""
        ...

    def in_background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a task apart from its caller; ``close()`` awaits it."""
        ...

    def session_id(self) -> int: ...

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]: ...

    async def close(self) -> None:
        """End the session, then await what runs apart (cleanups)."""
        ...

    def forget_after_fork(self) -> None:
        """In a forked child: let the parent's session go without a byte sent."""
        ...
