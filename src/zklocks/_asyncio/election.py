"""``AsyncElection`` and ``AsyncMultiLock``: the sync classes' interface with ``await``.

Each task that campaigns is a candidate; ``observe()`` is an async iterator. A cancel
while campaigning or taking a multi-lock deletes what was made, then propagates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from types import TracebackType

from zklocks._asyncio import driver
from zklocks._asyncio.locks import AsyncLock
from zklocks._core import election as _election
from zklocks._core import multilock as _multilock
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender
from zklocks._core.errors import ClientClosed, LockLost, NotHeld
from zklocks._core.lease import AsyncLease


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
        session = self._client._session_or_raise()
        leader: Contender | None = await driver.run(_election.read_leader(self.path), session)
        return leader

    async def observe(self, timeout: float | None = None) -> AsyncIterator[Contender | None]:
        """The current leader first (None: nobody leads), then each change as it happens.

        One watch at a time, never polling; ends when the client stops or ``timeout``
        seconds pass without a change.
        """
        timeout = _validate.timeout(timeout)
        shown: Contender | None = None
        first = True
        while True:
            try:
                leader = await self.leader()
            except ClientClosed:
                return
            if first or not _election.same_leader(leader, shown):
                first = False
                shown = leader
                yield leader
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                if not await self._await_change(leader, deadline):
                    return
            except ClientClosed:
                return

    async def _await_change(self, leader: Contender | None, deadline: float | None) -> bool:
        """Wait for the leader's node to go (or, with no leader, for a candidate)."""
        flow = _election.await_change(self.path, None if leader is None else leader.node, deadline)
        changed: bool = await driver.run(flow, self._client._session_or_raise())
        return changed


class AsyncMultiLock:
    """Several asyncio locks held as one: all or nothing, one global order, one deadline."""

    def __init__(self, locks: Iterable[AsyncLock]) -> None:
        self._parts: tuple[AsyncLock, ...] = _multilock.check_parts(locks, AsyncLock)
        self._order = _multilock.global_order(self._parts)

    def __repr__(self) -> str:
        return f"<AsyncMultiLock {', '.join(f'{p.kind} {p.path}' for p in self._parts)}>"

    @property
    def locks(self) -> tuple[AsyncLock, ...]:
        return self._parts

    @property
    def held(self) -> bool:
        """Does the current task hold every part, with no lease lost?"""
        return all(part.held for part in self._parts)

    @property
    def leases(self) -> list[AsyncLease] | None:
        """The current task's leases in the order given, or None if it holds none."""
        leases = [part.lease for part in self._parts]
        if any(lease is None for lease in leases):
            return None
        return [lease for lease in leases if lease is not None]

    async def acquire(self, timeout: float | None = None) -> list[AsyncLease]:
        """Take every lock in the global order before ``timeout``; on any way out
        (``LockTimeout``, error, cancel) release what was taken, then raise."""
        timeout = _validate.timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        taken: list[AsyncLock] = []
        leases: dict[int, AsyncLease] = {}
        try:
            for index in self._order:
                part = self._parts[index]
                wait = _multilock.remaining(deadline, time.monotonic())
                leases[index] = await part.acquire(wait)
                taken.append(part)
        except BaseException as exc:
            interruption = await _release_all(reversed(taken))
            if isinstance(interruption, asyncio.CancelledError) and interruption is not exc:
                raise interruption from exc  # a cancel during cleanup is never swallowed
            raise
        result = [leases[index] for index in range(len(self._parts))]
        _multilock.share_fate(result)
        return result

    async def release(self) -> None:
        """Release every part the current task holds (``NotHeld`` if it holds none)."""
        held = [self._parts[i] for i in reversed(self._order) if self._parts[i].lease]
        if not held:
            raise NotHeld(f"this task does not hold {self!r}")
        interruption = await _release_all(held)
        if interruption is not None:
            raise interruption

    async def __aenter__(self) -> list[AsyncLease]:
        return await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        leases = self.leases or []
        await self.release()
        lost = [lease for lease in leases if lease.lost]
        if exc is None and lost:
            raise LockLost(f"{self!r}: a lease was lost while held ({lost[0].lost_reason})")


async def _release_all(parts: Iterable[AsyncLock]) -> BaseException | None:
    """Release each part even if a cancel lands meanwhile; return the first interruption.

    Each release runs in the current task (it is the owner) and finishes its delete even
    when cancelled (the release flow is shielded), so the loop goes on to the next part.
    """
    interruption: BaseException | None = None
    for part in parts:
        try:
            await part.release()
        except BaseException as exc:
            interruption = interruption or exc
    return interruption
