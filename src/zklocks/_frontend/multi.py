"""What a multi-lock is in either front end, apart from how it waits: its parts in the
order given and in the global order, and what the calling owner holds of them. Taking
and releasing them is ``operations.acquire_all`` / ``operations.release_held``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from zklocks._core import multilock as _multilock
from zklocks._core.lease import LeaseBase
from zklocks._errors import LockLost
from zklocks._frontend.holdings import LockCore

PartT = TypeVar("PartT", bound=LockCore[Any])
L = TypeVar("L", bound=LeaseBase)


class MultiLockCore(Generic[PartT, L]):
    """Several locks held as one: all or nothing, in one global order, one deadline."""

    def __init__(self, locks: Iterable[PartT], part_type: type[PartT]) -> None:
        self._parts: tuple[PartT, ...] = _multilock.check_parts(locks, part_type)
        self._order = _multilock.global_order(self._parts)

    def __repr__(self) -> str:
        parts = ", ".join(f"{p.kind} {p.path}" for p in self._parts)
        return f"<{type(self).__name__} {parts}>"

    @property
    def locks(self) -> tuple[PartT, ...]:
        """The locks, in the order given."""
        return self._parts

    @property
    def held(self) -> bool:
        """Does the calling thread (or task) hold every part, with no lease lost?"""
        return all(part.held for part in self._parts)

    @property
    def leases(self) -> list[L] | None:
        """The calling thread's (or task's) leases in the order given, or None if it
        holds none."""
        leases = [part.lease for part in self._parts]
        if any(lease is None for lease in leases):
            return None
        return [lease for lease in leases if lease is not None]

    def _lost_on_exit(self, leases: list[L], failed: bool) -> None:
        """Leaving ``with`` normally after a part's lease was lost raises ``LockLost``."""
        lost = [lease for lease in leases if lease.lost]
        if not failed and lost:
            raise LockLost(f"{self!r}: a lease was lost while held ({lost[0].lost_reason})")
