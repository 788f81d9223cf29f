"""Option types that check a value before anything runs: a bad value is a usage error
(exit 2) naming the option and the rule it broke, never a traceback or a library error.

Every option or argument that takes text declares what it is: ``Text`` (encoded for
ZooKeeper: must be UTF-8), ``Identifier``, ``click.Path`` (a file name: any bytes), a
choice, or ``click.UNPROCESSED`` (a command's arguments: any bytes).
tests/unit/test_cli_options.py keeps that true for every command.
"""

from __future__ import annotations

import math
from typing import Any

import click

from zklocks import InvalidArgument
from zklocks._core import validate
from zklocks._core.shown import as_typed, undecodable

__all__ = ["TEXT", "Identifier", "Seconds", "Text", "as_typed", "undecodable"]


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


class Text(click.ParamType):  # type: ignore[type-arg]
    """Text that zklocks encodes: a lock path, an identifier, hosts, a credential.

    Bytes that are not UTF-8 (``$'caf\\xe9'``, a Latin-1 terminal) are a usage error
    naming the option, not a traceback from deep in an encoder. ``secret``: the value is
    never shown. Arguments that go to the operating system as they are (a command and
    its arguments, ``-c TEXT``, file names) do not use this type: any bytes are fine
    there.
    """

    name = "text"

    def __init__(self, *, secret: bool = False) -> None:
        self.secret = secret

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if undecodable(text):
            shown = "the value (not shown here)" if self.secret else f"'{as_typed(text)}'"
            self.fail(f"{shown} is not UTF-8 text", param, ctx)
        return text

    def __repr__(self) -> str:
        return f"Text(secret={self.secret!r})"


class Identifier(Text):
    """A contender's identifier: UTF-8, then the library's own rule (printable, at most
    1024 characters). Empty means the default."""

    name = "identifier"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = super().convert(value, param, ctx)
        if text:
            try:
                validate.identifier(text)
            except InvalidArgument as error:
                self.fail(str(error), param, ctx)
        return text

    def __repr__(self) -> str:
        return "Identifier()"


TEXT = Text()
