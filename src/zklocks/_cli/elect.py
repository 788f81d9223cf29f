"""``zklocks elect`` (run a command while leader) and ``zklocks leader`` (who leads).

``elect`` is ``zklocks run`` with an election instead of a lock: the same signals,
exit statuses and loss handling (the command is stopped when the term is lost), so a
replica runs ``zklocks elect /elections/cron -- ./cron.sh`` and exactly one runs it.
``leader --watch`` follows the leader with one ZooKeeper watch (``Election.observe``),
like ``etcdctl elect --listen``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import signal
import sys
from types import FrameType
from typing import Any

import click

from zklocks import Client, Contender
from zklocks._cli.common import (
    CONTEXT,
    ELECT,
    EX_NOINPUT,
    age,
    check_path,
    client_for,
    command_verbosity,
    connection_options,
    fail,
    not_ignored,
    seconds,
    verbose_option,
    view_options,
    words_for,
)
from zklocks._cli.options import TEXT
from zklocks._cli.run import RunOptions, _describe, execute, exit_unless_runnable
from zklocks._cli.run_options import (
    command_line,
    identifier_option,
    kill_after_option,
    lock_delay_option,
    non_blocking_option,
    session_timeout_option,
    shell_command_option,
    timeout_option,
)
from zklocks._cli.security import Security, security_options
from zklocks._cli.status_view import json_time

ELECT_EPILOG = """\b
Examples:
  zklocks elect /elections/cron -- ./cron.sh          # one replica runs it at a time
  zklocks elect /elections/cron --identifier node-a -- ./cron.sh
  zklocks elect /elections/x -c 'echo "leading with token $ZKLOCKS_TOKEN"'
  zklocks elect /elections/cron -n -- ./cron.sh       # 75 at once if another leads

\b
The command sees ZKLOCKS_TOKEN (the term's fencing token), ZKLOCKS_NODE, ZKLOCKS_PATH.
Exit status: the command's own; 75 not elected within --timeout; 76 leadership was
lost while the command ran (it was stopped); 130 interrupted (Ctrl-C); 69 ZooKeeper
unreachable; 78 no lease can be kept with this session on these servers (the message
names the fix; the command is not run); 126/127 the command could not be run; 2 usage
error.
"""

LEADER_EPILOG = """\b
Examples:
  zklocks leader /elections/cron
  zklocks leader /elections/cron --json | jq -r '.leader.identifier'
  zklocks leader /elections/cron --watch          # a line per change (Ctrl-C to stop)
  zklocks leader /elections/cron --watch --json   # one JSON document per line
"""


@click.command(
    context_settings=CONTEXT, epilog=ELECT_EPILOG, short_help="Run a command while leader."
)
@click.argument("path", type=TEXT, callback=check_path)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND [ARGS]...")
@shell_command_option("Run TEXT with `sh -c` instead of COMMAND (as `zklocks run -c`).")
@identifier_option("How `zklocks leader` names us. Default: the command line.")
@timeout_option("Give up (exit 75) when not elected in time. Default: wait as long as it takes.")
@non_blocking_option("Give up at once (exit 75) when another candidate leads or is ahead in line.")
@kill_after_option
@lock_delay_option
@session_timeout_option("If this process dies, the next candidate leads this long after.")
@verbose_option(
    "Say when elected and when resigning, with the library's lock and connection "
    "events (the same as `zklocks -v elect`); -vv: everything."
)
@connection_options
@security_options(acl=True)
def elect(
    path: str,
    command: tuple[str, ...],
    shell_command: str | None,
    identifier: str | None,
    timeout: float | None,
    non_blocking: bool,
    kill_after: float,
    lock_delay: float | None,
    session_timeout: float,
    verbosity: int,
    hosts: str,
    connect_timeout: float,
    security: Security,
) -> None:
    """Campaign for leadership of PATH; run COMMAND while leader; resign when it exits.

    Candidates are served first come, first served. If leadership is lost while the
    command runs (ZooKeeper expired our session), the command is stopped: SIGTERM, then
    SIGKILL after --kill-after.
    """
    command = command_line(command, shell_command)
    if not command:
        raise click.UsageError(
            f"missing the command to run after '--' (or -c TEXT), e.g.\n"
            f"  zklocks elect {path} -- ./cron.sh"
        )
    if non_blocking and timeout is not None:
        raise click.UsageError("--non-blocking and --timeout exclude each other")
    exit_unless_runnable(command)
    options = RunOptions(
        path=path,
        command=command,
        kind=ELECT.name,
        permits=None,
        timeout=None if timeout == math.inf else timeout,
        non_blocking=non_blocking or timeout == 0,
        identifier=identifier or _describe(command),
        kill_after=kill_after,
        session_timeout=session_timeout,
        verbose=command_verbosity(verbosity) > 0,
        hosts=hosts,
        connect_timeout=connect_timeout,
        security=security,
        lock_delay=lock_delay,
    )
    sys.exit(execute(options))


def leader_json(path: str, leader: Contender | None) -> dict[str, Any]:
    """The ``--json`` document: ``leader`` is null when nobody leads."""
    now = dt.datetime.now(tz=dt.UTC)
    if leader is None:
        return {"path": path, "at": json_time(now), "leader": None}
    return {
        "path": path,
        "at": json_time(now),
        "leader": {
            "identifier": leader.identifier,
            "host": leader.host,
            "pid": leader.pid,
            "node": leader.node,
            "token": leader.token,
            "sequence": leader.sequence,
            "candidate_since": json_time(leader.created),
        },
    }


def leader_text(leader: Contender | None, *, stamp: bool = False) -> str:
    when = f"{dt.datetime.now(tz=dt.UTC):%H:%M:%S} " if stamp else ""
    if leader is None:
        return f"{when}no leader"
    return (
        f"{when}{leader.identifier} (pid {leader.pid} on {leader.host}, token {leader.token}, "
        f"candidate for {seconds(age(leader.created))})"
    )


@click.command(
    context_settings=CONTEXT, epilog=LEADER_EPILOG, short_help="Show who leads an election."
)
@click.argument("path", type=TEXT, callback=check_path)
@view_options(
    json_help="Print JSON instead of text.",
    watch_help="Keep running; print each change of leader (driven by one ZooKeeper watch).",
)
@connection_options
@security_options()
def leader(
    path: str, as_json: bool, watch: bool, hosts: str, connect_timeout: float, security: Security
) -> None:
    """Print who leads the election at PATH ("no leader" / null when nobody does)."""
    with (
        client_for("read", path, hosts, connect_timeout, security) as client,
        contextlib.suppress(KeyboardInterrupt),  # Ctrl-C ends a --watch: exit 0
    ):
        election = client.election(path)
        if not watch:
            _check_election(client, path)
            current = election.leader()
            click.echo(json.dumps(leader_json(path, current)) if as_json else leader_text(current))
            return
        for sig in not_ignored((signal.SIGTERM, signal.SIGHUP)):  # SIGINT: Python's own
            signal.signal(sig, _interrupt)
        for current in election.observe():
            text = leader_text(current, stamp=True)
            click.echo(json.dumps(leader_json(path, current)) if as_json else text)
            sys.stdout.flush()


def _check_election(client: Client, path: str) -> None:
    """Exit 66 when nothing is at ``path``, or a lock of another kind is."""
    contenders = client.contenders(path)
    if not contenders and client.get_acl(path) is None:
        fail(f"not an election: {path} does not exist", EX_NOINPUT)
    if contenders and all(contender.kind != ELECT.name for contender in contenders):
        kind = words_for(contenders[0].kind)
        fail(f"not an election: {path} holds a {kind}; see zklocks status {path}", EX_NOINPUT)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
