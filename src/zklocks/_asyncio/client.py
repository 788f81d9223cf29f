"""``AsyncClient``: one ZooKeeper session on the caller's event loop, and its locks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from zklocks._asyncio import driver
from zklocks._asyncio.carrier import AsyncCarrier
from zklocks._asyncio.election import AsyncElection, AsyncMultiLock
from zklocks._asyncio.locks import AsyncLock, AsyncReadWriteLock
from zklocks._asyncio.native_carrier import native_factory
from zklocks._asyncio.transaction import AsyncTransaction
from zklocks._core import contenders as _contenders
from zklocks._core import events as _events
from zklocks._core import kinds as _kinds
from zklocks._core import reads as _reads
from zklocks._core import revoke as _revoke
from zklocks._core import validate as _validate
from zklocks._core.breaking import Holder
from zklocks._core.contenders import Contender
from zklocks._core.events import ConnectionState
from zklocks._core.flow import Acquired
from zklocks._core.inspect import LockSummary
from zklocks._core.lease import AsyncLease
from zklocks._core.reads import UserWatch
from zklocks._core.security import ACL
from zklocks._frontend import server_check as _server_check
from zklocks._frontend import tools as _tools
from zklocks._frontend.holdings import LockConfig
from zklocks._frontend.lockmaker import LockMaker, SessionFactory, show_concrete_types
from zklocks._frontend.options import ConnectionSecurity
from zklocks._frontend.server_check import MemberVersion
from zklocks._protocol.records import Stat
from zklocks._transport import forks
from zklocks._vocabulary import SessionState


class AsyncClient(LockMaker[AsyncLock, AsyncReadWriteLock, AsyncCarrier]):
    """The asyncio twin of ``Client``: same arguments, same locks, awaitable methods.

    As for ``Client``, a chroot in ``hosts`` must already exist, and ``session_timeout``
    is the one the server granted once connected.

    It runs on the loop it is started on, with no thread of its own; every waiting task
    costs one watch and a few objects, never a thread. Connection listeners
    (``add_listener``) are called on that loop, inside the connection's callbacks: they
    must not block, and cannot await (start a task for async work). ``auth``, ``acl``,
    ``ssl`` and ``sasl`` are ``Client``'s (see docs/security.md). ``session_factory``
    replaces the transport (``zklocks.sim.async_session_factory(server)`` runs the client
    on the simulator's in-memory model); leave it out to talk to ZooKeeper.
    """

    _public_name = "AsyncClient"
    _how_to_start = "await start() or use `async with`"

    async def start(self) -> AsyncClient:
        """Connect and make a session; returns the client.

        Raises ``ConnectionFailed`` (a ``LockError``) if no server answers within
        ``connect_timeout``, or at once when every host failed for a cause that waiting
        cannot change (see docs/transport.md); ``ClientClosed`` if the client was
        stopped, or was started in a process this one was forked from.
        """
        if self._refuse_start():
            return self
        if self._servers_known():
            self._check_servers()  # remembered: no I/O
        else:
            await asyncio.to_thread(self._check_servers)  # a blocking read, once
        session = self._new_session()
        forks.track(self)
        self._starting = session
        try:
            await session.start()
        finally:
            self._starting = None
        # Listen from here (no await in between: no change is missed), weakly: a client
        # dropped without stop() can be collected, and warns. A failed start leaves the
        # state LOST, as the sync client's, and the client may be started again.
        session.add_state_listener(_events.weak_method(self._on_session_state))
        self._on_session_state(session.state)
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
            await session.close()
        self._keeper.mark_all_lost("the client was stopped", "client_stopped")
        self._states.on_session_state(SessionState.CLOSED)

    def _on_session_state(self, state: SessionState) -> None:
        self._keeper.on_state(state)
        self._states.on_session_state(state)

    def __del__(self) -> None:
        self._warn_unstopped("while its event loop runs; await stop() or use `async with`")

    async def __aenter__(self) -> AsyncClient:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def sync(self, path: str = "/") -> None:
        """As ``Client.sync``."""
        await driver.run(_contenders.sync(_validate.node_path(path)), self._session_or_raise())

    async def four_letter(self, member: str, word: str) -> str:
        """As ``Client.four_letter`` (asked on a worker thread: it blocks)."""
        return await asyncio.to_thread(_server_check.ask_member, member, word, self._ssl)

    async def server_versions(self) -> list[MemberVersion]:
        """As ``Client.server_versions`` (read on a worker thread: it blocks)."""
        return await asyncio.to_thread(_server_check.read_members, self.options.hosts, self._ssl)

    def _new_lock(self, config: LockConfig) -> AsyncLock:
        return self._join(AsyncLock(self, config))

    def _new_read_write(self, read: LockConfig, write: LockConfig) -> AsyncReadWriteLock:
        return AsyncReadWriteLock(self._new_lock(read), self._new_lock(write))

    def election(
        self,
        path: str,
        *,
        identifier: str | None = None,
        layout: str = "zklocks",
        lock_delay: float | None = None,
    ) -> AsyncElection:
        """A leader election at ``path`` (see ``Client.election``)."""
        config = self._config(
            path, _kinds.ELECT, identifier=identifier, layout=layout, lock_delay=lock_delay
        )
        return self._join(AsyncElection(self, config))

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

    # -- reads ---------------------------------------------------------------------------

    async def get(self, path: str, watch: UserWatch | None = None) -> tuple[bytes, Stat]:
        """``(data, stat)`` of the node at ``path``; ``zklocks.NoNode`` if there is none
        (see ``Client.get``). ``watch`` is called once, on this client's event loop, with
        a ``zklocks.WatchedEvent``: it must not block (start a task to read again)."""
        data_and_stat: tuple[bytes, Stat] = await self._read(_reads.get, path, watch)
        return data_and_stat

    async def exists(self, path: str, watch: UserWatch | None = None) -> Stat | None:
        """The ``Stat`` of the node at ``path``, or None (see ``Client.exists``)."""
        stat: Stat | None = await self._read(_reads.exists, path, watch)
        return stat

    async def get_children(self, path: str, watch: UserWatch | None = None) -> list[str]:
        """The names of the children of ``path`` (see ``Client.get_children``)."""
        names: list[str] = await self._read(_reads.get_children, path, watch)
        return names

    async def _read(self, read: _reads.Read, path: object, watch: object) -> Any:
        checked, watcher = _validate.node_path(path), _reads.watcher_of(watch)
        return await driver.run(read(checked, watcher), self._session_or_raise())

    # -- for tools (see ``Client``) ------------------------------------------------------

    async def locks(self, root: str = "/", *, left_behind: bool = False) -> list[LockSummary]:
        """Every lock at or under ``root``, summed up (see ``Client.locks``)."""
        summaries: list[LockSummary] = await driver.run(_tools.locks(self, root, left_behind))
        return summaries

    async def contenders(self, path: str) -> list[Contender]:
        """Every contender of the lock at ``path`` (see ``Client.contenders``)."""
        found: list[Contender] = await driver.run(_tools.contenders(self, path))
        return found

    async def holders(self, path: str) -> list[Holder]:
        """The current holders of the lock at ``path`` (see ``Client.holders``)."""
        found: list[Holder] = await driver.run(_tools.holders(self, path))
        return found

    async def break_holders(self, holders: Sequence[Holder]) -> str | None:
        """Delete ``holders``' nodes if unchanged; None, or why not (``Client.break_holders``)."""
        refused: str | None = await driver.run(_tools.break_holders(self, holders))
        return refused

    async def get_acl(self, path: str) -> list[ACL] | None:
        """The ACL of the node at ``path``, or None if there is none."""
        acl: list[ACL] | None = await driver.run(_tools.get_acl(self, path))
        return acl

    async def delete_tree(self, root: str) -> list[str]:
        """Delete ``root`` and its tree; the paths left over (see ``Client.delete_tree``)."""
        left: list[str] = await driver.run(_tools.delete_tree(self, root))
        return left

    async def watch_lock(self, path: str, watch: UserWatch) -> bool:
        """A one-shot watch on the lock's line (see ``Client.watch_lock``); ``watch`` is
        called on this client's event loop and must not block."""
        set_: bool = await driver.run(_tools.watch_lock(self, path, _reads.required_watcher(watch)))
        return set_

    async def watch_tree(self, roots: Sequence[str], watch: UserWatch) -> None:
        """Persistent recursive watches on ``roots`` (see ``Client.watch_tree``); ``watch``
        is called on this client's event loop and must not block."""
        await driver.run(_tools.watch_tree(self, roots, _reads.required_watcher(watch)))

    async def session_id(self) -> int:
        """The id of the session this client has now; it changes after an expiry."""
        found: int = await driver.run(_tools.session_id(self))
        return found

    # -- for the lock classes -----------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """(``forks``) In a forked child: refuse every call from now on, the leases read
        as lost, and the session (the parent's) lets its sockets go without a byte
        sent. Attributes only: the event loop is the parent's, and is left alone."""
        session = self._session or self._starting
        if session is None:
            return  # never started: nothing was inherited, and it may start here
        self._forked = True
        self._states.state = ConnectionState.CLOSED
        self._keeper.disown_all(forks.INHERITED_LEASE)
        session.forget_after_fork()

    def _watch_lease(self, acquired: Acquired) -> AsyncLease:
        session = self._session_or_raise()
        lease = AsyncLease(acquired.node, acquired.token, session.facts, acquired.owner)
        self._keeper.track(lease, session.watch_node)
        return lease

    def _native_factory(self, security: ConnectionSecurity) -> SessionFactory[AsyncCarrier]:
        return native_factory(security)

    def _schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        return asyncio.get_running_loop().call_later(delay, fn).cancel


show_concrete_types(AsyncClient, AsyncLock, AsyncReadWriteLock)
