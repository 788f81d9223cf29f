"""``lock.hold()`` for asyncio: the task that entered the block is cancelled at the instant
its lease is lost, and the block raises ``LockLost`` (chained from the cancellation).

The lease's lost-callback runs on the event loop, so it cancels the task directly. A
cancellation from elsewhere still leaves the block as ``CancelledError``: the task counts
its cancel requests (``Task.cancelling()``), and the block takes back only its own
(``Task.uncancel()``), as ``asyncio.timeout`` does. The body's own ``finally`` and
``except`` run, as for any cancellation. A cancel requested while the body was not
awaiting is delivered at its next ``await``; a body that ends before that await is
followed, in the exit, by one ``await`` that takes the cancellation, so it never
reaches the code after the block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from zklocks._core import current as _current
from zklocks._core.lease import AsyncLease, LeaseBase
from zklocks._errors import LockLost

__all__ = ["AsyncHold"]


class AsyncHold:
    """The async context manager ``AsyncLock.hold()`` returns; gives the ``AsyncLease``.

    ``acquire`` grants the lease on entry (``exclusive`` hands one it already took).
    A lost lease is let go (``let_go``) rather than released: its delete may wait for a
    connection, and the point of the block is to end at the loss."""

    def __init__(
        self,
        path: str,
        acquire: Callable[[], Awaitable[AsyncLease]],
        let_go: Callable[[AsyncLease], None],
    ) -> None:
        self._path = path
        self._acquire = acquire
        self._let_go = let_go  # releases a lost lease without waiting for a connection
        self._lease: AsyncLease | None = None
        self._task: asyncio.Task[object] | None = None
        self._inside = False  # entered and not left: a loss cancels the task
        self._cancelled = False  # we asked the task to cancel
        self._lost_in_task = False  # lost, told in the task itself (in __aenter__, or a look)

    async def __aenter__(self) -> AsyncLease:
        lease = await self._acquire()
        _current.entered(lease)  # zklocks.current_lease() inside the block
        self._lease = lease
        self._task = asyncio.current_task()
        self._inside = True
        lease.add_lost_callback(self._lost)  # at once, in this task, if lost already
        if self._lost_in_task:
            self._inside = False
            _current.left()
            self._let_go(lease)
            lease._lost_on_exit(None)  # raises LockLost: lost as it is
        return lease

    def _lost(self, lease: LeaseBase) -> None:
        """The lease's lost-callback (on the loop): cancel the body, if it still runs."""
        if not self._inside or self._task is None:
            return
        if asyncio.current_task() is self._task:
            # told in the task itself: in __aenter__ (raised there), or by the body's
            # own look at the lease (``lost``, ``check()``), which it then sees
            self._lost_in_task = True
            return
        self._cancelled = True
        self._task.cancel("the lease was lost")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: object,
    ) -> None:
        self._inside = False
        lease, task = self._lease, self._task
        assert lease is not None and task is not None
        ours = False
        taken: asyncio.CancelledError | None = None
        if self._cancelled:
            if exc is None:  # asked while the body did not await: take it now
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError as cancel:
                    taken = cancel
            # ours alone (no other cancel pending): the block ends as LockLost
            others = task.uncancel()
            ours = others == 0 and (exc is None or isinstance(exc, asyncio.CancelledError))
        if not lease.lost:
            await lease.__aexit__(exc_type, exc, None)  # release (lost meanwhile: LockLost)
            return
        _current.left()
        self._let_go(lease)
        if not ours:
            if taken is not None:
                raise taken  # another cancel came with ours: it must go on
            lease._lost_on_exit(exc)  # leaving normally: LockLost, as `async with`
            return
        cause = exc or taken or asyncio.CancelledError("the lease was lost")
        raise LockLost(
            f"{self._path}: the lease was lost while held ({lease.lost_reason}); "
            "the block was cancelled"
        ) from cause
