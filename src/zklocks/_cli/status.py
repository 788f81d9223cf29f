"""``zklocks status`` (who holds, who waits, whom each waiter watches) and ``zklocks ls``.

``status --watch`` (in ``status_watch``) redraws on ZooKeeper child watches: arm the watch,
list, draw, wait.
Between changes it only redraws the durations from the clock; it sends no request.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from zklocks import _dialects
from zklocks._cli.common import (
    CONTEXT,
    EX_NOPERM,
    age,
    connect,
    connection_options,
    fail,
    seconds,
)
from zklocks._cli.sanitise import clean, text
from zklocks._cli.security import Security, security_options
from zklocks._contenders import directory_acl, list_contenders
from zklocks._errors import AccessDenied, ClientClosed, LockError
from zklocks._inspect import LockSummary, Place, line_up, walk_locks
from zklocks._security import perm_letters, show_id
from zklocks._sync.client import Client
from zklocks._validate import lock_path

REDRAW_INTERVAL = 1.0  # durations tick on screen; ZooKeeper is not asked again

STATUS_EPILOG = """\b
Examples:
  zklocks status /locks/orders
  zklocks status /locks/orders --watch        # redraws on every change (Ctrl-C to stop)
  zklocks status /locks/orders --json | jq '.waiters | length'
  zklocks status /locks/orders --watch --json # one JSON document per line, per change

\b
"for": how long a waiter has waited; for a holder, how long since it joined the
queue ("≤": ZooKeeper does not record the moment a lock was granted, so this is an
upper bound unless --watch saw the grant happen).
"""

LS_EPILOG = """\b
Examples:
  zklocks ls                 # every lock in the whole tree
  zklocks ls /locks
  zklocks ls /locks --json
"""


# -- data ---------------------------------------------------------------------------


def snapshot(client: Client, path: str) -> dict[str, Any]:
    """The state of one lock as a JSON-ready dict (the ``--json`` document)."""
    contenders = client._run(list_contenders(path))
    acl = client._run(directory_acl(path))
    now = dt.datetime.now(tz=dt.timezone.utc)
    entries = [_entry(place, now) for place in line_up(contenders)]
    holders = [e for e in entries if e["holder"]]
    return {
        "path": path,
        "token": max((e["token"] for e in holders), default=None),
        "holders": holders,
        "waiters": [e for e in entries if not e["holder"]],
        "at": now.isoformat(timespec="milliseconds"),
        # who may do what in the lock directory (a digest's password hash is left out)
        "acl": None if acl is None else [
            {"id": show_id(e.id.scheme, e.id.id), "perms": perm_letters(e.perms)} for e in acl
        ],
    }


def _entry(place: Place, now: dt.datetime) -> dict[str, Any]:
    c = place.contender
    return {
        "position": place.place,
        "holder": c.holder,
        "node": c.node,
        "kind": c.kind,
        "layout": c.layout,
        "sequence": c.sequence,
        "identifier": c.identifier,
        "host": c.host,
        "pid": c.pid,
        "token": c.token,
        "joined": c.created.isoformat(timespec="milliseconds"),
        "age_s": round(age(c.created, now), 3),
        "held_s": None,  # known only when --watch saw the grant
        "waits_for": list(place.waits_for),
        "refused": place.refused,
        "ephemeral": c.ephemeral,
    }


# -- drawing ------------------------------------------------------------------------


def _short(node: str) -> str:
    """``lock-<32 hex>-0000000007`` -> ``lock-…0007``: enough to tell nodes apart."""
    name = node.rsplit("/", 1)[1]
    peer = _dialects.read_any(name)
    if peer is not None and peer.dialect != "zklocks":  # Curator's, kazoo's
        return f"{peer.dialect}:{peer.kind}-…{name[-4:]}"
    parts = name.split("-")
    if len(parts) >= 3 and parts[-1].lstrip("-").isdigit():
        return f"{parts[0]}-…{parts[-1][-4:]}"
    return name


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
            f"#{positions[n]}" if n in positions else _short(n) for n in entry["waits_for"]
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


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def _print(console: Console, renderable: RenderableType) -> None:
    """Print; to a file or pipe without the padding rich leaves at the ends of lines."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    lines = captured.get().splitlines()
    click.echo("\n".join(line.rstrip() for line in lines))


# -- commands -----------------------------------------------------------------------


@click.command(
    context_settings=CONTEXT,
    epilog=STATUS_EPILOG,
    short_help="Show who holds a lock and who waits.",
)
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--watch",
    is_flag=True,
    help="Keep running and redraw on every change (driven by ZooKeeper watches).",
)
@connection_options
@security_options()
def status(
    path: str, as_json: bool, watch: bool, hosts: str, connect_timeout: float, security: Security
) -> None:
    """Show who holds the lock at PATH and who waits, in queue order.

    For each contender: kind, identifier, host, pid, how long it has held or waited,
    its fencing token, and which node it watches (the watch chain). Reads only.
    """
    path = _path_argument(path)
    if watch:
        from zklocks._cli.status_watch import watch as watch_lock

        watch_lock(hosts, connect_timeout, path, as_json, security=security)
        return
    client = connect(hosts, connect_timeout, security=security)
    try:
        state = snapshot(client, path)
        if as_json:
            click.echo(json.dumps(state, indent=2))
            return
        console = _console()
        _print(console, render(state))
        if not state["holders"] and not state["waiters"]:
            _hint_not_a_lock(client, path, console)
    except AccessDenied as error:
        fail(f"cannot read {path}: {error}", EX_NOPERM)
    except (LockError, ClientClosed) as error:
        fail(f"cannot read {path}: {error}")
    finally:
        client.stop()


def _path_argument(path: str) -> str:
    try:
        return lock_path(path)
    except LockError as error:
        raise click.BadParameter(
            f"{error}. A lock path looks like /locks/orders.", param_hint="PATH"
        ) from None


def _hint_not_a_lock(client: Client, path: str, console: Console) -> None:
    locks = client._run(walk_locks(path))
    below = [summary.path for summary in locks if summary.path != path]
    if below:
        shown = ", ".join(below[:3]) + (" ..." if len(below) > 3 else "")
        hint = f"(locks below it: {shown}; see `zklocks ls {path}`)"
        console.print(text(hint, style="dim", limit=None))


@click.command(
    name="ls",
    context_settings=CONTEXT,
    epilog=LS_EPILOG,
    short_help="List every lock under a root.",
)
@click.argument("root", default="/")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@connection_options
@security_options()
def ls(root: str, as_json: bool, hosts: str, connect_timeout: float, security: Security) -> None:
    """List every lock at or under ROOT (default: the whole tree) with holder and waiter
    counts and the holders' fencing tokens."""
    if root != "/":
        root = _path_argument(root)
    client = connect(hosts, connect_timeout, security=security)
    try:
        summaries = client._run(walk_locks(root))
    except AccessDenied as error:
        fail(f"cannot list {root}: {error}", EX_NOPERM)
    except (LockError, ClientClosed) as error:
        fail(f"cannot list {root}: {error}")
    finally:
        client.stop()
    if as_json:
        click.echo(json.dumps([_summary_json(s) for s in summaries], indent=2))
        return
    console = _console()
    if not summaries:
        console.print(text(f"no locks under {root}", limit=None))
        return
    _print(console, _ls_table(summaries))


def _summary_json(summary: LockSummary) -> dict[str, Any]:
    return {
        "path": summary.path,
        "kind": summary.kind,
        "holders": summary.holders,
        "waiters": summary.waiters,
        "tokens": list(summary.tokens),
    }


def _ls_table(summaries: Sequence[LockSummary]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("path")
    table.add_column("kind")
    table.add_column("holding", justify="right")
    table.add_column("waiting", justify="right")
    table.add_column("token", justify="right")
    for s in summaries:
        tokens = ", ".join(map(str, s.tokens[:3])) + (" …" if len(s.tokens) > 3 else "")
        path = text(s.path, limit=None)
        table.add_row(path, text(s.kind), str(s.holders), str(s.waiters), tokens or "-")
    return table
