"""The sync lock classes: ``Lock`` (every kind) and ``ReadWriteLock``.

They hold no lock rule: acquire builds a spec, runs the flow on the client's session with
the sync driver, and wraps the grant in a ``Lease``; the holdings table answers "does
this thread hold it". Each thread that acquires is its own contender.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import Literal, Protocol, overload

from zklocks._core import events as _events
from zklocks._core import flow as _flow
from zklocks._core import revoke as _revoke
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender, list_contenders
from zklocks._core.errors import LockError, LockLost
from zklocks._core.lease import Lease
from zklocks._core.steps import await_children_change
from zklocks._frontend.holdings import LockConfig, LockCore
from zklocks._sync import driver
from zklocks._sync.session import SyncSession

log = logging.getLogger("zklocks.lock")


class LockHost(Protocol):
    """What a lock needs of the client that made it (the client satisfies it).

    Named here, not imported, so the client may import its lock classes and not the
    other way round.
    """

    def _session_or_raise(self) -> SyncSession: ...

    def _session_or_none(self) -> SyncSession | None: ...

    def _watch_lease(self, acquired: _flow.Acquired) -> Lease: ...


class Lock(LockCore[Lease]):
    """A distributed lock on one ZooKeeper path; one kind per object.

    Made by ``Client.lock`` (fair or one-node exclusive), ``Client.read_write_lock``
    (``.read`` / ``.write``) and ``Client.semaphore``; all share this interface.
    ``with lock as lease:`` acquires and releases; leaving the block normally after the
    lease was lost raises ``LockLost``.
    """

    _current_owner = staticmethod(threading.get_ident)

    def __init__(self, client: LockHost, config: LockConfig) -> None:
        super().__init__(config)
        self._client = client

    @overload
    def acquire(self, timeout: float | None = None, *, blocking: Literal[True] = True) -> Lease: ...

    @overload
    def acquire(self, timeout: None = None, *, blocking: Literal[False]) -> Lease | None: ...

    @overload
    def acquire(self, timeout: float | None = None, *, blocking: bool) -> Lease | None: ...

    def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> Lease | None:
        """Block until held (or ``timeout`` seconds pass) and return the lease.

        Raises ``LockTimeout`` (a ``TimeoutError``) when the time runs out, with our node
        deleted (a server that cannot take the delete within a quarter second past the
        timeout gets it from a cleanup that goes on apart, so the call still ends on
        time); ``AlreadyHeld`` if this thread holds it and it is not reentrant, or holds
        the same path through another lock object in a way that would wait on itself;
        ``InvalidArgument`` for a bad ``timeout``; ``ClientClosed`` if the client is not
        started or was stopped; ``LockError`` if ZooKeeper refused a request (for
        example a chroot that does not exist, or semaphore contenders that disagree on
        ``permits``). Ctrl-C while waiting deletes our node, then propagates.
        ``blocking=False`` is ``try_acquire()``: the lease, or None without waiting (a
        timeout then makes no sense, as for ``threading.Lock``).
        """
        if not blocking:
            _validate.no_timeout_when_not_blocking(timeout)
            return self._acquire(None, blocking=False)
        return self._acquire(_validate.timeout(timeout), blocking=True)

    def try_acquire(self) -> Lease | None:
        """The lease if the lock can be had without waiting for another holder, else None.

        Raises as ``acquire`` does (never ``LockTimeout``).
        """
        return self._acquire(None, blocking=False)

    def _acquire(self, timeout: float | None, *, blocking: bool) -> Lease | None:
        driver.warn_if_in_event_loop(stacklevel=4)  # the caller of acquire()
        owner = threading.get_ident()
        again = self._holdings.reenter(owner)
        if again is not None:
            return again
        self._refuse_if_sibling_held(owner)
        stale = self._holdings.take_stale(owner)
        if stale is not None:
            self._give_up(stale)
        session = self._client._session_or_raise()
        # the probe's clock starts first: a timed-out wait then measures >= its timeout
        probe = _events.AcquireProbe(self.kind, self.path)
        deadline = None if timeout is None else time.monotonic() + timeout
        spec = self._config.spec(threading.current_thread().name, deadline, blocking)
        acquired = driver.run(probe.watch(_flow.acquire(spec)), session)
        if acquired is None:
            return None
        lease = self._client._watch_lease(acquired)
        lease._label(probe.kind, probe.path)
        lease._releaser = self._release_lease
        self._holdings.add(owner, lease)
        self._equip(
            lease,
            session.call_later,
            lambda: self._take_back(lease, session),
            lambda: self._look_at(lease, session),
        )
        return lease

    @staticmethod
    def _look_at(lease: Lease, session: SyncSession) -> None:
        """Read our node's data on a thread apart (a watch may call this on the client's
        event thread) and hand it to the lease, which looks for a revoke request."""
        session.in_background(
            lambda: lease._data_seen(driver.run(_revoke.read_data(lease.node), session))
        )

    def _take_back(self, lease: Lease, session: SyncSession) -> None:
        """``max_hold`` made ``lease`` lost: delete its node on a thread apart (this runs
        on the client's event thread), by name and token, so a later holder of the
        one-node lock is never touched. The holder's own release later finds it gone."""

        def delete() -> None:
            try:
                driver.run(_flow.release(lease.node, lease.token), session)
            except LockError as error:
                log.warning(
                    "%s: could not delete %s after max_hold: %s", self.path, lease.node, error
                )

        session.in_background(delete)

    def release(self) -> None:
        """Release the calling thread's hold (``NotHeld`` if it holds none).

        After the lease was lost this still deletes our node if it is there, and does not
        raise: the caller learns of the loss from the lease (or from leaving ``with``).
        ``lease.release()`` releases a given lease from any thread.
        """
        lease = self._holdings.leave(threading.get_ident())
        if lease is not None:
            self._give_up(lease)

    def _release_lease(self, lease: Lease, if_held: bool) -> None:
        """``lease.release()``: one release of whichever thread holds ``lease``."""
        last = self._holdings.leave_lease(lease, if_held=if_held)
        if last is not None:
            self._give_up(last)

    def _give_up(self, lease: Lease) -> None:
        # once lost (our node deleted by someone, say), whoever holds ``lock`` now may
        # not be us: the one-node release then reads the node before deleting it
        owner = 0 if lease.lost else lease.owner
        lease._end()
        session = self._client._session_or_none()
        if session is not None:
            driver.run(_flow.release(lease.node, lease.token, owner), session)

    def contenders(self) -> list[Contender]:
        """Every contender under the path: holders first, then waiters in line order.

        ``ClientClosed`` if the client is not started or was stopped; ``LockError`` if
        ZooKeeper refused the listing.
        """
        session = self._client._session_or_raise()
        result: list[Contender] = driver.run(list_contenders(self.path), session)
        return result

    def wait_for_change(self, timeout: float | None = None) -> bool:
        """Block until a contender joins or leaves (True) or ``timeout`` passes (False).

        Driven by a ZooKeeper child watch on the lock path, not by polling: tools such
        as ``zklocks status --watch`` redraw on it. ``ClientClosed`` if the client is not
        started or was stopped; ``InvalidArgument`` for a bad ``timeout``.
        """
        session = self._client._session_or_raise()
        timeout = _validate.timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        changed: bool = driver.run(await_children_change(self.path, deadline), session)
        return changed

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        lease = self.lease
        self.release()
        if exc is None and lease is not None and lease.lost:
            raise LockLost(f"{self.path}: the lease was lost while held ({lease.lost_reason})")


class ReadWriteLock:
    """Shared reads, exclusive writes, one queue: ``.read`` and ``.write`` are locks.

    A reader waits only for the nearest earlier writer; a writer for its immediate
    predecessor; a reader queued behind a waiting writer waits (writers never starve).
    """

    def __init__(self, read: Lock, write: Lock) -> None:
        self.read = read
        self.write = write
        read._sibling = write
        write._sibling = read

    @property
    def path(self) -> str:
        return self.read.path

    def contenders(self) -> list[Contender]:
        """Readers and writers in one queue: holders first, then waiters in line order."""
        return self.read.contenders()

    def __repr__(self) -> str:
        return f"<ReadWriteLock {self.path}>"
