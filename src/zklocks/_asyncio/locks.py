"""The asyncio lock classes: the sync ones' interface with ``await``; each task contends.

``held``, ``lease`` and ``release()`` answer for the *current task*, as the sync
classes answer for the calling thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Literal, Protocol, overload

from zklocks._asyncio import driver
from zklocks._asyncio.session import AsyncSession
from zklocks._core import events as _events
from zklocks._core import flow as _flow
from zklocks._core import revoke as _revoke
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender, list_contenders
from zklocks._core.errors import LockError, LockLost
from zklocks._core.lease import AsyncLease
from zklocks._core.steps import await_children_change
from zklocks._frontend.holdings import LockConfig, LockCore

log = logging.getLogger("zklocks.lock")


def _loop_timer(delay: float, fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` after ``delay`` seconds on the running loop; returns its canceller."""
    return asyncio.get_running_loop().call_later(delay, fn).cancel


def _current_task() -> asyncio.Task[object]:
    task = asyncio.current_task()
    if task is None:
        raise LockError("zklocks' asyncio locks must be used from inside a task")
    return task


class LockHost(Protocol):
    """What a lock needs of the client that made it (the client satisfies it).

    Named here, not imported, so the client may import its lock classes and not the
    other way round.
    """

    def _session_or_raise(self) -> AsyncSession: ...

    def _session_or_none(self) -> AsyncSession | None: ...

    def _watch_lease(self, acquired: _flow.Acquired) -> AsyncLease: ...


class AsyncLock(LockCore[AsyncLease]):
    """A distributed lock for asyncio; one kind per object, shareable between tasks."""

    _current_owner = staticmethod(asyncio.current_task)

    def __init__(self, client: LockHost, config: LockConfig) -> None:
        super().__init__(config)
        self._client = client

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
        owner = _current_task()
        again = self._holdings.reenter(owner)
        if again is not None:
            return again
        self._refuse_if_sibling_held(owner)
        stale = self._holdings.take_stale(owner)
        if stale is not None:
            await self._give_up(stale)
        session = self._client._session_or_raise()
        # the probe's clock starts first: a timed-out wait then measures >= its timeout
        probe = _events.AcquireProbe(self.kind, self.path)
        deadline = None if timeout is None else time.monotonic() + timeout
        spec = self._config.spec(owner.get_name(), deadline, blocking)
        acquired = await driver.run(probe.watch(_flow.acquire(spec)), session)
        if acquired is None:
            return None
        lease = self._client._watch_lease(acquired)
        lease._label(probe.kind, probe.path)
        lease._releaser = self._release_lease
        self._holdings.add(owner, lease)
        self._equip(
            lease,
            _loop_timer,
            lambda: self._take_back(lease, session),
            lambda: self._look_at(lease, session),
        )
        return lease

    @staticmethod
    def _look_at(lease: AsyncLease, session: AsyncSession) -> None:
        """As ``Lock._look_at``, in a task apart."""

        async def look() -> None:
            lease._data_seen(await driver.run(_revoke.read_data(lease.node), session))

        session.in_background(look())

    def _take_back(self, lease: AsyncLease, session: AsyncSession) -> None:
        """As ``Lock._take_back``: a task apart deletes the node, by name and token."""

        async def delete() -> None:
            try:
                await driver.run(_flow.release(lease.node, lease.token), session)
            except LockError as error:
                log.warning(
                    "%s: could not delete %s after max_hold: %s", self.path, lease.node, error
                )

        session.in_background(delete())

    async def release(self) -> None:
        """Release the current task's hold (``NotHeld`` if it holds none).

        After the lease was lost this still deletes our node if it is there, and does not
        raise. ``await lease.release()`` releases a given lease from any task.
        """
        lease = self._holdings.leave(_current_task())
        if lease is not None:
            await self._give_up(lease)

    async def _release_lease(self, lease: AsyncLease, if_held: bool) -> None:
        """``await lease.release()``: one release of whichever task holds ``lease``."""
        last = self._holdings.leave_lease(lease, if_held=if_held)
        if last is not None:
            await self._give_up(last)

    async def _give_up(self, lease: AsyncLease) -> None:
        # once lost (our node deleted by someone, say), whoever holds ``lock`` now may
        # not be us: the one-node release then reads the node before deleting it
        owner = 0 if lease.lost else lease.owner
        lease._end()
        session = self._client._session_or_none()
        if session is not None:
            await driver.run(_flow.release(lease.node, lease.token, owner), session)

    async def contenders(self) -> list[Contender]:
        """Every contender under the path: holders first, then waiters in line order."""
        result: list[Contender] = await driver.run(
            list_contenders(self.path), self._client._session_or_raise()
        )
        return result

    async def wait_for_change(self, timeout: float | None = None) -> bool:
        """Wait until a contender joins or leaves (True) or ``timeout`` passes (False)."""
        session = self._client._session_or_raise()
        timeout = _validate.timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        changed: bool = await driver.run(await_children_change(self.path, deadline), session)
        return changed

    async def __aenter__(self) -> AsyncLease:
        return await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        lease = self.lease
        await self.release()
        if exc is None and lease is not None and lease.lost:
            raise LockLost(f"{self.path}: the lease was lost while held ({lease.lost_reason})")


class AsyncReadWriteLock:
    """Shared reads, exclusive writes, one queue: ``.read`` and ``.write`` are locks."""

    def __init__(self, read: AsyncLock, write: AsyncLock) -> None:
        self.read = read
        self.write = write
        read._sibling = write
        write._sibling = read

    @property
    def path(self) -> str:
        return self.read.path

    async def contenders(self) -> list[Contender]:
        return await self.read.contenders()

    def __repr__(self) -> str:
        return f"<AsyncReadWriteLock {self.path}>"
