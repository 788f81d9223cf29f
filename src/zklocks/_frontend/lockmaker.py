"""The client base: what both clients share, as httpx's ``BaseClient`` holds what its
two clients share. Their arguments, checked the same way; the three lock factories; the
session's bookkeeping (started, stopped, inherited across fork). Each client says only
which lock classes it builds and how it starts, stops and waits."""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from zklocks._core import kinds as _kinds
from zklocks._core import security as _security
from zklocks._core import validate as _validate
from zklocks._core.events import ConnectionState, StateListener, StateListeners
from zklocks._core.lease_keeper import LeaseKeeper
from zklocks._core.security import ACL
from zklocks._errors import ClientClosed, InvalidArgument
from zklocks._frontend import server_check as _server_check
from zklocks._frontend.holdings import LockConfig, LockCore, PathPeers, make_config
from zklocks._frontend.options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HOSTS,
    DEFAULT_SESSION_TIMEOUT,
    ClientOptions,
    ConnectionSecurity,
)
from zklocks._transport import forks
from zklocks._transport.sasl import SASL, login_of, plain_packets, with_login
from zklocks._vocabulary import SessionFacts

LockT = TypeVar("LockT")
ReadWriteT = TypeVar("ReadWriteT")


class Carrier(Protocol):
    """What the client base reads of its session, whichever front end made it."""

    facts: SessionFacts

    @property
    def closed(self) -> bool: ...


SessionT = TypeVar("SessionT", bound=Carrier)
SessionT_co = TypeVar("SessionT_co", bound=Carrier, covariant=True)
PartT = TypeVar("PartT", bound=LockCore[Any])


@dataclass(frozen=True)
class LeaseReport:
    """What ``client.lease_report()`` says of the lease rule on a session.

    ``session_timeout``: the one the server granted. ``tick`` and ``source``: the
    servers' tickTime (seconds) the rule uses on an ensemble and where it came from
    (the ``tick_time`` option, a member's ``conf``, the AdminServer, the session bounds
    learnt by handshakes, or "assumed"); both None on a standalone server, where every
    answer counts and no tickTime is needed. ``problem``: why no lease can be kept on
    this session, with the fix (None: one can); acquire then refuses with
    ``LeaseUnkeepable``. ``session_bounds``: the shortest and longest session timeouts
    (seconds) the servers grant, where the client learnt them by handshakes (an ensemble
    whose tickTime no ``conf`` gave), else None.
    """

    session_timeout: float
    tick: float | None
    source: str | None
    problem: str | None
    session_bounds: tuple[float, float] | None = None


class SessionFactory(Protocol[SessionT_co]):
    """Makes the session a client runs on, from the client's options: our own transport
    by default; the simulator injects its own (``session_factory=``)."""

    def __call__(self, options: ClientOptions) -> SessionT_co: ...


class LockMaker(Generic[LockT, ReadWriteT, SessionT]):
    """``lock``, ``read_write_lock`` and ``semaphore``: validate, then build; and the
    session as the lock classes reach it."""

    _public_name: ClassVar[str]  # in reprs: "Client", "AsyncClient"
    _how_to_start: ClassVar[str]  # in the error of a call before start()

    def __init__(
        self,
        hosts: str = DEFAULT_HOSTS,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        tick_time: float | None = None,
        clock_drift: float = _validate.DEFAULT_CLOCK_DRIFT,
        ensemble_lag: float | None = None,
        auth: Sequence[tuple[str, str | bytes]] | None = None,
        acl: str | Sequence[ACL] = "open",
        ssl: bool | SSLContext | None = None,
        session_factory: SessionFactory[SessionT] | None = None,
        sasl: SASL | None = None,
        strict_server: bool = False,
    ) -> None:
        self.options = ClientOptions.checked(
            hosts,
            session_timeout=session_timeout,
            connect_timeout=connect_timeout,
            tick_time=tick_time,
            clock_drift=clock_drift,
            connect_string=session_factory is None,  # a factory of its own decides
        )
        self._granted_timeout: float | None = None  # the last session's, once stopped
        if ensemble_lag is not None:
            warnings.warn(
                "ensemble_lag is no longer used and is ignored: on an ensemble the lease is "
                "now proven through the leader, which needs the servers' tickTime "
                "(tick_time=..., learnt from the servers when they allow it); see "
                "docs/locks.md, 'What lost means'",
                DeprecationWarning,
                stacklevel=2,
            )
        # Security options (docs/security.md); the credentials' secrets stay out of reprs.
        self._credentials = _security.credentials(with_login(auth, sasl))
        self._acl = _security.acl_policy(acl, self._credentials)
        self._ssl: SSLContext | None = _security.ssl_context(ssl)
        if session_factory is not None and (self._credentials or self._acl or self._ssl):
            raise InvalidArgument(
                "auth, acl and ssl need ZooKeeper itself; a session_factory (the simulator) "
                "does not model them"
            )
        self._session_factory = session_factory or self._native_factory(
            ConnectionSecurity(
                self._ssl,
                tuple(plain_packets(self._credentials)),
                login_of(self._credentials),
            )
        )
        self._states = StateListeners()
        self._peers = PathPeers()
        self._keeper = LeaseKeeper(self._facts, self._schedule)
        self._mutex = threading.Lock()  # stop() against a start() on another thread
        self._session: SessionT | None = None
        self._starting: SessionT | None = None  # the session start() is making
        self._stopped = False
        self._forked = False  # inherited by a forked child: refuses every call
        if not isinstance(strict_server, bool):
            raise InvalidArgument(f"strict_server must be True or False, not {strict_server!r}")
        self._strict_server = strict_server
        # the servers' versions are read on our own transport only (not the simulator's)
        self._reads_versions = session_factory is None

    def _check_servers(self) -> None:
        """Before the first session: the members' versions against the known-issues
        table, once per ensemble and process (``server_check``); blocking, short."""
        if self._reads_versions:
            _server_check.check(self.options.hosts, self._ssl, self._strict_server)

    def lease_report(self) -> LeaseReport:
        """How the lease rule stands on this client's session (see ``LeaseReport``);
        ``ClientClosed`` if not started. ``zklocks doctor`` shows it."""
        facts = self._session_or_raise().facts
        timing = facts.timing()
        return LeaseReport(
            session_timeout=facts.session_timeout(),
            tick=None if timing is None else timing[0],
            source=None if timing is None else timing[1],
            problem=facts.lease_problem(),
            session_bounds=facts.session_bounds(),
        )

    def _servers_known(self) -> bool:
        """True when ``_check_servers`` will not block (read already, or not read at all)."""
        return not self._reads_versions or _server_check.known(self.options.hosts)

    def _native_factory(self, security: ConnectionSecurity) -> SessionFactory[SessionT]:
        """The factory of sessions on our own transport, with the security options."""
        raise NotImplementedError

    @property
    def hosts(self) -> str:
        return self.options.hosts

    @property
    def connect_timeout(self) -> float:
        return self.options.connect_timeout

    @property
    def lease_timing(self) -> _validate.LeaseTiming:
        return self.options.lease_timing

    def _join(self, lock: PartT) -> PartT:
        """``lock``, known to this client's other lock objects on its path (so that one
        owner cannot wait on itself through two objects)."""
        self._peers.join(lock)
        return lock

    def _schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        """Run ``fn`` after ``delay`` seconds (the lease keeper's timers)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "started" if self._session else "new"
        return f"<{self._public_name} {self.hosts} {state}>"

    def _new_session(self) -> SessionT:
        """A session for ``start()`` to start, from the factory (not started yet)."""
        return self._session_factory(self.options)

    def _refuse_start(self) -> bool:
        """Whether ``start()`` has nothing to do (already started); ``ClientClosed`` when
        it may not start (stopped, or inherited across fork)."""
        if self._forked:
            raise ClientClosed(forks.INHERITED)
        if self._stopped:
            raise ClientClosed("a stopped client cannot be started again; make a new one")
        return self._session is not None

    @property
    def connected(self) -> bool:
        """Is a session live on a connection right now (``state`` is ``CONNECTED``)?"""
        session = self._session
        return session is not None and session.facts.connected()

    def _session_or_raise(self) -> SessionT:
        if self._forked:
            raise ClientClosed(forks.INHERITED)
        session = self._session
        if session is None or session.closed:
            word = "stopped" if self._stopped else f"not started ({self._how_to_start})"
            raise ClientClosed(f"the client is {word}")
        return session

    def _session_or_none(self) -> SessionT | None:
        """The session to release on: None once stopped (nothing to delete then);
        ``ClientClosed`` in a forked child (the lease is the parent's to release)."""
        if self._forked:
            raise ClientClosed(forks.INHERITED)
        session = self._session
        return None if session is None or session.closed else session

    def _warn_unstopped(self, consequence: str) -> None:
        """(``__del__``) A client dropped with its session open: say so, once."""
        unstopped = getattr(self, "_session", None) is not None and not self._stopped
        if unstopped and not getattr(self, "_forked", False):  # a child's copy: not ours
            warnings.warn(
                f"{self!r} was never stopped: its session stays open (and its locks held) "
                f"{consequence}",
                ResourceWarning,
                source=self,
                stacklevel=3,
            )

    def _facts(self) -> SessionFacts | None:
        session = self._session
        return None if session is None else session.facts

    @property
    def session_timeout(self) -> float:
        """The session timeout in seconds: the one the server granted, once connected.

        ZooKeeper clamps the requested timeout to its bounds (by default 2 to 20 ticks:
        4 s to 40 s with a 2 s tickTime), so a request of 1 s gets 4 s. Before the first
        session this is the requested value; after ``stop()``, the last session's.
        """
        facts = self._facts()
        if facts is not None:
            return facts.session_timeout()
        return self._granted_timeout or self.options.session_timeout

    def _remember_granted_timeout(self) -> None:
        facts = self._facts()
        if facts is not None:
            self._granted_timeout = facts.session_timeout()

    @property
    def state(self) -> ConnectionState:
        """The connection's state now; ``LOST`` before the first session is made."""
        return self._states.state

    def add_listener(self, fn: StateListener) -> None:
        """Call ``fn(state)`` with each new ``ConnectionState``.

        It is called on the thread that runs the connection (``Client``: the client's
        own connection thread; ``AsyncClient``: the event loop, inside a callback), in
        order, once per change. It must return quickly and must not block or call back
        into the client synchronously (for example acquire a lock): the connection does
        nothing else while it runs, pings included. Hand work to another thread (or
        task) instead. An exception it raises is logged on ``zklocks.connection`` and
        ignored. ``InvalidArgument`` if ``fn`` is not callable.
        """
        self._states.add(fn)

    def remove_listener(self, fn: StateListener) -> None:
        """Stop calling ``fn``; nothing happens if it was not added."""
        self._states.remove(fn)

    def _config(self, path: str, kind: _kinds.Kind, **options: Any) -> LockConfig:
        """A checked lock config carrying this client's ACL: every factory builds its
        locks through here, so none can create nodes without it."""
        return make_config(path, kind, acl=self._acl, **options)

    def _new_lock(self, config: LockConfig) -> LockT:
        raise NotImplementedError

    def _new_read_write(self, read: LockConfig, write: LockConfig) -> ReadWriteT:
        raise NotImplementedError

    def lock(
        self,
        path: str,
        *,
        fair: bool = True,
        reentrant: bool = False,
        identifier: str | None = None,
        layout: str = "zklocks",
        max_hold: float | None = None,
        lock_delay: float | None = None,
    ) -> LockT:
        """An exclusive lock on ``path`` (its parents are created as needed).

        Fair by default: contenders queue in order of arrival and each release wakes
        only the next one. ``fair=False`` is the one-node lock: one round trip to take it
        uncontended, but whoever creates first after a release wins (no order), and every
        waiter wakes on each release. Use one of the two on a given path, in every
        process: a one-node acquire refuses with ``InvalidArgument`` while queued
        contenders are on the path. ``reentrant=True`` lets the holding thread (or task)
        acquire again, counted.
        ``identifier`` is stored in our node for ``contenders()`` and ``zklocks status``.
        ``layout`` says whose queue the lock stands in: ``"zklocks"`` (ours), or
        ``"curator"`` / ``"kazoo"`` to share ``path`` with Apache Curator's
        ``InterProcessMutex`` or kazoo's ``Lock`` (docs/interop.md); those have no
        one-node lock.
        ``max_hold`` (seconds) bounds how long a lease may be held: past it the lease
        is lost (``lost_reason`` says ``max_hold``, the lost callbacks run) on this
        client's own clock, connected or not, and our node is deleted so the next
        waiter is granted. A holder that hangs but keeps its session cannot keep the
        lock for ever. ``None`` (the default) sets no bound.
        ``lock_delay`` (seconds): when a holder ahead of us was lost *abnormally* (its
        session expired, it was broken, taken back past ``max_hold``), our grant is
        reported only this long after we saw it go, so a paused old holder has time to
        notice and stop; a clean release hands over at once (docs/locks.md,
        "Lock-delay"). The zklocks layout only, and the queued lock only.

        Raises ``InvalidPath`` or ``InvalidArgument`` for bad arguments (before any
        ZooKeeper call); it makes no request itself.
        """
        return self._new_lock(
            self._config(
                path,
                _kinds.LOCK,
                fair=fair,
                reentrant=reentrant,
                identifier=identifier,
                layout=layout,
                max_hold=max_hold,
                lock_delay=lock_delay,
            )
        )

    def read_write_lock(
        self,
        path: str,
        *,
        reentrant: bool = False,
        identifier: str | None = None,
        layout: str = "zklocks",
        max_hold: float | None = None,
        lock_delay: float | None = None,
    ) -> ReadWriteT:
        """A read/write lock: ``.read`` is shared, ``.write`` exclusive, one FIFO queue.

        ``layout="curator"`` shares ``path`` with Curator's ``InterProcessReadWriteLock``,
        ``layout="kazoo"`` with kazoo's ``ReadLock``/``WriteLock`` (docs/interop.md).
        ``max_hold`` bounds each lease of either side, and ``lock_delay`` delays each
        grant after an abnormal loss ahead, as for ``lock``.
        Raises ``InvalidPath`` or ``InvalidArgument`` for bad arguments.
        """
        options: dict[str, Any] = {
            "reentrant": reentrant,
            "identifier": identifier,
            "layout": layout,
            "max_hold": max_hold,
            "lock_delay": lock_delay,
        }
        return self._new_read_write(
            self._config(path, _kinds.READ, **options), self._config(path, _kinds.WRITE, **options)
        )

    def semaphore(
        self,
        path: str,
        *,
        permits: int,
        reentrant: bool = False,
        identifier: str | None = None,
        layout: str = "zklocks",
        max_hold: float | None = None,
        lock_delay: float | None = None,
    ) -> LockT:
        """At most ``permits`` holders at once, granted in FIFO order.

        Every contender on one path must use the same ``permits``; a contender that sees
        another count refuses with ``InvalidArgument`` when it acquires. Raises
        ``InvalidPath`` or ``InvalidArgument`` for bad arguments.
        ``layout="curator"`` is Curator's ``InterProcessSemaphoreV2`` on ``path``
        (``path/locks`` and ``path/leases``; it cannot see another count, and a waiter
        holds the inner mutex while it waits: docs/interop.md). kazoo's semaphore is not
        offered: ``InvalidArgument``. ``max_hold`` bounds each lease, and
        ``lock_delay`` delays a grant after an abnormal loss ahead, as for ``lock``.
        """
        return self._new_lock(
            self._config(
                path,
                _kinds.PERMIT,
                permits=permits,
                reentrant=reentrant,
                identifier=identifier,
                layout=layout,
                max_hold=max_hold,
                lock_delay=lock_delay,
            )
        )


def show_concrete_types(client: type, lock: type, read_write: type) -> None:
    """Give ``client`` its own ``lock``, ``read_write_lock`` and ``semaphore`` whose
    signatures name the concrete classes, so ``help(Client)`` says ``-> Lock`` rather
    than the generic ``-> LockT``. The behaviour is the shared one, unchanged."""
    for name, returned in (("lock", lock), ("read_write_lock", read_write), ("semaphore", lock)):
        shared: Callable[..., Any] = getattr(LockMaker, name)

        def method(self: Any, *args: Any, __shared: Any = shared, **kwargs: Any) -> Any:
            return __shared(self, *args, **kwargs)

        functools.update_wrapper(method, shared)
        signature = inspect.signature(shared).replace(return_annotation=returned.__name__)
        method.__signature__ = signature  # type: ignore[attr-defined]
        method.__qualname__ = f"{client.__name__}.{name}"
        setattr(client, name, method)
