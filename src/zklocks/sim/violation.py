"""The one error a simulated schedule fails with, below every module that raises it."""

from __future__ import annotations


class Violation(AssertionError):
    """An invariant does not hold; the message says which and where."""


__all__ = ["Violation"]
