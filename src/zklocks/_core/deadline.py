"""A deadline: the one instant a call must be done by, on the clock of the session it runs on.

A caller gives a *timeout* (seconds from now, or None for no limit); everything below
it wants the *instant*: one absolute deadline per call, so that every wait gets what
remains of it instead of the whole timeout again (STYLE.md, "one deadline per call").
``Deadline.after`` makes that instant once; ``remaining`` and ``passed`` answer the two
questions a wait asks of it.

The clock is part of the value. A real session's clock is ``time.monotonic`` (the
asyncio loop's too); the simulator's is virtual and moves only when its scheduler says
so. A deadline made on one clock and read on another would agree only by luck, so the
deadline carries the clock of the session (``SessionFacts.clock``) it was made for.

The flows' operations (``zklocks._core.ops``) carry the bare instant (``at``, a float or
None): a driver compares it with its session's clock, the clock it was made on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from zklocks._core import validate as _validate

__all__ = ["NEVER", "Clock", "Deadline"]

Clock = Callable[[], float]
"""Seconds on a clock that never goes back (``time.monotonic``, or a simulator's)."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """An instant on ``clock`` (``at``), or never (``at`` is None).

    ``Deadline(at, clock)`` wraps an instant made earlier on that clock (an operation's
    ``deadline``); ``Deadline.after(timeout)`` makes a new one from a caller's timeout.
    """

    at: float | None
    clock: Clock = time.monotonic

    @classmethod
    def after(cls, timeout: float | None, *, clock: Clock = time.monotonic) -> Deadline:
        """``timeout`` seconds from now on ``clock``; never when ``timeout`` is None.

        The timeout is checked as a lock's ``acquire`` checks it (``validate.timeout``):
        a negative or NaN timeout raises ``InvalidArgument``, and ``inf`` or anything
        from ``validate.FOREVER`` up means never (no clock sum can overflow on it).
        """
        seconds = _validate.timeout(timeout)
        return cls(None if seconds is None else clock() + seconds, clock)

    @property
    def never(self) -> bool:
        """No limit: ``remaining`` is None and ``passed`` is never true."""
        return self.at is None

    def remaining(self) -> float | None:
        """Seconds left (0.0 once passed, never negative); None when it never comes."""
        if self.at is None:
            return None
        return max(0.0, self.at - self.clock())

    def passed(self) -> bool:
        """Has the instant come? (At the instant itself it has: the time is up.)"""
        return self.at is not None and self.clock() >= self.at


NEVER = Deadline(None)
"""The deadline that never comes (what ``Deadline.after(None)`` gives, on any clock)."""
