"""How ``zklocks demo`` draws: live in a terminal, plain lines anywhere else.

Both screens get the same calls with the same words, so what CI logs is what a person
watches, minus the redrawing: the live screen keeps the lock's queue (who holds, whom
each waiter watches, wake-up counts) in a region that redraws on every change and
prints the story's events above it; the plain screen prints the queue as one line
whenever it changes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Row:
    """One contender of the scenario's lock, as the demo shows it."""

    place: int
    name: str
    kind: str
    holding: bool
    token: int
    watches: tuple[str, ...]
    wakeups: int


class Screen(Protocol):
    def intro(self, lines: Sequence[str]) -> None: ...
    def begin(self, number: int, total: int, title: str, story: Sequence[str]) -> None: ...
    def say(self, text: str) -> None: ...
    def queue(self, rows: Sequence[Row]) -> None: ...
    def status(self, text: str) -> None: ...
    def end(self, ok: bool, title: str, lines: Sequence[str]) -> None: ...
    def summary(self, lines: Sequence[tuple[bool, str, Sequence[str]]], footer: str) -> None: ...
    def close(self) -> None: ...


def queue_line(rows: Sequence[Row]) -> str:
    """``w1 holds (token 12) | w2 waits for w1 | ...``"""
    if not rows:
        return "queue: empty"
    parts = []
    for row in rows:
        if row.holding:
            parts.append(f"{row.name} holds (token {row.token})")
        elif row.watches:
            parts.append(f"{row.name} watches {', '.join(row.watches)}")
        else:
            parts.append(f"{row.name} waits")
    return "queue: " + " | ".join(parts)


def summary_lines(lines: Sequence[tuple[bool, str, Sequence[str]]], footer: str) -> list[str]:
    out = ["", "Summary"]
    for ok, title, details in lines:
        out.append(f"  {'ok    ' if ok else 'FAILED'} {title}")
        out.extend(f"           {detail}" for detail in details)
    out.append(footer)
    return out


class PlainScreen:
    """Plain lines, flushed as they happen (CI logs, pipes, files)."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._last_queue = ""

    def _print(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def intro(self, lines: Sequence[str]) -> None:
        for line in lines:
            self._print(line)

    def begin(self, number: int, total: int, title: str, story: Sequence[str]) -> None:
        self._started = time.monotonic()
        self._last_queue = ""
        self._print("")
        self._print(f"== {number}/{total} {title}")
        for line in story:
            self._print(f"   {line}")

    def say(self, text: str) -> None:
        self._print(f"{time.monotonic() - self._started:6.2f}s  {text}")

    def queue(self, rows: Sequence[Row]) -> None:
        line = queue_line(rows)
        if line != self._last_queue:
            self._last_queue = line
            self._print(f"{'':8}{line}")

    def status(self, text: str) -> None:
        pass  # a ticking status line only makes sense where it can be redrawn

    def end(self, ok: bool, title: str, lines: Sequence[str]) -> None:
        self._print(f"{'ok' if ok else 'FAILED'}: {title}")
        for line in lines:
            self._print(f"    {line}")

    def summary(self, lines: Sequence[tuple[bool, str, Sequence[str]]], footer: str) -> None:
        for line in summary_lines(lines, footer):
            self._print(line)

    def close(self) -> None:
        pass


class LiveScreen:
    """A redrawing region with the lock's queue; the story scrolls above it."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._started = time.monotonic()
        self._rows: Sequence[Row] = ()
        self._status = ""
        self._title = ""
        self._live = Live(
            console=console, auto_refresh=False, transient=True, redirect_stdout=False
        )
        self._live.start()

    def _redraw(self) -> None:
        self._live.update(self._render(), refresh=True)

    def _render(self) -> Group:
        table = Table(
            title=Text(f"{self._title}: the lock's queue now", style="bold"),
            title_justify="left",
            header_style="bold",
            expand=False,
        )
        for column, justify in (
            ("#", "right"),
            ("worker", "left"),
            ("kind", "left"),
            ("state", "left"),
            ("token", "right"),
            ("watches", "left"),
            ("wake-ups", "right"),
        ):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for row in self._rows:
            table.add_row(
                str(row.place),
                Text(row.name, style="bold"),
                row.kind,
                Text("holding", style="green") if row.holding else Text("waiting", "yellow"),
                Text(str(row.token), style="cyan" if row.holding else "dim"),
                " ".join(f"→ {name}" for name in row.watches),
                str(row.wakeups),
            )
        if not self._rows:
            table.add_row("", Text("(empty)", style="dim"), "", "", "", "", "")
        return Group(table, Text(self._status, style="italic dim"))

    def intro(self, lines: Sequence[str]) -> None:
        for line in lines:
            self._live.console.print(Text(line))

    def begin(self, number: int, total: int, title: str, story: Sequence[str]) -> None:
        self._started = time.monotonic()
        self._title = title
        self._rows = ()
        self._status = ""
        self._live.console.print()
        self._live.console.rule(Text(f"{number}/{total}  {title}", style="bold magenta"))
        for line in story:
            self._live.console.print(Text(line, style="dim"))
        self._redraw()

    def say(self, text: str) -> None:
        elapsed = time.monotonic() - self._started
        self._live.console.print(Text.assemble((f"{elapsed:6.2f}s  ", "dim"), text))
        self._redraw()

    def queue(self, rows: Sequence[Row]) -> None:
        self._rows = list(rows)
        self._redraw()

    def status(self, text: str) -> None:
        self._status = text
        self._redraw()

    def end(self, ok: bool, title: str, lines: Sequence[str]) -> None:
        self._status = ""
        self._live.console.print(self._render().renderables[0])  # the queue as it ended
        mark = Text("ok: ", style="bold green") if ok else Text("FAILED: ", style="bold red")
        self._live.console.print(Text.assemble(mark, (title, "bold")))
        for line in lines:
            self._live.console.print(Text(f"    {line}"))
        self._rows = ()
        self._title = ""
        self._live.update(Text(""), refresh=True)

    def summary(self, lines: Sequence[tuple[bool, str, Sequence[str]]], footer: str) -> None:
        self._live.stop()
        for line in summary_lines(lines, footer):
            style = "bold red" if "FAILED" in line else "bold green" if "ok   " in line else ""
            self._console.print(Text(line, style=style))

    def close(self) -> None:
        self._live.stop()
