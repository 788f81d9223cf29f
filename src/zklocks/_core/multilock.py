"""Several locks taken as one, without deadlock: what both front ends share (no I/O).

Theory of operation
-------------------
Two callers that take {A, B} and {B, A} one by one in the order they were given can
each hold one and wait for ever for the other. A multi-lock takes its locks in **one
global order** (by path, then kind) whatever order they were given, so every caller
that wants A and B asks for A first: no cycle of waiters can form. Nested lock paths
are fine too (``/a`` sorts before ``/a/b``): the order is total.

* **One deadline** across all the locks: each acquire gets what remains of it.
* **All or nothing.** On a timeout, an error, Ctrl-C or a task cancel, the locks taken so
  far are released (in reverse order) before the exception goes on: no node is left.
* **One fate.** The leases are handed back in the order the locks were *given*. When any
  one of them is lost, every other is marked lost too ("multi-lock part lost"): the
  caller protects one resource with several locks, and holding part of them protects
  nothing.

Two locks on one path are refused at once: the read and write side of one lock, or a
lock and a semaphore, would wait on each other or disagree about the path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from zklocks._core.lease import LeaseBase
from zklocks._errors import InvalidArgument


class Part(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def kind(self) -> str: ...


P = TypeVar("P", bound=Part)


def check_parts(locks: Iterable[object], lock_type: type[P]) -> tuple[P, ...]:
    """The locks as given, checked: at least one, all of ``lock_type``, one per path."""
    if isinstance(locks, str | bytes) or not isinstance(locks, Iterable):
        raise InvalidArgument(f"multi_lock needs a list of locks, not {locks!r}")
    parts = tuple(locks)
    if not parts:
        raise InvalidArgument("multi_lock needs at least one lock")
    seen: dict[str, P] = {}
    checked: list[P] = []
    for lock in parts:
        if not isinstance(lock, lock_type):
            raise InvalidArgument(
                f"multi_lock takes {lock_type.__name__} objects, not {type(lock).__name__}"
            )
        if lock.path in seen:
            raise InvalidArgument(
                f"multi_lock got two locks on {lock.path} ({seen[lock.path].kind} and "
                f"{lock.kind}); one lock per path (they would wait on each other)"
            )
        seen[lock.path] = lock
        checked.append(lock)
    return tuple(checked)


def global_order(parts: Sequence[P]) -> list[int]:
    """Indices of ``parts`` in the order every caller takes them: by path, then kind."""
    return sorted(range(len(parts)), key=lambda i: (parts[i].path, parts[i].kind))


def share_fate(leases: Sequence[LeaseBase]) -> None:
    """When one lease is lost, mark every other lost too (callbacks run once each)."""

    def on_lost(lost: LeaseBase) -> None:
        reason = f"{lost.node}, another lock of the same multi-lock, was lost: {lost.lost_reason}"
        for other in leases:
            if other is not lost:
                other._mark_lost(reason, "multi_part")

    for lease in leases:
        lease.add_lost_callback(on_lost)
