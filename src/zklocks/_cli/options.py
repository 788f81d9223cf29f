"""Option types that check a value before anything runs: a bad value is a usage error
(exit 2) naming the option and the rule it broke, never a traceback or a library error.
"""

from __future__ import annotations

import math
from typing import Any

import click


class Seconds(click.ParamType):  # type: ignore[type-arg]
    """A duration in seconds: a finite number at least ``minimum``; ``inf`` only where
    it means "no limit" (``allow_inf``). ``nan`` is never a duration."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0, *, allow_inf: bool = False) -> None:
        self.minimum = minimum
        self.allow_inf = allow_inf

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if math.isnan(number):
            self.fail("nan is not a number of seconds", param, ctx)
        rule = f"at least {self.minimum:g}"
        if self.allow_inf:
            rule += ", or inf (no limit)"
        if math.isinf(number) and not (self.allow_inf and number > 0):
            rule = rule if self.allow_inf else "finite"
            self.fail(f"{value} seconds: must be {rule}", param, ctx)
        if number < self.minimum:
            self.fail(f"{value} seconds: must be {rule}", param, ctx)
        return number

    def __repr__(self) -> str:
        return f"Seconds(minimum={self.minimum!r}, allow_inf={self.allow_inf!r})"
