"""The sync ``Client``: one ZooKeeper session, the locks made from it, and their leases."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

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
from zklocks._core.lease import Lease
from zklocks._core.reads import UserWatch
from zklocks._core.security import ACL
from zklocks._frontend import server_check as _server_check
from zklocks._frontend import tools as _tools
from zklocks._frontend.holdings import LockConfig
from zklocks._frontend.lockmaker import LockMaker, SessionFactory, show_concrete_types
from zklocks._frontend.options import ConnectionSecurity
from zklocks._frontend.server_check import MemberVersion
from zklocks._protocol.records import Stat
from zklocks._sync import driver
from zklocks._sync.carrier import SyncCarrier
from zklocks._sync.election import Election, MultiLock
from zklocks._sync.locks import Lock, ReadWriteLock
from zklocks._sync.transaction import Transaction
from zklocks._sync.watches import ApartWatcher
from zklocks._transport import forks
from zklocks._vocabulary import SessionState


class Client(LockMaker[Lock, ReadWriteLock, SyncCarrier]):
    """A connection to ZooKeeper (one session) from which locks are made.

    ``hosts`` is ZooKeeper's connect string: ``"host:port[,host:port...][/chroot]"``.
    A chroot must already exist on the server: every path is taken inside it.
    ``session_timeout`` (seconds) is how long the server keeps our session, and so our
    locks, after it last heard from us; it is also how soon a crashed holder's lock is
    released. The server clamps it to its own bounds: ``client.session_timeout`` says
    what was granted once connected. On an ensemble a lease is proven through the leader,
    which takes a few of the servers' ticks: the session must be at least about 4.2
    ticks (8.5 s with ZooKeeper's default 2 s tick; the default 10 s is enough up to a
    2.3 s tick), or every ``acquire`` raises ``LeaseUnkeepable`` (docs/getting-started.md,
    "Choosing a session timeout", has a table). Use as a context manager, or call
    ``start()`` and ``stop()``; a client garbage-collected without ``stop()`` warns
    (``ResourceWarning``). ``tick_time`` (seconds) is the servers' tickTime, which the
    lease rule on an ensemble needs; ``None`` (the default) asks the server (the ``conf``
    four-letter word, or the AdminServer) and learns a bound from the servers' session
    bounds (two throwaway handshakes, once per ensemble per process); a ``tick_time``
    below what those bounds prove is refused at ``start()``. ``clock_drift`` (default
    0.01, i.e. 1 %) is the clock-rate error every lease computation allows for. See
    docs/locks.md, "What lost means". ``ensemble_lag`` is no longer used
    (DeprecationWarning).
    ``session_factory`` replaces the transport (``zklocks.sim`` runs clients on its
    in-memory model this way); leave it out to talk to ZooKeeper.

    Security (docs/security.md): ``auth=[("digest", "user:password")]`` is sent on every
    (re)connect; ``acl="creator"`` gives the lock directory and every contender node to
    that identity alone (``"open"``, the default, is ZooKeeper's open ACL; or a list of
    ``zklocks.ACL``); ``ssl=True`` or an ``ssl.SSLContext`` connects over TLS.
    ``sasl=zklocks.SASL(mechanism="DIGEST-MD5", username=..., password=...)`` logs in
    with SASL after every (re)connect, before anything else is sent; ``acl="creator"``
    then gives nodes the ``sasl:<username>`` identity.
    Credentials never appear in a repr, a log line or an error.

    Before its first session the client reads each member's version (``srvr``, once per
    ensemble and process) and warns at WARNING of a release with a known
    transaction-loss bug; ``strict_server=True`` refuses to start on one instead
    (``ConnectionFailed``). See docs/operations.md, "Server versions".

    Every call blocks the calling thread; inside ``async`` code use ``AsyncClient``
    (the sync client warns with a ``RuntimeWarning`` when called in a running event loop).
    Connection state: ``state``, ``add_listener()`` and ``remove_listener()``.
    Raises ``InvalidArgument`` for bad arguments.
    """

    _public_name = "Client"
    _how_to_start = "call start() or use `with`"

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Client:
        """Connect and make a session; returns the client.

        Raises ``ConnectionFailed`` (a ``LockError``) if no server answers within
        ``connect_timeout``, naming each host and what went wrong with it, or at once when
        every host failed for a cause that waiting cannot change (refused, a name that does
        not resolve, a TLS refusal or mismatch; see docs/transport.md); ``ClientClosed``
        if the client was stopped (a client is started once), or was started in a process
        this one was forked from (see docs/recipes.md).
        """
        driver.warn_if_in_event_loop(stacklevel=3)
        if self._refuse_start():
            return self
        self._check_servers()
        session = self._new_session()
        # weakly: a client dropped without stop() can be collected, and warns
        session.add_state_listener(_events.weak_method(self._on_session_state))
        forks.track(self)
        self._starting = session
        try:
            session.start()
        finally:
            self._starting = None
        self._session = session
        return self

    def stop(self) -> None:
        """Close the session: the server deletes our nodes at once; leases become lost.

        Idempotent; never raises for a connection problem. On a client inherited across
        fork it only forgets the parent's session: nothing is sent, the parent keeps it.
        """
        forks.untrack(self)
        if self._forked:  # no lock taken: one held by a parent's thread stays held here
            self._stopped = True
            return
        with self._mutex:
            self._stopped = True
            self._remember_granted_timeout()
            session, self._session = self._session, None
        if session is not None:
            session.close()
        self._keeper.mark_all_lost("the client was stopped", "client_stopped")
        self._states.on_session_state(SessionState.CLOSED)

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.CLOSED and self._starting is not None:
            return  # a failed start: the state stays LOST and the client may start again
        self._keeper.on_state(state)
        self._states.on_session_state(state)

    def __del__(self) -> None:
        self._warn_unstopped("until the process exits; call stop() or use `with`")

    def __enter__(self) -> Client:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- locks --------------------------------------------------------------------------

    def _new_lock(self, config: LockConfig) -> Lock:
        return self._join(Lock(self, config))

    def _new_read_write(self, read: LockConfig, write: LockConfig) -> ReadWriteLock:
        return ReadWriteLock(self._new_lock(read), self._new_lock(write))

    def election(
        self,
        path: str,
        *,
        identifier: str | None = None,
        layout: str = "zklocks",
        lock_delay: float | None = None,
    ) -> Election:
        """A leader election at ``path``: campaign to lead, observe who leads (see
        docs/election.md). ``identifier`` names this candidate to observers.
        ``layout="curator"`` stands in an Apache Curator ``LeaderLatch`` election on the
        path, as one of its candidates, ``layout="curator-selector"`` in a
        ``LeaderSelector`` one (docs/interop.md). ``lock_delay``: a term that follows a
        leader lost abnormally begins only this long after the loss was seen, as for
        ``lock`` (docs/locks.md, "Lock-delay")."""
        config = self._config(
            path, _kinds.ELECT, identifier=identifier, layout=layout, lock_delay=lock_delay
        )
        return self._join(Election(self, config))

    def multi_lock(self, locks: Iterable[Lock]) -> MultiLock:
        """Several locks held as one, taken in one global order (no deadlock)."""
        return MultiLock(locks)

    def transaction(self, *, guard: Lease | None = None) -> Transaction:
        """ZooKeeper ops applied all or none, with ``commit()`` (see ``Transaction``).

        With ``guard=lease`` the commit applies them only if the lease's node still
        exists when ZooKeeper applies them: a lock-protected write to ZooKeeper that a
        holder paused past its session cannot make (docs/fencing.md). Nodes created get
        this client's ``acl``. ``InvalidArgument`` if ``guard`` is not a lease.
        """
        return Transaction(self._session_or_raise, guard, self._acl)

    def revoke(self, path: str) -> int:
        """Ask every current holder of ``path`` to let go; how many were asked.

        Cooperative: a marker is written into each holder's node data (Curator's
        ``__REVOKE__`` for a Curator-named node) and nothing is deleted; a holder hears it
        through ``lease.add_revoke_callback`` (or Curator's ``makeRevocable``). Holders of
        every layout are found, as ``contenders()`` finds them. ``InvalidPath`` for a bad
        path; ``ClientClosed`` if not started; ``AccessDenied`` if the ACL forbids it.
        """
        asked: int = driver.run(_revoke.revoke(_validate.lock_path(path)), self._session_or_raise())
        return asked

    # -- reads ---------------------------------------------------------------------------

    def get(self, path: str, watch: UserWatch | None = None) -> tuple[bytes, Stat]:
        """``(data, stat)`` of the node at ``path``; ``zklocks.NoNode`` if there is none.

        ``stat.version`` is what ``txn.set_data(path, data, version=stat.version)``
        needs for a read-modify-write (docs/fencing.md). ``watch``: a callable called
        once with a ``zklocks.WatchedEvent`` when the node's data changes or it is
        deleted (or the session ends first); not set if the node is missing. Watches run
        on a thread of the client's, so they may call the client. Waits for a connection
        while the session lives; ``InvalidPath``, ``ClientClosed``, ``AccessDenied``.
        """
        data_and_stat: tuple[bytes, Stat] = self._read(_reads.get, path, watch)
        return data_and_stat

    def exists(self, path: str, watch: UserWatch | None = None) -> Stat | None:
        """The ``Stat`` of the node at ``path``, or None if there is none. ``watch`` (as
        for ``get``) is set either way: on a missing node it fires when it is created."""
        stat: Stat | None = self._read(_reads.exists, path, watch)
        return stat

    def get_children(self, path: str, watch: UserWatch | None = None) -> list[str]:
        """The names (not paths) of the children of ``path``; ``zklocks.NoNode`` if it
        does not exist. ``watch`` (as for ``get``) fires when a child is added or removed,
        or the node is deleted."""
        names: list[str] = self._read(_reads.get_children, path, watch)
        return names

    def _read(self, read: _reads.Read, path: object, watch: object) -> Any:
        driver.warn_if_in_event_loop(stacklevel=4)
        checked, watcher = _validate.node_path(path), _reads.watcher_of(watch)
        session = self._session_or_raise()
        if watcher is not None:
            watcher = ApartWatcher(watcher, session.in_background)
        return driver.run(read(checked, watcher), session)

    def sync(self, path: str = "/") -> None:
        """Let the member this client talks to catch up with the leader: a read made
        after it sees every write the ensemble had committed when it was sent (ZooKeeper's
        ``sync``; it writes nothing). ``ClientClosed`` if not started."""
        driver.run(_contenders.sync(_validate.node_path(path)), self._session_or_raise())

    def server_versions(self) -> list[MemberVersion]:
        """Each member of the connect string as its ``srvr`` describes it, read now:
        ``member`` ("host:port"), ``version``, ``mode``, ``issues`` (the known-issues
        table's entries for that version; ``losses``: those that lose transactions), or
        ``error`` when it could not be asked. One short connection per member, over TLS
        when the client uses it; works before ``start()`` too. Used by ``zklocks serve``
        and ``zklocks doctor``.
        """
        return _server_check.read_members(self.options.hosts, self._ssl)

    def four_letter(self, member: str, word: str) -> str:
        """A read-only four-letter word's answer (``srvr``, ``conf``, ``cons``, ``dump``,
        ``mntr``...) from ``member`` ("host:port"), over TLS when the client uses it.
        A word the server does not allow (``4lw.commands.whitelist``; stock servers
        allow ``srvr`` alone) is answered with a line saying so. ``InvalidArgument`` for
        a word that changes anything, ``ConnectionFailed`` if the member cannot be asked.
        """
        return _server_check.ask_member(member, word, self._ssl)

    # -- for tools: what ``zklocks status``, ``break`` and ``serve`` see ------------------

    def locks(self, root: str = "/", *, left_behind: bool = False) -> list[LockSummary]:
        """Every lock at or under ``root`` (sorted by path), of any layout, each summed
        up: ``path``, ``kinds``, ``permits``, ``holders``, ``waiters`` and the holders'
        ``tokens``. A lock is a node with contender children; other nodes are descended
        into (not ``/zookeeper``, nor those this identity may not list). About one round
        trip per level. ``AccessDenied`` if ``root`` itself may not be listed.
        ``left_behind=True`` (what ``zklocks doctor`` checks) also lists the directories
        left empty and names each lock's ``strangers`` (see ``LockSummary``)."""
        summaries: list[LockSummary] = driver.run(_tools.locks(self, root, left_behind))
        return summaries

    def contenders(self, path: str) -> list[Contender]:
        """Every contender of the lock at ``path``, of any layout: holders first, then
        waiters in line order (as ``Lock.contenders()``, without making a lock)."""
        found: list[Contender] = driver.run(_tools.contenders(self, path))
        return found

    def holders(self, path: str) -> list[Holder]:
        """The current holders of the lock at ``path``, of any layout, in line order:
        ``node``, ``token``, ``version``, ``identifier``, ``host``, ``pid``, as read now.
        What ``zklocks break`` shows before it breaks them."""
        found: list[Holder] = driver.run(_tools.holders(self, path))
        return found

    def break_holders(self, holders: Sequence[Holder]) -> str | None:
        """An administrator's forced release: delete the nodes of ``holders`` (from
        ``holders()``) all at once, each only if unchanged since it was read. None when
        done, else why nothing was deleted (a holder changed meanwhile, say).
        ``AccessDenied`` if the ACL forbids it. Unlike ``revoke`` the holders are not
        asked: each one's lease is lost, and its work must be fenced (docs/fencing.md)."""
        refused: str | None = driver.run(_tools.break_holders(self, holders))
        return refused

    def get_acl(self, path: str) -> list[ACL] | None:
        """The ACL of the node at ``path`` as stored, or None if there is no such node."""
        acl: list[ACL] | None = driver.run(_tools.get_acl(self, path))
        return acl

    def delete_tree(self, root: str) -> list[str]:
        """Delete ``root`` and every node under it, deepest first; the paths left over (a
        node that gained a child meanwhile, such as a lock someone still queues for)."""
        left: list[str] = driver.run(_tools.delete_tree(self, root))
        return left

    def watch_lock(self, path: str, watch: UserWatch) -> bool:
        """Call ``watch`` once (with a ``WatchedEvent``) when a contender joins or leaves
        the lock at ``path``, or ``path`` is created, or the session ends. False when a
        change may already have happened: look again at once. Set the watch, *then* list
        the contenders, then wait for it: then no change is missed (nothing polls)."""
        set_: bool = driver.run(_tools.watch_lock(self, path, self._apart(watch)))
        return set_

    def watch_tree(self, roots: Sequence[str], watch: UserWatch) -> None:
        """Call ``watch`` for every node created, deleted or changed at or under each of
        ``roots``, for as long as this session lives (ZooKeeper 3.6+ persistent recursive
        watches; ``LockError`` before 3.6). A new session (``session_id()`` changed) has
        none: set them again."""
        driver.run(_tools.watch_tree(self, roots, self._apart(watch)))

    def session_id(self) -> int:
        """The id of the session this client has now; it changes after an expiry."""
        found: int = driver.run(_tools.session_id(self))
        return found

    def _apart(self, watch: UserWatch) -> ApartWatcher:
        checked = _reads.required_watcher(watch)
        return ApartWatcher(checked, self._session_or_raise().in_background)

    # -- for the lock classes ----------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        """(``forks``) In a forked child: refuse every call from now on; the leases read
        as lost. Attributes only: no lock, no listener (the session drops its sockets)."""
        if self._session is None and self._starting is None:
            return  # never started: nothing was inherited, and it may start here
        self._forked = True
        self._states.state = ConnectionState.CLOSED
        self._keeper.disown_all(forks.INHERITED_LEASE)

    def _native_factory(self, security: ConnectionSecurity) -> SessionFactory[SyncCarrier]:
        from zklocks._sync.native_carrier import NativeSyncCarrier

        return functools.partial(NativeSyncCarrier, security=security)

    def _schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        session = self._session
        if session is None:
            return lambda: None
        return session.call_later(delay, fn)

    def _watch_lease(self, acquired: Acquired) -> Lease:
        session = self._session_or_raise()
        lease = Lease(acquired.node, acquired.token, session.facts, acquired.owner)
        self._keeper.track(lease, session.watch_node)
        return lease


show_concrete_types(Client, Lock, ReadWriteLock)
