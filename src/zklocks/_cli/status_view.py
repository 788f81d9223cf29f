"""What ``zklocks status`` shows: a lock's queue read once, as JSON-ready data and as a table.

Shared by ``status`` (one look) and ``status --watch`` (redrawn on every change).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import click
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from zklocks import Client
from zklocks._cli.common import (
    Place,
    age,
    line_up,
    perm_letters,
    seconds,
    short_name,
    show_id,
    words_for,
)
from zklocks._cli.sanitise import clean, text

REDRAW_INTERVAL = 1.0  # durations tick on screen; ZooKeeper is not asked again


def json_time(moment: dt.datetime) -> str:
    """A moment as every ``--json`` document writes it: UTC, to the millisecond.

    One format across commands, so a script can compare ``status``'s ``joined`` with
    ``leader``'s ``candidate_since`` as text; ZooKeeper's node times have milliseconds.
    """
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds")


def snapshot(client: Client, path: str) -> dict[str, Any]:
    """The state of one lock as a JSON-ready dict (the ``--json`` document)."""
    contenders = client.contenders(path)
    acl = client.get_acl(path)
    now = dt.datetime.now(tz=dt.UTC)
    entries = [_entry(place, now) for place in line_up(contenders)]
    holders = [e for e in entries if e["holder"]]
    return {
        "path": path,
        "token": max((e["token"] for e in holders), default=None),
        "holders": holders,
        "waiters": [e for e in entries if not e["holder"]],
        "at": json_time(now),
        # who may do what in the lock directory (a digest's password hash is left out)
        "acl": None
        if acl is None
        else [{"id": show_id(e.scheme, e.id), "perms": perm_letters(e.perms)} for e in acl],
    }


def _entry(place: Place, now: dt.datetime) -> dict[str, Any]:
    c = place.contender
    return {
        "position": place.place,
        "holder": c.holder,
        "node": c.node,
        "kind": words_for(c.kind),
        "layout": c.layout,
        "sequence": c.sequence,
        "identifier": c.identifier,
        "host": c.host,
        "pid": c.pid,
        "token": c.token,
        "joined": json_time(c.created),
        "age_s": round(age(c.created, now), 3),
        "held_s": None,  # known only when --watch saw the grant
        "waits_for": list(place.waits_for),
        "refused": place.refused,
        "ephemeral": c.ephemeral,
    }


def note_grants(
    state: dict[str, Any], seen_waiting: set[str], granted_at: dict[str, float], now: float
) -> None:
    """Remember when a node we saw waiting became a holder: its held time is then known
    (``held_s``), where a node's age counts its wait too. ``now`` on any one clock;
    ``status --watch`` and ``serve`` both time grants this way, from the watch that
    woke them."""
    for entry in state["waiters"]:
        seen_waiting.add(entry["node"])
    present = {e["node"] for e in state["holders"]} | {e["node"] for e in state["waiters"]}
    for entry in state["holders"]:
        node = entry["node"]
        if node in seen_waiting and node not in granted_at:
            granted_at[node] = now
        if node in granted_at:
            entry["held_s"] = round(now - granted_at[node], 3)
    for node in list(granted_at):
        if node not in present:
            del granted_at[node]
    seen_waiting.intersection_update(present)


# -- drawing ------------------------------------------------------------------------


def _kind(entry: dict[str, Any]) -> str:
    """The kind, and whose queue it stands in when that is not ours: "write (kazoo)"."""
    layout = entry.get("layout", "zklocks")
    return entry["kind"] if layout == "zklocks" else f"{entry['kind']} ({layout})"


def render(state: dict[str, Any], *, observed_at: float | None = None) -> RenderableType:
    """The table ``zklocks status`` prints, durations advanced to now."""
    drift = 0.0 if observed_at is None else max(0.0, time.monotonic() - observed_at)
    holders, waiters = state["holders"], state["waiters"]
    positions = {e["node"]: e["position"] for e in holders + waiters}
    token = state["token"]
    title = Text.assemble(
        (clean(state["path"], limit=None), "bold"),
        f"  {len(holders)} holding, {len(waiters)} waiting",
        ("  fencing token " + (str(token) if token is not None else "-"), "cyan"),
    )
    if not holders and not waiters:
        return Group(
            title, Text("nobody holds or waits for this lock", style="dim"), *_acl_line(state)
        )
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (
        ("#", "right"),
        ("state", "left"),
        ("kind", "left"),
        ("identifier", "left"),
        ("host", "left"),
        ("pid", "right"),
        ("for", "right"),
        ("token", "right"),
        ("watches", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    leftovers = False  # a contender node no session owns: it never goes away by itself
    for entry in holders + waiters:
        if entry["holder"]:
            state_text = Text("holding", style="green")
            if entry["held_s"] is not None:
                duration = seconds(entry["held_s"] + drift)
            else:
                duration = "≤" + seconds(entry["age_s"] + drift)
        else:
            state_text = Text("refused" if entry["refused"] else "waiting", style="yellow")
            duration = seconds(entry["age_s"] + drift)
        if not entry.get("ephemeral", True):
            state_text.append("*", style="red")
            leftovers = True
        watches = ", ".join(
            f"#{positions[n]}" if n in positions else short_name(n) for n in entry["waits_for"]
        )
        table.add_row(
            str(entry["position"]),
            state_text,
            text(_kind(entry)),
            text(entry["identifier"]),
            text(entry["host"]),
            str(entry["pid"] or ""),
            duration,
            str(entry["token"]),
            text(watches),
        )
    if leftovers:
        note = "* not ephemeral: no session owns it (a leftover or a forgery), so it stays"
        return Group(title, table, Text(note, style="red"), *_acl_line(state))
    return Group(title, table, *_acl_line(state))


def _acl_line(state: dict[str, Any]) -> list[Text]:
    """Who may do what in the lock directory (docs/security.md), as the last line."""
    acl = state.get("acl")
    if acl is None:
        return []
    shown = ", ".join(f"{e['id']}={e['perms']}" for e in acl)  # ids are foreign text
    return [text(f"ACL of the lock directory: {shown}", style="dim", limit=None)]


def new_console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def print_clean(console: Console, renderable: RenderableType) -> None:
    """Print; to a file or pipe without the padding rich leaves at the ends of lines."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    lines = captured.get().splitlines()
    click.echo("\n".join(line.rstrip() for line in lines))
