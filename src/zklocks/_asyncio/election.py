"""``AsyncElection`` and ``AsyncMultiLock``: the sync classes' interface with ``await``.

Each task that campaigns is a candidate; ``observe()`` is an async iterator. A cancel
while campaigning or taking a multi-lock deletes what was made, then propagates.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from zklocks._asyncio import driver
from zklocks._asyncio.locks import AsyncLock, _current_task
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender
from zklocks._core.lease import AsyncLease
from zklocks._errors import NotHeld
from zklocks._frontend import operations
from zklocks._frontend.multi import MultiLockCore
from zklocks._frontend.operations import Ended


class AsyncElection(AsyncLock):
    """A leader election for asyncio; each task that campaigns is a candidate."""

    async def campaign(self, timeout: float | None = None) -> AsyncLease:
        """Wait until this task leads (``LockTimeout`` after ``timeout``) and return the
        term's lease."""
        return await self.acquire(timeout)

    async def resign(self) -> None:
        """Step down at once: the next candidate leads (``NotHeld`` when not leading)."""
        try:
            await self.release()
        except NotHeld:
            raise NotHeld(f"{self.path}: this task does not lead this election") from None

    @property
    def is_leader(self) -> bool:
        """Does the current task lead (and its term is not lost)?"""
        return self.held

    async def leader(self) -> Contender | None:
        """Who leads now, as any client sees it (None: nobody)."""
        leader: Contender | None = await driver.run(operations.leader(self))
        return leader

    async def observe(self, timeout: float | None = None) -> AsyncIterator[Contender | None]:
        """The current leader first (None: nobody leads), then each change as it happens.

        One watch at a time, never polling; ends when the client stops or ``timeout``
        seconds pass without a change.
        """
        seen = operations.Observation(self.path, _validate.timeout(timeout))
        while True:
            leader = await driver.run(operations.observe_step(self, seen))
            if isinstance(leader, Ended):
                return
            yield leader


class AsyncMultiLock(MultiLockCore[AsyncLock, AsyncLease]):
    """Several asyncio locks held as one: all or nothing, one global order, one deadline."""

    def __init__(self, locks: Iterable[AsyncLock]) -> None:
        super().__init__(locks, AsyncLock)

    async def acquire(self, timeout: float | None = None) -> list[AsyncLease]:
        """Take every lock in the global order before ``timeout``; on any way out
        (``LockTimeout``, error, cancel) release what was taken, then raise."""
        task = _current_task()
        timeout = _validate.timeout(timeout)
        operation = operations.acquire_all(self, task, task.get_name(), timeout)
        leases: list[AsyncLease] = await driver.run(operation)
        return leases

    async def release(self) -> None:
        """Release every part the current task holds (``NotHeld`` if it holds none)."""
        await driver.run(operations.release_held(self, _current_task()))

    async def __aenter__(self) -> list[AsyncLease]:
        return await self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        await driver.run(operations.leave_all(self, _current_task(), exc_info[1] is not None))
