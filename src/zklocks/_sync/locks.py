"""The sync lock classes: ``Lock`` (every kind) and ``ReadWriteLock``.

They hold no lock rule and no bookkeeping: each method runs its operation
(``zklocks._frontend.operations``, shared with the asyncio classes) with the sync driver.
Each thread that acquires is its own contender.
"""

from __future__ import annotations

import functools
import threading
from typing import Literal, overload

from zklocks._core import current as _current
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender
from zklocks._core.lease import Lease, Scheduler
from zklocks._frontend import operations
from zklocks._frontend.holdings import Host, LockConfig, LockCore, PairCore
from zklocks._frontend.operations import Operation
from zklocks._sync import driver
from zklocks._sync.carrier import SyncCarrier
from zklocks._sync.hold import Hold


class _Threads:
    """The sync client's way of running things apart: the session's thread and timers."""

    @staticmethod
    def timer(session: SyncCarrier) -> Scheduler:
        return session.call_later

    @staticmethod
    def spawn(session: SyncCarrier, operation: Operation[None]) -> None:
        session.in_background(functools.partial(driver.run, operation, session))


class Lock(LockCore[Lease]):
    """A distributed lock on one ZooKeeper path; one kind per object.

    Made by ``Client.lock`` (fair or one-node exclusive), ``Client.read_write_lock``
    (``.read`` / ``.write``) and ``Client.semaphore``; all share this interface.
    ``with lock as lease:`` acquires and releases; leaving the block normally after the
    lease was lost raises ``LockLost``.
    """

    _current_owner = staticmethod(threading.get_ident)

    def __init__(self, client: Host[Lease], config: LockConfig) -> None:
        super().__init__(config, client, _Threads())

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
        thread = threading.current_thread()
        operation = operations.acquire(self, thread.ident, thread.name, timeout, blocking)
        lease: Lease | None = driver.run(operation)
        return lease

    def release(self) -> None:
        """Release the calling thread's hold (``NotHeld`` if it holds none).

        After the lease was lost this still deletes our node if it is there, and does not
        raise: the caller learns of the loss from the lease (or from leaving ``with``).
        ``lease.release()`` releases a given lease from any thread.
        """
        driver.run(operations.release(self, threading.get_ident()))

    def _release_lease(self, lease: Lease, if_held: bool) -> None:
        """``lease.release()``: one release of whichever thread holds ``lease``."""
        driver.run(operations.release_lease(self, lease, if_held))

    def _adopt(self, lease: Lease) -> None:
        lease._releaser = self._release_lease

    def contenders(self) -> list[Contender]:
        """Every contender under the path: holders first, then waiters in line order.

        ``ClientClosed`` if the client is not started or was stopped; ``LockError`` if
        ZooKeeper refused the listing.
        """
        result: list[Contender] = driver.run(operations.contenders(self))
        return result

    def wait_for_change(self, timeout: float | None = None) -> bool:
        """Block until a contender joins or leaves (True) or ``timeout`` passes (False).

        Driven by a ZooKeeper child watch on the lock path, not by polling: tools such
        as ``zklocks status --watch`` redraw on it. ``ClientClosed`` if the client is not
        started or was stopped; ``InvalidArgument`` for a bad ``timeout``.
        """
        operation = operations.wait_for_change(self, _validate.timeout(timeout))
        changed: bool = driver.run(operation)
        return changed

    def hold(self, timeout: float | None = None) -> Hold:
        """``with lock.hold(timeout) as lease:``, for work that cannot be fenced: as
        ``with lock``, and the body is interrupted at the instant the lease is lost.

        ``LockLost`` is raised in the thread that entered the block, between two
        bytecodes (a blocking C call, such as ``time.sleep`` or a socket read, sees it
        only when it returns), and leaves the block as ``LockLost`` saying why. It never
        reaches the thread after the block has exited. The body's own ``finally`` and
        ``except`` are interrupted like any other code: keep cleanup that must run
        outside the block. A release by the holder, or an exception leaving the block,
        interrupts nothing. Elections' terms too (``client.election(path).hold()``).
        """
        return Hold(
            self.path,
            functools.partial(self.acquire, timeout),
            functools.partial(operations.let_go, self),
        )

    def __enter__(self) -> Lease:
        lease = self.acquire()
        _current.entered(lease)  # zklocks.current_lease() inside the block
        return lease

    def __exit__(self, *exc_info: object) -> None:
        _current.left()
        driver.run(operations.leave(self, threading.get_ident(), exc_info[1] is not None))


class ReadWriteLock(PairCore[Lock]):
    """Shared reads, exclusive writes, one queue: ``.read`` and ``.write`` are locks.

    A reader waits only for the nearest earlier writer; a writer for its immediate
    predecessor; a reader queued behind a waiting writer waits (writers never starve).
    """

    def contenders(self) -> list[Contender]:
        """Readers and writers in one queue: holders first, then waiters in line order."""
        return self.read.contenders()
