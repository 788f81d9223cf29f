"""``AsyncClient``: one ZooKeeper session on the caller's event loop, and its locks."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterable, Sequence
from ssl import SSLContext
from types import TracebackType

from zklocks._asyncio import driver
from zklocks._asyncio.election import AsyncElection, AsyncMultiLock
from zklocks._asyncio.locks import AsyncLock, AsyncReadWriteLock
from zklocks._asyncio.session import AsyncSession
from zklocks._asyncio.transaction import AsyncTransaction
from zklocks._core import events as _events
from zklocks._core import revoke as _revoke
from zklocks._core import validate as _validate
from zklocks._core.errors import ClientClosed, InvalidArgument
from zklocks._core.events import ConnectionState
from zklocks._core.flow import Acquired
from zklocks._core.lease import AsyncLease, LeaseKeeper
from zklocks._core.nodes import ELECTION_KIND
from zklocks._core.security import ACL
from zklocks._frontend.holdings import LockConfig
from zklocks._frontend.lockmaker import DEFAULT_HOSTS, LockMaker, show_concrete_types
from zklocks._protocol.errors import ConnectionFailedError
from zklocks._transport import forks
from zklocks._transport.adapter import connection_failed
from zklocks._transport.connection import Connection
from zklocks._transport.sasl import SASL, login_of, plain_packets, with_login
from zklocks._vocabulary import SessionFacts, SessionState


class AsyncClient(LockMaker[AsyncLock, AsyncReadWriteLock]):
    """The asyncio twin of ``Client``: same arguments, same locks, awaitable methods.

    As for ``Client``, a chroot in ``hosts`` must already exist, and ``session_timeout``
    is the one the server granted once connected.

    It runs on the loop it is started on, with no thread of its own; every waiting task
    costs one watch and a few objects, never a thread. Connection listeners
    (``add_listener``) are called on that loop, inside the connection's callbacks: they
    must not block, and cannot await (start a task for async work). ``auth``, ``acl``,
    ``ssl`` and ``sasl`` are ``Client``'s (see docs/security.md).
    """

    def __init__(
        self,
        hosts: str = DEFAULT_HOSTS,
        *,
        session_timeout: float = 10.0,
        connect_timeout: float = 15.0,
        tick_time: float | None = None,
        clock_drift: float = _validate.DEFAULT_CLOCK_DRIFT,
        ensemble_lag: float | None = None,
        auth: Sequence[tuple[str, str | bytes]] | None = None,
        acl: str | Sequence[ACL] = "open",
        ssl: bool | SSLContext | None = None,
        sasl: SASL | None = None,
    ) -> None:
        _validate.hosts(hosts)  # a bad connect string fails here, not at start()
        super().__init__(
            hosts,
            session_timeout,
            connect_timeout,
            tick_time=tick_time,
            clock_drift=clock_drift,
            ensemble_lag=ensemble_lag,
            auth=with_login(auth, sasl),
            acl=acl,
            ssl=ssl,
        )
        self._session: AsyncSession | None = None
        self._stopped = False
        self._keeper = LeaseKeeper(self._facts, self._loop_timer)
        self._starting: Connection | None = None  # the connection start() is making
        self._forked = False  # inherited by a forked child: refuses every call

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "started" if self._session else "new"
        return f"<AsyncClient {self.hosts} {state}>"

    async def start(self) -> AsyncClient:
        """Connect and make a session; returns the client.

        Raises ``ConnectionFailed`` (a ``TimeoutError``) if no server answers within
        ``connect_timeout``, or at once when every host failed for a cause that waiting
        cannot change (see docs/transport.md); ``ClientClosed`` if the client was
        stopped, or was started in a process this one was forked from.
        """
        if self._forked:
            raise ClientClosed(forks.INHERITED)
        if self._stopped:
            raise ClientClosed("a stopped client cannot be started again; make a new one")
        if self._session is not None:
            return self
        # ``connect_timeout`` bounds the whole start; each attempt gets a share of it.
        connection = Connection(
            self.hosts,
            session_timeout=self._requested_timeout,
            tick_time=self.lease_timing.tick_time,
            clock_drift=self.lease_timing.clock_drift,
            ssl=self._ssl,
            auth=plain_packets(self._credentials),
            sasl=login_of(self._credentials),
        )
        session = AsyncSession(connection)
        forks.track(self)
        self._starting = connection
        try:
            await connection.start(self.connect_timeout)
        except ConnectionFailedError as exc:
            raise connection_failed(exc) from exc
        finally:
            self._starting = None
        if connection.chroot_exists is False:
            await connection.close()
            raise InvalidArgument(
                f"chroot {connection.chroot} does not exist on the server; "
                "create it first, or remove it from the hosts string"
            )
        # Listen from here (no await in between: no change is missed), weakly: a client
        # dropped without stop() can be collected, and warns. A failed start leaves the
        # state LOST, as the sync client's, and the client may be started again.
        connection.add_state_listener(_events.weak_method(self._on_session_state))
        self._on_session_state(connection.state)
        session.mark_connected()
        self._session = session
        return self

    async def stop(self) -> None:
        """Close the session: the server deletes our nodes at once; leases become lost.

        On a client inherited across fork it only forgets the parent's session: nothing
        is sent, the parent keeps it.
        """
        forks.untrack(self)
        self._stopped = True
        if self._forked:
            return
        self._remember_granted_timeout()
        session, self._session = self._session, None
        if session is not None:
            session.closed = True
            await session.connection.close()
            await session.finish_background()  # cleanups apart from their callers
        self._keeper.mark_all_lost("the client was stopped", "client_stopped")
        self._states.on_session_state(SessionState.CLOSED)

    def _on_session_state(self, state: SessionState) -> None:
        self._keeper.on_state(state)
        self._states.on_session_state(state)

    def __del__(self) -> None:
        unstopped = getattr(self, "_session", None) is not None and not self._stopped
        if unstopped and not getattr(self, "_forked", False):  # a child's copy: not ours
            warnings.warn(
                f"{self!r} was never stopped: its session stays open (and its locks held) "
                "while its event loop runs; await stop() or use `async with`",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )

    async def __aenter__(self) -> AsyncClient:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def connected(self) -> bool:
        """Is a session live on a connection right now (``state`` is ``CONNECTED``)?"""
        session = self._session
        return session is not None and session.facts.connected()

    def _new_lock(self, config: LockConfig) -> AsyncLock:
        lock = AsyncLock(self, config)
        self._peers.join(lock)
        return lock

    def _new_read_write(self, read: LockConfig, write: LockConfig) -> AsyncReadWriteLock:
        pair = AsyncReadWriteLock(AsyncLock(self, read), AsyncLock(self, write))
        self._peers.join(pair.read)
        self._peers.join(pair.write)
        return pair

    def election(self, path: str, *, identifier: str | None = None) -> AsyncElection:
        """A leader election at ``path`` (see ``Client.election``)."""
        config = self._config(path, ELECTION_KIND, identifier=identifier)
        election = AsyncElection(self, config)
        self._peers.join(election)
        return election

    def multi_lock(self, locks: Iterable[AsyncLock]) -> AsyncMultiLock:
        """Several locks held as one, taken in one global order (no deadlock)."""
        return AsyncMultiLock(locks)

    def transaction(self, *, guard: AsyncLease | None = None) -> AsyncTransaction:
        """ZooKeeper ops applied all or none, with ``await commit()`` (see
        ``Client.transaction`` and ``AsyncTransaction``)."""
        return AsyncTransaction(self._session_or_raise, guard, self._acl)

    async def revoke(self, path: str) -> int:
        """Ask every current holder of ``path`` to let go; how many were asked (see
        ``Client.revoke``)."""
        flow = _revoke.revoke(_validate.lock_path(path))
        asked: int = await driver.run(flow, self._session_or_raise())
        return asked

    # -- for the lock classes -----------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """(``forks``) In a forked child: refuse every call from now on, the leases read
        as lost, and the connection (the parent's) lets its sockets go without a byte
        sent. Attributes only: the event loop is the parent's, and is left alone."""
        session = self._session
        connection = session.connection if session is not None else self._starting
        if connection is None:
            return  # never started: nothing was inherited, and it may start here
        self._forked = True
        if session is not None:
            session.closed = True
        self._states.state = ConnectionState.CLOSED
        self._keeper.disown_all(forks.INHERITED_LEASE)
        connection.forget_after_fork()
        forks.keep(connection)

    def _session_or_raise(self) -> AsyncSession:
        if self._forked:
            raise ClientClosed(forks.INHERITED)
        session = self._session
        if session is None or session.closed:
            word = "stopped" if self._stopped else "not started (await start() or use `async with`)"
            raise ClientClosed(f"the client is {word}")
        return session

    def _session_or_none(self) -> AsyncSession | None:
        """As ``Client._session_or_none``: None once stopped, ``ClientClosed`` in a fork."""
        if self._forked:
            raise ClientClosed(forks.INHERITED)
        session = self._session
        return None if session is None or session.closed else session

    def _facts(self) -> SessionFacts | None:
        session = self._session
        return None if session is None else session.facts

    def _watch_lease(self, acquired: Acquired) -> AsyncLease:
        session = self._session_or_raise()
        lease = AsyncLease(acquired.node, acquired.token, session.facts, acquired.owner)
        self._keeper.track(lease, session.watch_node)
        return lease

    @staticmethod
    def _loop_timer(delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        return asyncio.get_running_loop().call_later(delay, fn).cancel


show_concrete_types(AsyncClient, AsyncLock, AsyncReadWriteLock)
