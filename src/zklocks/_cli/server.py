"""``zklocks server``: a local ZooKeeper in the foreground, for trying things and tests."""

from __future__ import annotations

import contextlib
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

from zklocks._cli.common import CONTEXT, EX_UNAVAILABLE, TLSFiles, fail
from zklocks._cli.options import Text, as_typed, undecodable
from zklocks.server import (
    PortInUse,
    ServerError,
    ServerSetupError,
    ServerTLS,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    make_tls_files,
)

EPILOG = """\b
Examples:
  zklocks server                          # 127.0.0.1:2181, data removed on exit
  zklocks server --port 2182 --data-dir ./zk-data
  zklocks server --tick-time 200          # allows sessions from 0.4 s (lock-loss tests)
  zklocks server --ensemble 3             # a three-member quorum on 2181-2183
  zklocks server --ensemble 3 --stock     # as ZooKeeper ships: `srvr` alone answers
  zklocks server --tls                    # TLS only, with a throwaway CA it prints
  zklocks server --tls --tls-client-auth need   # mutual TLS: clients need a certificate
  zklocks server --ensemble 3 --tls       # TLS on client ports and between members
  zklocks server --sasl-user alice:s3cret --enforce-auth   # SASL logins required
"""


def _check_data_dir(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A file name may hold any bytes, but ZooKeeper reads this one from its (text)
    configuration file: it must be UTF-8."""
    if value is not None and undecodable(str(value)):
        raise click.BadParameter(
            f"'{as_typed(str(value))}' is not UTF-8 text, and ZooKeeper reads the directory's "
            "name from its configuration file",
            ctx,
            param,
        )
    return value


@dataclass(frozen=True)
class _Logins:
    """Who may log in with SASL, and whether a login is required."""

    users: dict[str, str]
    enforce: bool

    def __repr__(self) -> str:  # the passwords stay hidden
        return f"_Logins(users={sorted(self.users)}, enforce={self.enforce})"


def _check_sasl_users(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    users: dict[str, str] = {}
    for value in values:
        user, colon, password = value.partition(":")
        if not colon or not user or not password:
            raise click.BadParameter(
                "must look like USER:PASSWORD (the value is not shown here)", ctx, param
            )
        if not all(ch.isalnum() or ch in "_-." for ch in user):
            raise click.BadParameter(
                f"a user name is letters, digits, '_', '-', '.', not {as_typed(user)!r}",
                ctx,
                param,
            )
        users[user] = password
    return users


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
    callback=_check_data_dir,
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
@click.option(
    "--tls",
    is_flag=True,
    help="Serve TLS only (no plaintext port; with --ensemble, between members too), with a "
    "throwaway CA and server certificate made at start (needs the 'cryptography' package: "
    "pip install 'zklocks[tls-server]').",
)
@click.option(
    "--tls-client-auth",
    type=click.Choice(["none", "want", "need"]),
    default="none",
    show_default=True,
    help="With --tls: 'need' refuses clients without a certificate signed by that CA "
    "(one is made for you).",
)
@click.option(
    "--sasl-user",
    "sasl_users",
    multiple=True,
    type=Text(secret=True),
    callback=_check_sasl_users,
    metavar="USER:PASSWORD",
    help="Let USER log in with SASL DIGEST-MD5 (repeatable). For trying things: the "
    "password is visible in `ps`.",
)
@click.option(
    "--enforce-auth",
    is_flag=True,
    help="Refuse every session that has not logged in with SASL (needs --sasl-user).",
)
@click.option(
    "--stock",
    is_flag=True,
    help="Configure it as ZooKeeper ships: `srvr` the one four-letter word (`conf` "
    "refused), no AdminServer. Clients then learn tickTime from the session bounds.",
)
def server(
    port: int,
    data_dir: Path | None,
    tick_time: int,
    size: int | None,
    tls: bool,
    tls_client_auth: str,
    sasl_users: dict[str, str],
    enforce_auth: bool,
    stock: bool,
) -> None:
    """Run a local ZooKeeper in the foreground until Ctrl-C, and say how to use it."""
    files: TLSFiles | None = None
    if enforce_auth and not sasl_users:
        raise click.UsageError("--enforce-auth needs --sasl-user USER:PASSWORD")
    if sasl_users and size is not None:
        raise click.UsageError("--sasl-user serves a standalone server; leave out --ensemble")
    login = _Logins(sasl_users, enforce_auth)
    words = "srvr" if stock else "*"
    with contextlib.ExitStack() as cleanup:
        if tls:
            files = _tls_files(data_dir, cleanup)
        elif tls_client_auth != "none":
            raise click.UsageError("--tls-client-auth needs --tls")
        _serve(port, data_dir, tick_time, size, files, tls_client_auth, login, words)


def _tls_files(data_dir: Path | None, cleanup: contextlib.ExitStack) -> TLSFiles:
    """New files in DATA_DIR/tls, or in a temporary directory removed on exit."""
    if data_dir is not None:
        directory = data_dir / "tls"
    else:
        directory = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="zklocks-tls-")))
    try:
        return make_tls_files(directory)
    except ImportError as error:
        fail(str(error), EX_UNAVAILABLE)


def _serve(
    port: int,
    data_dir: Path | None,
    tick_time: int,
    size: int | None,
    files: TLSFiles | None,
    client_auth: str,
    login: _Logins,
    four_letter_words: str = "*",
) -> None:
    zookeeper: ZooKeeperServer | ZooKeeperEnsemble
    tls = None
    if files is not None:
        tls = ServerTLS(
            files.server_keystore, files.ca, client_auth, probe_chain=files.client_chain
        )
    if size is None:
        zookeeper = ZooKeeperServer(
            port=port or None,
            data_dir=data_dir,
            tick_time=tick_time,
            tls=tls,
            sasl_users=login.users,
            enforce_auth=login.enforce,
            four_letter_words=four_letter_words,
        )
    else:
        ports = [port + offset for offset in range(size)] if port else None
        zookeeper = ZooKeeperEnsemble(
            size,
            client_ports=ports,
            data_dir=data_dir,
            tick_time=tick_time,
            tls=tls,
            four_letter_words=four_letter_words,
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
            asked = [port + offset for offset in range(size or 1)]
            existing = ",".join(f"127.0.0.1:{number}" for number in asked)
            fail(
                f"{error}: is a ZooKeeper (another `zklocks server`?) running there already?\n"
                f"  - To use that one: export ZKLOCKS_HOSTS={existing}\n"
                "  - To start another on a free port: zklocks server --port 0",
                EX_UNAVAILABLE,
            )
        except ServerError as error:
            fail(str(error))
        _announce(zookeeper, data_dir, tick_time, files, client_auth, login)
        while zookeeper.running:
            time.sleep(0.2)
        fail("ZooKeeper exited on its own; see the log named above.")
    except KeyboardInterrupt:
        click.echo("Stopping ZooKeeper...", err=True)
    finally:
        zookeeper.stop()


def _announce(
    zookeeper: ZooKeeperServer | ZooKeeperEnsemble,
    data_dir: Path | None,
    tick_time: int,
    files: TLSFiles | None = None,
    client_auth: str = "none",
    login: _Logins | None = None,
) -> None:
    kind = "standalone" if isinstance(zookeeper, ZooKeeperServer) else "ensemble"
    if files is not None:
        kind += (
            ", TLS only" if isinstance(zookeeper, ZooKeeperServer) else ", TLS only, members too"
        )
    if login is not None and login.enforce:
        kind += ", SASL login required"
    if zookeeper.options.four_letter_words != "*":
        kind += ", as shipped: only `srvr` answers"
    keep = "kept" if data_dir is not None else "removed on exit"
    shortest = 2 * tick_time / 1000
    click.echo(f"ZooKeeper ({kind}, tickTime {tick_time} ms) is serving on {zookeeper.hosts}")
    click.echo(f"  data: {zookeeper.data_dir} ({keep})")
    members = zookeeper.members if isinstance(zookeeper, ZooKeeperEnsemble) else [zookeeper]
    for member in members:
        click.echo(f"  log:  {member.log_path}")
    click.echo(f"  sessions: {shortest:g} s to {shortest * 10:g} s")
    if files is not None:
        click.echo(f"  TLS: CA {files.ca} (throwaway: trust it for this server only)")
        if client_auth != "none":
            click.echo(f"  client certificate {files.client_cert}, key {files.client_key}")
    if login is not None and login.users:
        click.echo(f"  SASL DIGEST-MD5 users: {', '.join(sorted(login.users))}")
    click.echo("Point clients at it with:")
    click.echo(f"  export ZKLOCKS_HOSTS={zookeeper.hosts}")
    if login is not None and login.users:
        user = sorted(login.users)[0]
        click.echo(f"  export ZKLOCKS_SASL_USER={user}")
        click.echo("  export ZKLOCKS_SASL_PASSWORD_FILE=<a file holding its password>")
    if files is not None:
        click.echo(f"  export ZKLOCKS_TLS_CA={files.ca}")
        if client_auth != "none":
            click.echo(f"  export ZKLOCKS_TLS_CERT={files.client_cert}")
            click.echo(f"  export ZKLOCKS_TLS_KEY={files.client_key}")
    click.echo("then, in other terminals:")
    click.echo("  zklocks run /locks/demo -- sleep 30      # hold a lock for 30 s")
    click.echo("  zklocks status /locks/demo --watch       # see who holds and waits")
    click.echo("  zklocks ls                               # every lock on the server")
    if files is None:  # the demo speaks plain TCP
        click.echo(f"  zklocks demo --hosts {zookeeper.hosts}")
    if files is None and login is not None and login.users:
        user = sorted(login.users)[0]
        click.echo(
            f'or from Python: zklocks.Client("{zookeeper.hosts}", '
            f'sasl=zklocks.SASL(username="{user}", password=...))'
        )
    elif files is None:
        click.echo('or from Python: zklocks.Client("' + zookeeper.hosts + '")')
    else:
        chain = (
            ""
            if client_auth == "none"
            else (f"; ctx.load_cert_chain({str(files.client_cert)!r}, {str(files.client_key)!r})")
        )
        context = f"ssl.create_default_context(cafile={str(files.ca)!r})"
        click.echo(f"or from Python: ctx = {context}{chain}")
        click.echo(f'                zklocks.Client("{zookeeper.hosts}", ssl=ctx)')
    click.echo("Press Ctrl-C to stop.", nl=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
