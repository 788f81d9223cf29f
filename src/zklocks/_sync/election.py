"""The sync ``Election`` and ``MultiLock``: thin front ends over the one engine.

An election is a lock of kind ``elect`` (see ``zklocks._core.election``): campaigning is
acquiring, resigning is releasing, a term is a ``Lease``. A multi-lock takes its locks
in one global order under one deadline (see ``zklocks._core.multilock``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from types import TracebackType

from zklocks._core import election as _election
from zklocks._core import multilock as _multilock
from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender
from zklocks._core.errors import ClientClosed, LockLost, NotHeld
from zklocks._core.lease import Lease
from zklocks._sync import driver
from zklocks._sync.locks import Lock


class Election(Lock):
    """A leader election at one path; each thread that campaigns is a candidate.

    Made by ``Client.election``. ``with election as term:`` campaigns (blocks until
    leader) and resigns on the way out; ``term`` is a ``Lease`` whose ``token`` grows
    with every new leader. Candidates queue in FIFO order; each watches only the one
    before it, so the death of a leader wakes one candidate, never the herd.
    """

    def campaign(self, timeout: float | None = None) -> Lease:
        """Block until this thread leads (or ``timeout`` passes: ``LockTimeout``, with our
        candidacy withdrawn) and return the term's lease."""
        return self.acquire(timeout)

    def resign(self) -> None:
        """Step down at once: the next candidate leads (``NotHeld`` when not leading)."""
        try:
            self.release()
        except NotHeld:
            raise NotHeld(f"{self.path}: this thread does not lead this election") from None

    @property
    def is_leader(self) -> bool:
        """Does the calling thread lead (and its term is not lost)?"""
        return self.held

    def leader(self) -> Contender | None:
        """Who leads now, as any client sees it (None: nobody)."""
        leader: Contender | None = driver.run(
            _election.read_leader(self.path), self._client._session_or_raise()
        )
        return leader

    def observe(self, timeout: float | None = None) -> Iterator[Contender | None]:
        """The current leader first (None: nobody leads), then each change as it happens.

        Driven by one ZooKeeper watch (on the leader's node; on the path's children
        only while nobody leads), never by polling. Ends when the client stops, or when
        ``timeout`` seconds pass without a change.
        """
        timeout = _validate.timeout(timeout)
        shown: Contender | None = None
        first = True
        while True:
            try:
                leader = self.leader()
            except ClientClosed:
                return
            if first or not _election.same_leader(leader, shown):
                first = False
                shown = leader
                yield leader
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                if not self._await_change(leader, deadline):
                    return
            except ClientClosed:
                return

    def _await_change(self, leader: Contender | None, deadline: float | None) -> bool:
        """Wait for the leader's node to go (or, with no leader, for a candidate)."""
        flow = _election.await_change(self.path, None if leader is None else leader.node, deadline)
        changed: bool = driver.run(flow, self._client._session_or_raise())
        return changed


class MultiLock:
    """Several locks held as one: all or nothing, in one global order, one deadline.

    Made by ``Client.multi_lock``. ``with multi as leases:`` gives the leases in the
    order the locks were given; losing any one marks them all lost.
    """

    def __init__(self, locks: Iterable[Lock]) -> None:
        self._parts: tuple[Lock, ...] = _multilock.check_parts(locks, Lock)
        self._order = _multilock.global_order(self._parts)

    def __repr__(self) -> str:
        return f"<MultiLock {', '.join(f'{p.kind} {p.path}' for p in self._parts)}>"

    @property
    def locks(self) -> tuple[Lock, ...]:
        """The locks, in the order given."""
        return self._parts

    @property
    def held(self) -> bool:
        """Does the calling thread hold every part, with no lease lost?"""
        return all(part.held for part in self._parts)

    @property
    def leases(self) -> list[Lease] | None:
        """The calling thread's leases in the order given, or None if it holds none."""
        leases = [part.lease for part in self._parts]
        if any(lease is None for lease in leases):
            return None
        return [lease for lease in leases if lease is not None]

    def acquire(self, timeout: float | None = None) -> list[Lease]:
        """Take every lock (in the global order) before ``timeout`` runs out.

        Raises ``LockTimeout`` when the time runs out, with every lock taken so far
        released: nothing is left behind, whichever way acquire is left.
        """
        timeout = _validate.timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        taken: list[Lock] = []
        leases: dict[int, Lease] = {}
        try:
            for index in self._order:
                part = self._parts[index]
                leases[index] = part.acquire(_multilock.remaining(deadline, time.monotonic()))
                taken.append(part)
        except BaseException as exc:
            interruption = _release_all(reversed(taken))
            if interruption is not None and not isinstance(interruption, Exception):
                raise interruption from exc  # a Ctrl-C during cleanup is never swallowed
            raise
        result = [leases[index] for index in range(len(self._parts))]
        _multilock.share_fate(result)
        return result

    def release(self) -> None:
        """Release every part this thread holds (``NotHeld`` if it holds none)."""
        held = [self._parts[i] for i in reversed(self._order) if self._parts[i].lease]
        if not held:
            raise NotHeld(f"this thread does not hold {self!r}")
        interruption = _release_all(held)
        if interruption is not None:
            raise interruption

    def __enter__(self) -> list[Lease]:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        leases = self.leases or []
        self.release()
        lost = [lease for lease in leases if lease.lost]
        if exc is None and lost:
            raise LockLost(f"{self!r}: a lease was lost while held ({lost[0].lost_reason})")


def _release_all(parts: Iterable[Lock]) -> BaseException | None:
    """Release each part even if Ctrl-C lands meanwhile; return the first interruption."""
    interruption: BaseException | None = None
    for part in parts:
        try:
            part.release()
        except BaseException as exc:
            interruption = interruption or exc
    return interruption
