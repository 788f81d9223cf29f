"""``AsyncClient`` on the simulator: a ``SimSession`` seen from an event loop.

``AsyncClient(session_factory=async_session_factory(server))`` runs the asyncio client
on the in-memory model, as ``Client(session_factory=session_factory(server))`` runs the
sync one, so one contract suite checks both clients on ZooKeeper and on the model.

The model answers at once while the session is connected, so a call is made right on the
loop (a thousand waiting tasks cost no thread), then yields once, as a round trip would;
a session cut off by a test waits for its reconnect or expiry on a worker thread, so the
loop never blocks. Watch events and state
changes come from the session's event thread and are handed to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from zklocks._core.ops import Reply, Request
from zklocks._frontend.lockmaker import SessionFactory
from zklocks._frontend.options import ClientOptions
from zklocks._vocabulary import SessionListener, SessionState, Watcher, WatchEvent
from zklocks.sim.session import SimServer, SimSession

__all__ = ["AsyncSimSession", "async_session_factory"]

T = TypeVar("T")


class AsyncSimSession:
    """``AsyncClient``'s session (``zklocks._asyncio.carrier.AsyncCarrier``) over one
    ``SimSession``; every method runs on the loop."""

    def __init__(self, session: SimSession) -> None:
        self.sim = session
        self.facts = session.facts
        self._loop: asyncio.AbstractEventLoop | None = None
        self._apart: set[asyncio.Task[Any]] = set()  # cleanups running apart from callers

    def __repr__(self) -> str:
        return f"<AsyncSimSession {self.sim!r}>"

    @property
    def closed(self) -> bool:
        return self.sim.closed

    @property
    def state(self) -> SessionState:
        if self.sim.closed:
            return SessionState.CLOSED
        return SessionState.CONNECTED if self.sim.connected else SessionState.SUSPENDED

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.sim.start()

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        on_loop = None if watcher is None else self._on_loop(watcher)
        if not (self.sim.connected or self.sim.closed):
            return await asyncio.to_thread(self.sim.call, requests, deadline, on_loop)
        replies = self.sim.call(requests, deadline, on_loop)
        # A round trip yields to the loop, as a reply from the network would: a cancel
        # can land after the model applied the requests (the flows clean up after that).
        await asyncio.sleep(0)
        return replies

    def watch_node(self, path: str, watcher: Watcher) -> None:
        self.sim.watch_node(path, self._on_loop(watcher))

    def in_background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(work)
        self._apart.add(task)
        task.add_done_callback(self._apart.discard)
        return task

    def session_id(self) -> int:
        return self.sim.session_id()

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]:
        return self.sim.add_state_listener(self._on_loop(fn))

    async def close(self) -> None:
        await asyncio.to_thread(self.sim.close)  # it waits for its event thread to end
        while self._apart:
            await asyncio.wait(set(self._apart))

    def forget_after_fork(self) -> None:
        """Nothing to let go: a simulated server lives in one process."""

    def _on_loop(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """``fn`` called on the client's loop, from the session's event thread."""
        loop = self._loop or asyncio.get_running_loop()

        def hand_over(value: WatchEvent | SessionState) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(fn, value)

        return hand_over


def async_session_factory(server: SimServer) -> SessionFactory[AsyncSimSession]:
    """What ``AsyncClient(hosts, session_factory=...)`` calls to make a session on
    ``server``."""

    def make(options: ClientOptions) -> AsyncSimSession:
        return AsyncSimSession(
            SimSession(
                server,
                session_timeout=options.session_timeout,
                connect_timeout=options.connect_timeout,
            )
        )

    return make
