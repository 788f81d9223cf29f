"""The options ``zklocks run`` and ``zklocks elect`` both take: one declaration each, so
the two commands cannot drift apart in type or metavar; each command says in its own
words (the help text) what the option means for it.

Both commands end in the same ``RunOptions`` and ``execute()`` (run.py): these options
are the same settings, not two that happen to look alike.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from zklocks._cli.common import DEFAULT_SESSION_TIMEOUT, F, seconds_option
from zklocks._cli.options import Identifier, Seconds


def shell_command_option(help_text: str) -> Callable[[F], F]:
    """``-c TEXT``: a line for ``sh -c`` instead of COMMAND (see ``command_line``)."""
    return click.option(
        "-c",
        "--command",
        "shell_command",
        type=click.UNPROCESSED,  # for sh, as it is: any bytes
        metavar="TEXT",
        help=help_text,
    )


def timeout_option(help_text: str) -> Callable[[F], F]:
    """``--timeout SECONDS``: ``inf`` is allowed and means no limit."""
    return click.option(
        "--timeout",
        type=Seconds(allow_inf=True),
        metavar="SECONDS",
        help=help_text,
    )


def non_blocking_option(help_text: str) -> Callable[[F], F]:
    return click.option("-n", "--non-blocking", is_flag=True, help=help_text)


def identifier_option(help_text: str) -> Callable[[F], F]:
    """``--identifier``: how status and leader name us (checked by ``Identifier``)."""
    return click.option("--identifier", type=Identifier(), metavar="TEXT", help=help_text)


def session_timeout_option(help_text: str) -> Callable[[F], F]:
    return seconds_option(
        "--session-timeout", minimum=0.1, default=DEFAULT_SESSION_TIMEOUT, help_text=help_text
    )


kill_after_option = seconds_option(
    "--kill-after",
    minimum=0.0,
    default=10.0,
    help_text="After SIGTERM, wait this long for the command to exit, then SIGKILL it.",
)


lock_delay_option = click.option(
    "--lock-delay",
    type=Seconds(0.0),
    metavar="SECONDS",
    help="After a holder ahead was lost abnormally (session expired, broken, taken back), "
    "wait this long from seeing it go before running the command; a clean release hands "
    "over at once. The zklocks layout only. See docs/locks.md.",
)


def command_line(command: tuple[str, ...], shell_command: str | None) -> tuple[str, ...]:
    """COMMAND as given after ``--``, or ``sh -c TEXT`` for ``-c TEXT``; both at once is a
    usage error."""
    if shell_command is None:
        return command
    if command:
        raise click.UsageError("give either -c TEXT or '-- COMMAND', not both")
    return ("sh", "-c", shell_command)
