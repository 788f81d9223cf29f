"""The ``zklocks`` command line: the group, and one module per command in ``zklocks._cli``.

    zklocks run PATH [--read|--write|--semaphore N] [--timeout S] [-- COMMAND [ARGS]... | -c TEXT]
    zklocks status PATH [--json] [--watch]
    zklocks ls [ROOT] [--json]
    zklocks elect PATH [--identifier X] -- COMMAND [ARGS]...
    zklocks leader PATH [--json] [--watch]
    zklocks server [--port P] [--data-dir D] [--ensemble N]
    zklocks demo [--hosts H]
    zklocks serve [--listen HOST:PORT] PATH [PATH...]
    zklocks revoke PATH
    zklocks break PATH [--token T] [--yes]

A command's module is imported only when that command runs (or help lists it), so
``zklocks run`` does not pay for the demo's imports. See docs/cli.md for every option
and exit status.
"""

from __future__ import annotations

import importlib

import click

from zklocks import __version__, tracing
from zklocks._cli.common import CONTEXT, VERBOSITY, show_library_logs

COMMANDS = {
    "run": "zklocks._cli.run:run",
    "status": "zklocks._cli.status:status",
    "ls": "zklocks._cli.status:ls",
    "elect": "zklocks._cli.elect:elect",
    "leader": "zklocks._cli.elect:leader",
    "server": "zklocks._cli.server:server",
    "demo": "zklocks._cli.demo:demo",
    "serve": "zklocks._cli.serve:serve",
    "revoke": "zklocks._cli.admin:revoke",
    "break": "zklocks._cli.admin:break_",
    "doctor": "zklocks._cli.doctor:doctor",
}

EPILOG = """\b
Examples:
  zklocks server                                  # a local ZooKeeper to try things with
  zklocks run /locks/backup -- ./backup.sh        # run a command under a lock
  zklocks status /locks/backup --watch            # who holds, who waits, live
  zklocks ls                                      # every lock and its queue length
  zklocks elect /elections/cron -- ./cron.sh      # one replica runs it: the leader
  zklocks leader /elections/cron --watch          # who leads, live
  zklocks demo                                    # watch the locks work (< 1 min)
  zklocks serve /locks                            # lock state over HTTP and /metrics
  zklocks revoke /locks/backup                    # ask its holder to let go
  zklocks break /locks/backup --yes               # force it: delete the holder's node

\b
Every command that talks to ZooKeeper takes --hosts (or ZKLOCKS_HOSTS), default
127.0.0.1:2181. `zklocks COMMAND --help` shows each command's options and examples.
"""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings=CONTEXT, epilog=EPILOG)
@click.version_option(__version__, "--version", prog_name="zklocks")
@click.option(
    "-v",
    "--verbose",
    "verbosity",
    count=True,
    help="Show the library's log: -v lock and connection events, -vv everything.",
)
def main(verbosity: int) -> None:
    """Distributed locks on Apache ZooKeeper, from the command line."""
    click.get_current_context().meta[VERBOSITY] = verbosity
    show_library_logs(verbosity)
    tracing.join_environment()  # a traced job that started us: our spans join its trace


if __name__ == "__main__":
    main()
