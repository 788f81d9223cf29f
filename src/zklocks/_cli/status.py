"""``zklocks status`` (who holds, who waits, whom each waiter watches) and ``zklocks ls``.

``status --watch`` (in ``status_watch``) redraws on ZooKeeper child watches: arm the watch,
list, draw, wait.
Between changes it only redraws the durations from the clock; it sends no request.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from zklocks import Client, LockError, LockSummary
from zklocks._cli.common import (
    CONTEXT,
    EX_NOINPUT,
    client_for,
    connection_options,
    fail,
    lock_path,
    view_options,
)
from zklocks._cli.options import TEXT
from zklocks._cli.sanitise import text
from zklocks._cli.security import Security, security_options
from zklocks._cli.status_view import new_console, print_clean, render, snapshot
from zklocks._cli.status_watch import watch as watch_lock

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


@click.command(
    context_settings=CONTEXT,
    epilog=STATUS_EPILOG,
    short_help="Show who holds a lock and who waits.",
)
@click.argument("path", type=TEXT)
@view_options(
    json_help="Print JSON instead of a table.",
    watch_help="Keep running and redraw on every change (driven by ZooKeeper watches).",
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
        watch_lock(hosts, connect_timeout, path, as_json, security=security)
        return
    with client_for("read", path, hosts, connect_timeout, security) as client:
        state = snapshot(client, path)
        everyone = state["holders"] + state["waiters"]
        if state["acl"] is None and not everyone:
            fail(f"no such lock: {path} does not exist", EX_NOINPUT)
        if everyone and all(entry["kind"] == "election" for entry in everyone):
            fail(f"not a lock: {path} is an election; see zklocks leader {path}", EX_NOINPUT)
        if as_json:
            click.echo(json.dumps(state, indent=2))
            return
        console = new_console()
        print_clean(console, render(state))
        if not state["holders"] and not state["waiters"]:
            _hint_not_a_lock(client, path, console)


def _path_argument(path: str) -> str:
    try:
        return lock_path(path)
    except LockError as error:
        raise click.BadParameter(
            f"{error}. A lock path looks like /locks/orders.", param_hint="PATH"
        ) from None


def _hint_not_a_lock(client: Client, path: str, console: Console) -> None:
    locks = client.locks(path)
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
@click.argument("root", type=TEXT, default="/")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@connection_options
@security_options()
def ls(root: str, as_json: bool, hosts: str, connect_timeout: float, security: Security) -> None:
    """List every lock at or under ROOT (default: the whole tree) with holder and waiter
    counts and the holders' fencing tokens."""
    if root != "/":
        root = _path_argument(root)
    with client_for("list", root, hosts, connect_timeout, security) as client:
        summaries = client.locks(root)
        missing = not summaries and client.exists(root) is None
    if missing:  # as status and leader: a typo'd root is not "no locks"
        fail(f"no such path: {root} does not exist", EX_NOINPUT)
    if as_json:
        click.echo(json.dumps([_summary_json(s) for s in summaries], indent=2))
        return
    console = new_console()
    if not summaries:
        console.print(text(f"no locks under {root}", limit=None))
        return
    print_clean(console, _ls_table(summaries))


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
