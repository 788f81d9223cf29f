"""``zklocks revoke`` and ``zklocks break``: an operator asks, or forces, a lock's holders.

``revoke`` is a request (``Client.revoke``): each holder's node gets a marker that a
holder listening for it (``lease.add_revoke_callback``, ``zklocks run``, a revocable
Curator lock) takes as "please let go". ``break`` deletes the holders' nodes
(``zklocks._core.breaking``): the next waiter is granted at once while the old holder
may still be at work, so it prints every token it broke (fencing is what protects the
resource then) and logs who broke what.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import sys

import click

from zklocks import Holder
from zklocks._cli.common import (
    CONTEXT,
    EX_USAGE,
    check_path,
    client_for,
    connection_options,
    fail,
)
from zklocks._cli.options import TEXT
from zklocks._cli.sanitise import clean
from zklocks._cli.security import Security, security_options

log = logging.getLogger("zklocks.admin")

REVOKE_EPILOG = """\b
Examples:
  zklocks revoke /locks/backup        # ask whoever holds it to let go

\b
Nothing is deleted: a holder that listens (zklocks run, lease.add_revoke_callback,
a revocable Curator lock) finishes and releases. See `zklocks break` to force it.
Exit status: 0 (the number asked is printed, 0 included); 69 ZooKeeper unreachable.
"""

BREAK_EPILOG = """\b
Examples:
  zklocks break /locks/backup --yes               # delete every holder's node
  zklocks break /locks/backup --token 4294967302 --yes   # only if that one still holds

\b
The next waiter is granted at once, while the old holder may still be working: only
fencing tokens protect the resource then. Prefer `zklocks revoke` first.
Exit status: 0 broken (or no holder); 1 refused, nothing deleted (another token holds,
or a holder changed meanwhile); 2 no --yes and no terminal to ask on; 77 not allowed.
"""


@click.command(
    context_settings=CONTEXT,
    epilog=REVOKE_EPILOG,
    short_help="Ask the holders of a lock to let go.",
)
@click.argument("path", type=TEXT, callback=check_path)
@connection_options
@security_options()
def revoke(path: str, hosts: str, connect_timeout: float, security: Security) -> None:
    """Ask every current holder of the lock at PATH to let go (cooperative)."""
    with client_for("revoke", path, hosts, connect_timeout, security) as client:
        asked = client.revoke(path)
    log.info("%s asked %d holder(s) of %s to let go", _who(), asked, path)
    click.echo(f"asked {asked} holder{'' if asked == 1 else 's'} of {path} to let go")


@click.command(
    "break",
    context_settings=CONTEXT,
    epilog=BREAK_EPILOG,
    short_help="Force the release of a lock: delete its holders' nodes.",
)
@click.argument("path", type=TEXT, callback=check_path)
@click.option(
    "--token",
    type=click.IntRange(min=1),
    metavar="T",
    help="Break only the holder whose fencing token is T; refuse if it no longer holds.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@connection_options
@security_options()
def break_(
    path: str,
    token: int | None,
    yes: bool,
    hosts: str,
    connect_timeout: float,
    security: Security,
) -> None:
    """Delete the node of every current holder of the lock at PATH (or only the one
    whose token is T): an administrator's forced release."""
    asking = not yes and sys.stdin.isatty()
    if not yes and not asking:
        fail(f"refusing to break {path} without --yes (no terminal to ask on)", EX_USAGE)
    with client_for("break", path, hosts, connect_timeout, security) as client:
        holders = client.holders(path)
        targets = [holder for holder in holders if token is None or holder.token == token]
        if not holders:
            if token is not None:
                fail(f"{path}: no holder; token {token} does not hold it; nothing broken")
            click.echo(f"{path}: no holder; nothing to break")
            return
        if not targets:
            tokens = ", ".join(str(holder.token) for holder in holders)
            fail(f"{path}: held with token {tokens}, not {token}; nothing broken")
        if asking:
            for holder in targets:
                click.echo(f"holder: {_describe(holder)}", err=True)
            if not click.confirm(f"Break {len(targets)} holder(s) of {path}?", err=True):
                fail("not confirmed; nothing broken")
        refused = client.break_holders(targets)
        if refused is not None:
            fail(f"{path}: {refused}; nothing broken")
    who = _who()
    for holder in targets:
        log.warning("%s broke %s (token %d)", who, holder.node, holder.token)
        click.echo(f"broke {_describe(holder)}")


def _describe(holder: Holder) -> str:
    """A holder in words; its identifier and host come from the server: escaped."""
    owner = clean(holder.identifier)
    where = f", pid {holder.pid} on {clean(holder.host)}" if holder.host else ""
    return f"{clean(holder.node)} token {holder.token} ({owner}{where})"


def _who() -> str:
    """Who acted, for the log: user@host (pid)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} (pid {os.getpid()})"
