"""``zklocks server``: a local ZooKeeper in the foreground, for trying things and tests."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType

import click

from zklocks._cli.common import CONTEXT, EX_UNAVAILABLE, fail
from zklocks.server import (
    PortInUse,
    ServerError,
    ServerSetupError,
    ZooKeeperEnsemble,
    ZooKeeperServer,
)

EPILOG = """\b
Examples:
  zklocks server                          # 127.0.0.1:2181, data removed on exit
  zklocks server --port 2182 --data-dir ./zk-data
  zklocks server --tick-time 200          # allows sessions from 0.4 s (lock-loss tests)
  zklocks server --ensemble 3             # a three-member quorum on 2181-2183
"""


@click.command(
    context_settings=CONTEXT, epilog=EPILOG, short_help="Run a local ZooKeeper to try things with."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=2181,
    show_default=True,
    help="Client port on 127.0.0.1 (0 picks a free one); members of an ensemble use the "
    "ports from here up.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the data here across runs (default: a temporary directory removed on exit).",
)
@click.option(
    "--tick-time",
    type=click.IntRange(1),
    default=2000,
    show_default=True,
    help="ZooKeeper's tick in ms; sessions may last 2 to 20 ticks.",
)
@click.option(
    "--ensemble",
    "size",
    type=click.IntRange(1),
    default=None,
    help="Run a quorum of this many members instead of one standalone server.",
)
def server(port: int, data_dir: Path | None, tick_time: int, size: int | None) -> None:
    """Run a local ZooKeeper in the foreground until Ctrl-C, and say how to use it."""
    zookeeper: ZooKeeperServer | ZooKeeperEnsemble
    if size is None:
        zookeeper = ZooKeeperServer(port=port or None, data_dir=data_dir, tick_time=tick_time)
    else:
        ports = [port + offset for offset in range(size)] if port else None
        zookeeper = ZooKeeperEnsemble(
            size, client_ports=ports, data_dir=data_dir, tick_time=tick_time
        )
    # SIGTERM (a service manager, `kill`) shuts down as cleanly as Ctrl-C; SIGINT too,
    # even when a shell started us in the background with SIGINT ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        try:
            zookeeper.start()
        except ServerSetupError as error:
            fail(str(error), EX_UNAVAILABLE)
        except PortInUse as error:
            fail(
                f"{error}: is a ZooKeeper (another `zklocks server`?) running there already?\n"
                "  - To use that one: export ZKLOCKS_HOSTS=127.0.0.1:PORT\n"
                "  - To start another on a free port: zklocks server --port 0",
                EX_UNAVAILABLE,
            )
        except ServerError as error:
            fail(str(error))
        _announce(zookeeper, data_dir, tick_time)
        while zookeeper.running:
            time.sleep(0.2)
        fail("ZooKeeper exited on its own; see the log named above.")
    except KeyboardInterrupt:
        click.echo("Stopping ZooKeeper...", err=True)
    finally:
        zookeeper.stop()


def _announce(
    zookeeper: ZooKeeperServer | ZooKeeperEnsemble, data_dir: Path | None, tick_time: int
) -> None:
    kind = "standalone" if isinstance(zookeeper, ZooKeeperServer) else "ensemble"
    keep = "kept" if data_dir is not None else "removed on exit"
    shortest = 2 * tick_time / 1000
    click.echo(f"ZooKeeper ({kind}, tickTime {tick_time} ms) is serving on {zookeeper.hosts}")
    click.echo(f"  data: {zookeeper.data_dir} ({keep})")
    members = zookeeper.members if isinstance(zookeeper, ZooKeeperEnsemble) else [zookeeper]
    for member in members:
        click.echo(f"  log:  {member.log_path}")
    click.echo(f"  sessions: {shortest:g} s to {shortest * 10:g} s")
    click.echo("Point clients at it with:")
    click.echo(f"  export ZKLOCKS_HOSTS={zookeeper.hosts}")
    click.echo("then, in other terminals:")
    click.echo("  zklocks run /locks/demo -- sleep 30      # hold a lock for 30 s")
    click.echo("  zklocks status /locks/demo --watch       # see who holds and waits")
    click.echo("  zklocks ls                               # every lock on the server")
    click.echo(f"  zklocks demo --hosts {zookeeper.hosts}")
    click.echo('or from Python: zklocks.Client("' + zookeeper.hosts + '")')
    click.echo("Press Ctrl-C to stop.", nl=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
