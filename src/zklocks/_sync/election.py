"""The sync ``Election`` and ``MultiLock``: thin front ends over the one engine.

An election is a lock of kind ``elect`` (see ``zklocks._core.election``): campaigning is
acquiring, resigning is releasing, a term is a ``Lease``. A multi-lock takes its locks
in one global order under one deadline (see ``zklocks._core.multilock``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from zklocks._core import validate as _validate
from zklocks._core.contenders import Contender
from zklocks._core.lease import Lease
from zklocks._errors import NotHeld
from zklocks._frontend import operations
from zklocks._frontend.multi import MultiLockCore
from zklocks._frontend.operations import Ended
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
        leader: Contender | None = driver.run(operations.leader(self))
        return leader

    def observe(self, timeout: float | None = None) -> Iterator[Contender | None]:
        """The current leader first (None: nobody leads), then each change as it happens.

        Driven by one ZooKeeper watch (on the leader's node; on the path's children
        only while nobody leads), never by polling. Ends when the client stops, or when
        ``timeout`` seconds pass without a change.
        """
        seen = operations.Observation(self.path, _validate.timeout(timeout))
        while True:
            leader = driver.run(operations.observe_step(self, seen))
            if isinstance(leader, Ended):
                return
            yield leader


class MultiLock(MultiLockCore[Lock, Lease]):
    """Several locks held as one: all or nothing, in one global order, one deadline.

    Made by ``Client.multi_lock``. ``with multi as leases:`` gives the leases in the
    order the locks were given; losing any one marks them all lost.
    """

    def __init__(self, locks: Iterable[Lock]) -> None:
        super().__init__(locks, Lock)

    def acquire(self, timeout: float | None = None) -> list[Lease]:
        """Take every lock (in the global order) before ``timeout`` runs out.

        Raises ``LockTimeout`` when the time runs out, with every lock taken so far
        released: nothing is left behind, whichever way acquire is left.
        """
        driver.warn_if_in_event_loop(stacklevel=3)  # the caller of acquire()
        thread = threading.current_thread()
        timeout = _validate.timeout(timeout)
        operation = operations.acquire_all(self, thread.ident, thread.name, timeout)
        leases: list[Lease] = driver.run(operation)
        return leases

    def release(self) -> None:
        """Release every part this thread holds (``NotHeld`` if it holds none)."""
        driver.run(operations.release_held(self, threading.get_ident()))

    def __enter__(self) -> list[Lease]:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        driver.run(operations.leave_all(self, threading.get_ident(), exc_info[1] is not None))
