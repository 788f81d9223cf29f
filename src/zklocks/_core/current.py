"""Which lease a thread or task is inside: the ``with`` blocks it entered, innermost last.

A function run under ``zklocks.exclusive``, or called deep inside ``with lock:``, needs
its lease's token for a fenced write but was never handed the lease. A ``ContextVar``
answers "which lease is this code under" without passing it down: each thread has its
own context, and each asyncio task its own copy (a task started inside a block starts
with the block's leases, as it inherits any context variable). ``zklocks.current_lease``
reads it; the locks' and leases' ``with`` blocks push on entry and pop on the way out.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["entered", "innermost", "inside", "left"]

_inside: ContextVar[tuple[object, ...]] = ContextVar("zklocks_leases", default=())


def entered(lease: object) -> None:
    """A ``with`` block of ``lease`` began in this context."""
    _inside.set((*_inside.get(), lease))


def left() -> None:
    """The innermost ``with`` block of this context ended (blocks nest, so it is the
    last one entered)."""
    inside = _inside.get()
    if inside:
        _inside.set(inside[:-1])


def innermost() -> object | None:
    """The lease of the innermost block, or None outside every block."""
    inside = _inside.get()
    return inside[-1] if inside else None


def inside() -> tuple[object, ...]:
    """The leases of every block this context is in, outermost first."""
    return _inside.get()
