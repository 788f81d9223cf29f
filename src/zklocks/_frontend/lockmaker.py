"""What both clients share: their arguments, checked the same way, and the three lock
factories. Each client says only which lock classes it builds."""

from __future__ import annotations

import functools
import inspect
import ssl as _ssl
import warnings
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from zklocks._core import security as _security
from zklocks._core import validate as _validate
from zklocks._core.errors import InvalidArgument
from zklocks._core.events import ConnectionState, StateListener, StateListeners
from zklocks._frontend.holdings import LockConfig, PathPeers, make_config
from zklocks._vocabulary import SessionFacts

LockT = TypeVar("LockT")
ReadWriteT = TypeVar("ReadWriteT")

DEFAULT_HOSTS = "127.0.0.1:2181"


class LockMaker(Generic[LockT, ReadWriteT]):
    """``lock``, ``read_write_lock`` and ``semaphore``: validate, then build."""

    def __init__(
        self,
        hosts: str,
        session_timeout: float,
        connect_timeout: float,
        *,
        tick_time: object = None,
        clock_drift: object = _validate.LeaseTiming.clock_drift,
        ensemble_lag: object = None,
        auth: object = None,
        acl: object = "open",
        ssl: object = None,
    ) -> None:
        if not isinstance(hosts, str) or not hosts.strip():
            raise InvalidArgument(f"hosts must be a 'host:port,...' string, not {hosts!r}")
        self.hosts = hosts
        self._requested_timeout = _validate.session_timeout(session_timeout)
        self._granted_timeout: float | None = None  # the last session's, once stopped
        self.connect_timeout = _validate.session_timeout(connect_timeout)
        self.lease_timing = _validate.LeaseTiming.of(tick_time, clock_drift)
        if ensemble_lag is not None:
            warnings.warn(
                "ensemble_lag is no longer used and is ignored: on an ensemble the lease is "
                "now proven through the leader, which needs the servers' tickTime "
                "(tick_time=..., learnt from the servers when they allow it); see "
                "docs/locks.md, 'What lost means'",
                DeprecationWarning,
                stacklevel=3,
            )
        # Security options (docs/security.md); the credentials' secrets stay out of reprs.
        self._credentials = _security.credentials(auth)
        self._acl = _security.acl_policy(acl, self._credentials)
        self._ssl: _ssl.SSLContext | None = _security.ssl_context(ssl)
        self._states = StateListeners()
        self._peers = PathPeers()

    @property
    def _auth_packets(self) -> list[tuple[str, bytes]]:
        """What the connection sends on every (re)connect."""
        return [credential.packet for credential in self._credentials]

    def _facts(self) -> SessionFacts | None:
        raise NotImplementedError

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
        return self._granted_timeout or self._requested_timeout

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

    def _config(self, path: str, kind: str, **options: Any) -> LockConfig:
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

        Raises ``InvalidPath`` or ``InvalidArgument`` for bad arguments (before any
        ZooKeeper call); it makes no request itself.
        """
        return self._new_lock(
            self._config(
                path,
                "lock",
                fair=fair,
                reentrant=reentrant,
                identifier=identifier,
                layout=layout,
                max_hold=max_hold,
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
    ) -> ReadWriteT:
        """A read/write lock: ``.read`` is shared, ``.write`` exclusive, one FIFO queue.

        ``layout="curator"`` shares ``path`` with Curator's ``InterProcessReadWriteLock``,
        ``layout="kazoo"`` with kazoo's ``ReadLock``/``WriteLock`` (docs/interop.md).
        ``max_hold`` bounds each lease of either side, as for ``lock``.
        Raises ``InvalidPath`` or ``InvalidArgument`` for bad arguments.
        """
        options: dict[str, Any] = {
            "reentrant": reentrant,
            "identifier": identifier,
            "layout": layout,
            "max_hold": max_hold,
        }
        return self._new_read_write(
            self._config(path, "read", **options), self._config(path, "write", **options)
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
    ) -> LockT:
        """At most ``permits`` holders at once, granted in FIFO order.

        Every contender on one path must use the same ``permits``; a contender that sees
        another count refuses with ``InvalidArgument`` when it acquires. Raises
        ``InvalidPath`` or ``InvalidArgument`` for bad arguments.
        ``layout="curator"`` is Curator's ``InterProcessSemaphoreV2`` on ``path``
        (``path/locks`` and ``path/leases``; it cannot see another count, and a waiter
        holds the inner mutex while it waits: docs/interop.md). kazoo's semaphore is not
        offered: ``InvalidArgument``. ``max_hold`` bounds each lease, as for ``lock``.
        """
        return self._new_lock(
            self._config(
                path,
                "lease",
                permits=permits,
                reentrant=reentrant,
                identifier=identifier,
                layout=layout,
                max_hold=max_hold,
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
