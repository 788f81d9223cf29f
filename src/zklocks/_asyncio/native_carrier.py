"""``AsyncClient``'s default carrier: our own ``Connection``, on the caller's event loop.

``native_factory`` makes it; ``AsyncClient(session_factory=...)`` replaces it
(``zklocks.sim.async_session_factory`` runs a client on the simulator), as
``Client(session_factory=...)`` does for the sync client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from zklocks._asyncio.carrier import AsyncCarrier
from zklocks._core.carrying import Replies, never_sent, requests_meter, watch_answer
from zklocks._core.deadline import Deadline
from zklocks._core.ops import Reply, Request
from zklocks._errors import InvalidArgument
from zklocks._frontend.lockmaker import SessionFactory
from zklocks._frontend.options import NO_SECURITY, ClientOptions, ConnectionSecurity
from zklocks._protocol.errors import ClientClosedError, ConnectionFailedError
from zklocks._protocol.records import GetData
from zklocks._transport import forks
from zklocks._transport.adapter import connection_failed, facts_of, submit_all
from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionListener, SessionState, Watcher, WatchEvent, WatchKind

T = TypeVar("T")


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a task's outcome seen even if its caller left before reading it."""
    if not future.cancelled():
        future.exception()


class _Gate(Replies):
    """The replies of one ``call`` (``Replies``): one future the caller awaits, set once
    every request has its reply.

    No future, done-callback and loop turn per request: those were a tenth of the
    asyncio client's CPU per request with many tasks. A cancel of the caller cancels
    only its wait: the requests go on to their replies, which are then dropped, and
    nothing is left unretrieved (no "exception never retrieved").
    """

    __slots__ = ("_future", "_left", "_replies", "count")

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self._future: asyncio.Future[None] = loop.create_future()
        self._replies: list[Reply] = [None] * count
        self._left = self.count = count

    def done(self) -> bool:
        return self._future.done()

    def answer(self, index: int, reply: Reply) -> None:
        if self._future.done():
            return  # the caller was cancelled, or the call failed already
        self._replies[index] = reply
        self._left -= 1
        if self._left == 0:
            self._future.set_result(None)

    def fail(self, error: BaseException) -> None:
        """Not a reply (a bad request, a bug): the call raises it."""
        if not self._future.done():
            self._future.set_exception(error)

    async def replies(self) -> list[Reply]:
        await self._future
        return self._replies


class NativeAsyncCarrier:
    """One connection; every method runs on the loop the client was started on."""

    def __init__(self, connection: Connection, connect_timeout: float) -> None:
        self.connection = connection
        connection.count_requests(requests_meter)  # once metrics are enabled
        self._connect_timeout = connect_timeout
        self.facts = facts_of(connection)
        self.closed = False
        self._connected = asyncio.Event()
        self._apart: set[asyncio.Task[Any]] = set()  # cleanups running apart from callers
        connection.add_state_listener(self._track_connected)

    def _track_connected(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()

    @property
    def state(self) -> SessionState:
        return self.connection.state

    async def start(self) -> None:
        # ``connect_timeout`` bounds the whole start; each attempt gets a share of it.
        connection = self.connection
        try:
            await connection.start(self._connect_timeout)
        except ConnectionFailedError as exc:
            raise connection_failed(exc) from exc
        if connection.chroot_exists is False:
            await connection.close()
            raise InvalidArgument(
                f"chroot {connection.chroot} does not exist on the server; "
                "create it first, or remove it from the hosts string"
            )
        # Connected, unless the connection is gone already (one that died at birth): a
        # request with a deadline must not be queued for the next one.
        self._track_connected(connection.state)

    def add_state_listener(self, fn: SessionListener) -> Callable[[], None]:
        return self.connection.add_state_listener(fn)

    async def close(self) -> None:
        self.closed = True
        await self.connection.close()
        await self.finish_background()  # cleanups apart from their callers

    def forget_after_fork(self) -> None:
        self.closed = True
        self.connection.forget_after_fork()
        forks.keep(self.connection)

    async def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> list[Reply]:
        """Send back to back (pipelined) and wait for every reply."""
        if self.closed or not requests:  # nothing to send: an empty list
            return [ClientClosedError() for _ in requests]
        # Woken by a connection that is gone again (one that died at birth), wait on:
        # submitted now, the requests would be queued for the next one, past the deadline.
        while deadline is not None and not self._connected.is_set():
            remaining = Deadline(deadline, self.facts.clock).remaining()
            try:
                await asyncio.wait_for(self._connected.wait(), remaining)
            except TimeoutError:
                return never_sent(requests)
        gate = _Gate(asyncio.get_running_loop(), len(requests))
        submit_all(self.connection, requests, watcher, gate.tokens())
        return await gate.replies()

    def in_background(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` as a task apart from the caller (a flow's cleanup, which must not
        hold its caller past the call's deadline); ``finish_background()`` awaits it."""
        task = asyncio.get_running_loop().create_task(work)
        self._apart.add(task)
        task.add_done_callback(self._apart_done)
        return task

    def _apart_done(self, task: asyncio.Task[Any]) -> None:
        self._apart.discard(task)
        _retrieve(task)  # its caller may have left (the driver reports that case)

    async def finish_background(self) -> None:
        """After the connection is closed: await the cleanups still running (every
        request they make fails at once now), so none outlives the client."""
        while self._apart:
            await asyncio.wait(set(self._apart))

    def watch_node(self, path: str, watcher: Watcher) -> None:
        if self.closed:
            watcher(WatchEvent(WatchKind.CLOSED, path))
            return
        future = self.connection.submit(GetData(path), watcher=watcher)

        def answered(future: asyncio.Future[Any]) -> None:
            event = None if future.cancelled() else watch_answer(path, future.exception())
            if event is not None:
                watcher(event)

        future.add_done_callback(answered)

    def session_id(self) -> int:
        return self.connection.session_id

    def credentials(self) -> tuple[int, bytes]:
        return self.connection.session_id, self.connection.session_password


def native_factory(security: ConnectionSecurity = NO_SECURITY) -> SessionFactory[AsyncCarrier]:
    """``AsyncClient``'s default: carriers on our own connection, with the security
    options."""

    def make(options: ClientOptions) -> NativeAsyncCarrier:
        return NativeAsyncCarrier(security.connection(options), options.connect_timeout)

    return make
