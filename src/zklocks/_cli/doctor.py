"""``zklocks doctor [PATH...]``: check the servers under the locks, and the locks.

Per member of ``--hosts`` (and of the servers' own membership, when ``conf`` is allowed):
reachable, mode and version, the known issues of that version; TLS and SASL in use;
where the lease rule's tickTime comes from and whether a lease can be kept at the
session timeout. Per PATH, or per lock of the whole tree when no PATH is given (the
client's own walk, ``client.locks(left_behind=True)``): each member's view of the lock
directory after a ``sync`` (read from that member alone), differences flagged; holders
no live session owns, with the ``zklocks break`` that clears them; children of a shape
no known layout makes; and, in the walk of the tree, lock directories left behind
empty. Never writes (a ``sync`` is not a write). Exit 0: all well; 1: findings; 69: no
member reachable. The checks: ``doctor_checks``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from zklocks import Client, ConnectionFailed, LockError
from zklocks._cli import doctor_checks as checks
from zklocks._cli.common import (
    CONTEXT,
    DEFAULT_SESSION_TIMEOUT,
    EX_UNAVAILABLE,
    check_path,
    connection_options,
    seconds_option,
)
from zklocks._cli.options import TEXT
from zklocks._cli.security import Security, security_options

DOCTOR_EPILOG = """\b
Exit status: 0 all well; 1 findings (each with its fix); 69 no member reachable.
Only `srvr` is needed: what the servers do not allow is listed as not checked.
"""


def _paths(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> list[str]:
    return [check_path(ctx, param, value) for value in values]


@click.command(
    "doctor", context_settings=CONTEXT, epilog=DOCTOR_EPILOG,
    short_help="Check the ZooKeeper servers under the locks, and the locks.",
)  # fmt: skip
@click.argument("paths", nargs=-1, type=TEXT, callback=_paths)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@seconds_option("--session-timeout", minimum=0.1, default=DEFAULT_SESSION_TIMEOUT,
                help_text="The session timeout whose lease to check.")  # fmt: skip
@connection_options
@security_options()
def doctor(
    paths: list[str],
    as_json: bool,
    session_timeout: float,
    hosts: str,
    connect_timeout: float,
    security: Security,
) -> None:
    """Check the ZooKeeper servers under the locks at PATH... (and those locks)."""

    def make(where: str, timeout: float = session_timeout) -> Client:
        return Client(where, session_timeout=timeout, connect_timeout=connect_timeout,
                      **security.client_options())  # fmt: skip

    lines, unreachable = _check(make, hosts, paths, security, session_timeout)
    if as_json:
        click.echo(json.dumps({"checks": [line.as_dict() for line in lines]}, indent=2))
    else:
        for line in lines:
            fix = f"\n    fix: {line.fix}" if line.fix else ""
            click.echo(f"{line.status:>9}  {line.topic}: {line.text}{fix}")
    if unreachable:
        raise SystemExit(EX_UNAVAILABLE)
    raise SystemExit(1 if any(line.status == checks.FINDING for line in lines) else 0)


def _check(make: checks.Make, hosts: str, paths: list[str], security: Security,
         session_timeout: float) -> tuple[list[checks.Line], bool]:  # fmt: skip
    """Every check's lines, and whether no member could be reached at all."""
    probe = make(hosts)
    lines, answered, leader = checks.members(probe, hosts, make)
    if not answered:
        return lines, True
    sasl = None if security.sasl is None else security.sasl.mechanism
    lines.append(checks.security(security.ssl is not None, sasl))
    # the lease at the session timeout asked for, and at the clients' default
    for timeout in sorted({session_timeout, DEFAULT_SESSION_TIMEOUT}):
        try:
            with make(hosts, timeout) as client:
                lines += checks.lease(client, timeout)
        except (ConnectionFailed, LockError) as error:
            lines.append(checks.Line("lease", checks.FINDING, f"cannot connect: {error}"))
            return lines, False
    walked = _walk(make, hosts, paths or ["/"], lines)
    if walked is None and not paths:
        return lines, False
    walked = walked or []  # a PATH's other checks go on without the walk
    if not paths:  # every lock of the tree; its empty directories are findings too
        lines += checks.tree(walked)
        paths = [summary.path for summary in walked if not summary.left_behind]
    if not paths:
        return lines, False
    sessions, why = checks.live_sessions(probe, leader)
    chroot = hosts[hosts.index("/") :] if "/" in hosts else ""
    strangers = {summary.path: summary.strangers for summary in walked}
    for path in paths:
        lines += _lock(make, answered, chroot, path, sessions, why)
        lines += checks.strangers(path, strangers.get(path, ()))
    return lines, False


def _walk(make: checks.Make, hosts: str, roots: list[str],
          lines: list[checks.Line]) -> list[checks.LockSummary] | None:  # fmt: skip
    """The locks at or under ``roots`` (with the directories left empty), read through
    one member; None (and why, in ``lines``) if the tree cannot be read."""
    walked: list[checks.LockSummary] = []
    try:
        with make(hosts) as client:
            for root in roots:
                walked += client.locks(root, left_behind=True)
    except (ConnectionFailed, LockError) as error:
        lines.append(checks.Line("locks", checks.UNCHECKED, f"cannot walk the locks: {error}"))
        return None
    return walked


def _lock(make: checks.Make, answered: list[str], chroot: str, path: str,
          sessions: set[int] | None, why: str) -> list[checks.Line]:  # fmt: skip
    """One lock path, read from each member alone after a sync."""
    seen: dict[str, list[checks.Contender]] = {}
    lines: list[checks.Line] = []
    for member in answered:
        try:
            with make(member + chroot) as client:
                client.sync(path)
                seen[member] = client.lock(path).contenders()
        except (ConnectionFailed, LockError) as error:
            lines.append(checks.Line(f"lock {path}", checks.UNCHECKED, f"{member}: {error}"))
    lines += checks.views(seen, path)
    every = {contender.node: contender for line in seen.values() for contender in line}
    lines += checks.ghosts(path, list(every.values()), sessions, why)
    return lines
