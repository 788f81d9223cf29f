"""The asyncio lock classes: the sync ones' interface with ``await``; each task contends.

``held``, ``lease`` and ``release()`` answer for the *current task*, as the sync
classes answer for the calling thread.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Literal, overload

from zklocks._asyncio import driver
from zklocks._asyncio.carrier import AsyncCarrier
from zklocks._asyncio.hold import AsyncHold
from zklocks._core import current as _current
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender
from zklocks._core.lease import AsyncLease, Scheduler
from zklocks._errors import LockError
from zklocks._frontend import operations
from zklocks._frontend.holdings import Host, LockConfig, LockCore, PairCore
from zklocks._frontend.operations import Operation


def _current_task() -> asyncio.Task[object]:
    task = asyncio.current_task()
    if task is None:
        raise LockError("zklocks' asyncio locks must be used from inside a task")
    return task


class _Tasks:
    """The asyncio client's way of running things apart: the running loop and its tasks."""

    @staticmethod
    def timer(session: AsyncCarrier) -> Scheduler:
        def later(delay: float, fn: Callable[[], None]) -> Callable[[], None]:
            return asyncio.get_running_loop().call_later(delay, fn).cancel

        return later

    @staticmethod
    def spawn(session: AsyncCarrier, operation: Operation[None]) -> None:
        session.in_background(driver.run(operation, session))


class AsyncLock(LockCore[AsyncLease]):
    """A distributed lock for asyncio; one kind per object, shareable between tasks."""

    _current_owner = staticmethod(asyncio.current_task)

    def __init__(self, client: Host[AsyncLease], config: LockConfig) -> None:
        super().__init__(config, client, _Tasks())

    @overload
    async def acquire(
        self, timeout: float | None = None, *, blocking: Literal[True] = True
    ) -> AsyncLease: ...

    @overload
    async def acquire(
        self, timeout: None = None, *, blocking: Literal[False]
    ) -> AsyncLease | None: ...

    @overload
    async def acquire(
        self, timeout: float | None = None, *, blocking: bool
    ) -> AsyncLease | None: ...

    async def acquire(
        self, timeout: float | None = None, *, blocking: bool = True
    ) -> AsyncLease | None:
        """Wait until held (or ``timeout`` seconds pass) and return the lease.

        Cancelling the waiting task deletes our node, then ``CancelledError`` propagates.
        Raises ``LockTimeout``, ``AlreadyHeld``, ``InvalidArgument``, ``ClientClosed`` and
        ``LockError`` as ``Lock.acquire`` does; ``LockError`` also outside a task.
        ``blocking=False`` is ``try_acquire()``: the lease, or None without waiting (a
        timeout then makes no sense, as for ``threading.Lock``).
        """
        if not blocking:
            _validate.no_timeout_when_not_blocking(timeout)
            return await self._acquire(None, blocking=False)
        return await self._acquire(_validate.timeout(timeout), blocking=True)

    async def try_acquire(self) -> AsyncLease | None:
        """The lease if the lock can be had without waiting for another holder, else None."""
        return await self._acquire(None, blocking=False)

    async def _acquire(self, timeout: float | None, *, blocking: bool) -> AsyncLease | None:
        task = _current_task()
        operation = operations.acquire(self, task, task.get_name(), timeout, blocking)
        lease: AsyncLease | None = await driver.run(operation)
        return lease

    async def release(self) -> None:
        """Release the current task's hold (``NotHeld`` if it holds none).

        After the lease was lost this still deletes our node if it is there, and does not
        raise. ``await lease.release()`` releases a given lease from any task.
        """
        await driver.run(operations.release(self, _current_task()))

    async def _release_lease(self, lease: AsyncLease, if_held: bool) -> None:
        """``await lease.release()``: one release of whichever task holds ``lease``."""
        await driver.run(operations.release_lease(self, lease, if_held))

    def _adopt(self, lease: AsyncLease) -> None:
        lease._releaser = self._release_lease

    async def contenders(self) -> list[Contender]:
        """Every contender under the path: holders first, then waiters in line order."""
        result: list[Contender] = await driver.run(operations.contenders(self))
        return result

    async def wait_for_change(self, timeout: float | None = None) -> bool:
        """Wait until a contender joins or leaves (True) or ``timeout`` passes (False)."""
        operation = operations.wait_for_change(self, _validate.timeout(timeout))
        changed: bool = await driver.run(operation)
        return changed

    def hold(self, timeout: float | None = None) -> AsyncHold:
        """``async with lock.hold(timeout) as lease:``, for work that cannot be fenced: as
        ``async with lock``, and the task that entered the block is cancelled at the
        instant the lease is lost; the block then raises ``LockLost`` (chained from the
        cancellation). A cancellation from elsewhere still propagates as
        ``CancelledError``. The body's ``finally`` and ``except`` run, as for any
        cancellation. A release by the holder, or an exception leaving the block,
        cancels nothing. Elections' terms too (``client.election(path).hold()``).
        """
        return AsyncHold(
            self.path,
            functools.partial(self.acquire, timeout),
            functools.partial(operations.let_go, self),
        )

    async def __aenter__(self) -> AsyncLease:
        lease = await self.acquire()
        _current.entered(lease)  # zklocks.current_lease() inside the block
        return lease

    async def __aexit__(self, *exc_info: object) -> None:
        _current.left()
        await driver.run(operations.leave(self, _current_task(), exc_info[1] is not None))


class AsyncReadWriteLock(PairCore[AsyncLock]):
    """Shared reads, exclusive writes, one queue: ``.read`` and ``.write`` are locks."""

    async def contenders(self) -> list[Contender]:
        """Readers and writers in one queue: holders first, then waiters in line order."""
        return await self.read.contenders()
