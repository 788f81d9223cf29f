"""What every ``zklocks`` command shares: where ZooKeeper is, connecting with errors a
person can act on, exit statuses, and small formatting helpers."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn, TypeVar

import click

from zklocks import AccessDenied, Client, ConnectionFailed, InvalidArgument, InvalidPath, LockError
from zklocks._certs import TLSFiles
from zklocks._cli.options import TEXT, Seconds
from zklocks._cli.sanitise import cannot, clean
from zklocks._cli.security import Security
from zklocks._core.inspect import Place, line_up, short_name
from zklocks._core.kinds import ELECT, LOCK, PERMIT, READ, WRITE, words_for
from zklocks._core.security import perm_letters, show_id
from zklocks._core.validate import hosts as hosts_string
from zklocks._core.validate import lock_path
from zklocks._errors import TickTimeBelowServers
from zklocks._frontend.options import DEFAULT_HOSTS, DEFAULT_SESSION_TIMEOUT
from zklocks._frontend.server_check import UnsafeServer

# The one address through which the commands reach what the library keeps private: the
# line-up view, the kinds' words, the path rule, the ACL's words and the defaults.
__all__ = [
    "DEFAULT_SESSION_TIMEOUT",
    "ELECT",
    "LOCK",
    "PERMIT",
    "READ",
    "WRITE",
    "Place",
    "TLSFiles",
    "line_up",
    "lock_path",
    "perm_letters",
    "short_name",
    "show_id",
    "words_for",
]

# Exit statuses (sysexits.h where one fits), documented in docs/cli.md.
EX_USAGE = 2  # click's own for usage errors
EX_NOINPUT = 66  # no such lock or election at the path, or one of another kind
EX_UNAVAILABLE = 69  # ZooKeeper unreachable, or no ZooKeeper to start
EX_SOFTWARE = 70  # the demo: an expectation failed
EX_NOT_ACQUIRED = 75  # EX_TEMPFAIL: the lock was not acquired in time (try again later)
EX_LOST = 76  # the lease was lost while the command ran
EX_NOPERM = 77  # ZooKeeper's ACL refused us, or the lock directory's ACL is too weak
EX_CONFIG = 78  # no lease can be kept with this session on these servers (see the message)
EX_CANNOT_EXECUTE = 126
EX_NOT_FOUND = 127

HOSTS_ENV = "ZKLOCKS_HOSTS"
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

F = TypeVar("F", bound=Callable[..., Any])


class Failure(click.ClickException):
    """An error printed as ``zklocks: message`` (no traceback), with its exit status."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        setattr(self, "exit_code", exit_code)  # noqa: B010 (click declares it on the class)

    def show(self, file: IO[Any] | None = None) -> None:
        # Messages may quote what the server said (paths, identifiers): escaped.
        click.echo(f"zklocks: {clean(self.format_message(), newlines=True, limit=None)}", err=True)


def fail(message: str, exit_code: int = 1) -> NoReturn:
    raise Failure(message, exit_code)


def _check_hosts(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``host[:port][,host[:port]...][/chroot]``, checked before any connection attempt
    by the parser the client itself uses."""
    try:
        return hosts_string(value).strip(" \t\r\n")
    except InvalidArgument as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from None


def _hosts_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else _check_hosts(ctx, param, value)


def hosts_option(
    envvar: str | None = HOSTS_ENV,
    default: str | None = DEFAULT_HOSTS,
    help_text: str = "ZooKeeper to use: host:port[,host:port...][/chroot].",
) -> Callable[[F], F]:
    return click.option(
        "--hosts",
        type=TEXT,
        envvar=envvar,
        default=default,
        show_default=default is not None,
        show_envvar=envvar is not None,
        callback=_hosts_callback,
        help=help_text,
    )


def seconds_option(
    name: str, *, minimum: float, default: float, help_text: str
) -> Callable[[F], F]:
    """A duration option with a default: ``NAME SECONDS``, the default shown in the help,
    a value below ``minimum`` (or not a number) a usage error."""
    return click.option(
        name,
        type=Seconds(minimum),
        default=default,
        show_default=True,
        metavar="SECONDS",
        help=help_text,
    )


def view_options(json_help: str, watch_help: str) -> Callable[[F], F]:
    """``--json`` and ``--watch`` of a command that shows what is in ZooKeeper: once, as
    text or JSON, or again on every change."""

    def decorate(command: F) -> F:
        command = click.option("--watch", is_flag=True, help=watch_help)(command)
        return click.option("--json", "as_json", is_flag=True, help=json_help)(command)

    return decorate


def connect_timeout_option() -> Callable[[F], F]:
    return seconds_option(
        "--connect-timeout",
        minimum=0.1,
        default=5.0,
        help_text="Give up when no ZooKeeper server answers within this time.",
    )


TICK_TIME_ENV = "ZKLOCKS_TICK_TIME"
_TICK_TIME = "zklocks.tick_time"  # where --tick-time waits in ctx.meta for connect()


def _remember_tick_time(ctx: click.Context, param: click.Parameter, value: object) -> None:
    if value is not None:
        ctx.meta[_TICK_TIME] = value


def tick_time_option() -> Callable[[F], F]:
    """``--tick-time`` (or ZKLOCKS_TICK_TIME): kept in the context for ``connect()``, so
    no command needs a parameter it only passes on."""
    return click.option(
        "--tick-time",
        type=Seconds(0.001),
        envvar=TICK_TIME_ENV,
        default=None,
        expose_value=False,
        callback=_remember_tick_time,
        metavar="SECONDS",
        help=(
            "The ZooKeeper servers' tickTime (zoo.cfg's tickTime=2000 is 2). On an "
            "ensemble the lease rule needs it; by default it is asked of the server."
        ),
    )


_STRICT_SERVER = "zklocks.strict_server"  # where --strict-server waits for connect()


def _remember_strict(ctx: click.Context, param: click.Parameter, value: object) -> None:
    if value:
        ctx.meta[_STRICT_SERVER] = True


def strict_server_option() -> Callable[[F], F]:
    """``--strict-server`` (or ZKLOCKS_STRICT_SERVER): kept in the context for
    ``connect()``, as ``--tick-time`` is."""
    return click.option(
        "--strict-server",
        is_flag=True,
        envvar="ZKLOCKS_STRICT_SERVER",
        expose_value=False,
        callback=_remember_strict,
        help=(
            "Refuse ZooKeeper servers whose version has a known transaction-loss bug "
            "(by default: a warning)."
        ),
    )


def connection_options(f: F) -> F:
    """``--hosts`` (or ZKLOCKS_HOSTS), ``--connect-timeout``, ``--tick-time`` and
    ``--strict-server``."""
    return hosts_option()(connect_timeout_option()(tick_time_option()(strict_server_option()(f))))


def check_path(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        return lock_path(value)
    except InvalidPath as error:
        raise click.BadParameter(
            f"{error}. A lock path looks like /locks/orders.", ctx, param
        ) from None


def connect(
    hosts: str,
    connect_timeout: float,
    *,
    session_timeout: float | None = None,
    security: Security | None = None,
) -> Client:
    """A started client, or exit 69 saying which hosts did not answer and what to try
    (or, for a TLS or credentials refusal, what the server refused).

    With ``session_timeout`` (the user's ``--session-timeout``), says so when the server
    granted another one (it clamps to its bounds).
    """
    options = (security or Security()).client_options()
    context = click.get_current_context(silent=True)
    meta = {} if context is None else context.find_root().meta
    tick_time = meta.get(_TICK_TIME)
    try:
        client = Client(
            hosts,
            session_timeout=session_timeout or DEFAULT_SESSION_TIMEOUT,
            connect_timeout=connect_timeout,
            tick_time=tick_time,
            strict_server=bool(meta.get(_STRICT_SERVER)),
            **options,
        )
    except InvalidArgument as error:
        fail(str(error), EX_USAGE)
    try:
        client.start()
    except UnsafeServer as error:
        fail(f"{error} (--strict-server)", EX_UNAVAILABLE)
    except ConnectionFailed as error:
        cause = error.__cause__
        reasons: Sequence[str] = getattr(cause, "reasons", ())
        if getattr(cause, "refused", False):  # it runs, and said no: say what to fix
            found = "".join(f"\n  {reason}" for reason in reasons) or f" {error}"
            # a refused SASL login (or none, where one is required) is a permission error
            status = EX_NOPERM if any("SASL" in reason for reason in reasons) else EX_UNAVAILABLE
            fail(
                f"cannot connect to ZooKeeper at {hosts}:{found}{tls_hints(reasons)}"
                f"{sasl_hints(reasons)}",
                status,
            )
        fail(unreachable_message(hosts, connect_timeout, reasons), EX_UNAVAILABLE)
    except InvalidArgument as error:  # e.g. a chroot that does not exist on the server
        if isinstance(error, TickTimeBelowServers):
            # the servers' session bounds contradict --tick-time: no lease would be safe
            fail(f"--tick-time {tick_time:g}: {error}", EX_CONFIG)
        fail(f"--hosts {hosts}: {error}", EX_USAGE)
    granted = client.session_timeout
    if session_timeout is not None and abs(granted - session_timeout) > 0.0005:
        click.echo(
            f"zklocks: the server granted a session timeout of {granted:g} s, not the "
            f"{session_timeout:g} s asked for (it keeps sessions between its "
            "minSessionTimeout and maxSessionTimeout)",
            err=True,
        )
    return client


@contextlib.contextmanager
def client_for(
    verb: str, path: str, hosts: str, connect_timeout: float, security: Security
) -> Iterator[Client]:
    """A client for one command's work on ``path``, stopped on every way out.

    A library error inside the body ends the command as ``zklocks: cannot VERB PATH:
    why``: exit 77 when ZooKeeper's ACL refused us, else 1. One place for what the
    read-only and administrator commands each said the same way.
    """
    client = connect(hosts, connect_timeout, security=security)
    try:
        yield client
    except AccessDenied as error:
        fail(cannot(verb, path, error), EX_NOPERM)
    except LockError as error:  # ClientClosed among them
        fail(cannot(verb, path, error))
    finally:
        client.stop()


# The library's TLS reasons name its own arguments (ssl=); the command line's options.
_TLS_HINTS = (
    ("did not verify", "Trust the CA that signed it with --tls-ca FILE."),
    ("client certificate", "Present one with --tls-cert FILE --tls-key FILE."),
    ("speaks TLS", "Connect with --tls (or --tls-ca FILE)."),
    ("plaintext", "Leave out --tls (and ZKLOCKS_TLS*), or give the server a TLS port."),
)


def arm_change_watch(client: Client, path: str) -> threading.Event:
    """An event set when a contender joins or leaves ``path`` (or ``path`` is created).

    Arm it, *then* list the contenders, then wait on it: a change after the listing
    fires the watch, so none is missed (nothing polls). Any session trouble also sets
    it, so the caller lists again and sees the error.
    """
    changed = threading.Event()
    if not client.watch_lock(path, lambda _event: changed.set()):
        changed.set()
    return changed


def tls_hints(reasons: Sequence[str]) -> str:
    """The command-line options that fix the TLS refusals in ``reasons``."""
    hints = dict.fromkeys(
        hint for key, hint in _TLS_HINTS if any(key in reason for reason in reasons)
    )
    return "".join(f"\n  - {hint}" for hint in hints)


def sasl_hints(reasons: Sequence[str]) -> str:
    """The command-line options that fix a SASL refusal in ``reasons``."""
    if any("requires authentication" in reason for reason in reasons):
        return "\n  - Log in with --sasl-user USER and --sasl-password-file FILE."
    if any("SASL authentication failed" in reason for reason in reasons):
        return "\n  - Check --sasl-user and the password (--sasl-password-file)."
    return ""


def unreachable_message(hosts: str, connect_timeout: float, reasons: Sequence[str] = ()) -> str:
    found = "".join(f"\n  {reason}" for reason in reasons)
    if found:
        head = f"cannot reach ZooKeeper at {hosts}:{found}\n"
    else:
        head = f"cannot reach ZooKeeper at {hosts} (no answer within {connect_timeout:g} s).\n"
    # more time helps only a host that said nothing; a refusal or a bad name is final
    silent = not reasons or any("did not answer" in reason for reason in reasons)
    return (
        head + "  - Is a server running there? For a local one to try things with, run:\n"
        "        zklocks server\n"
        "  - Elsewhere? Pass --hosts host:port[,host:port...] or set ZKLOCKS_HOSTS."
        + ("\n  - Slow network? Allow more time with --connect-timeout SECONDS." if silent else "")
    )


def not_ignored(signals: Sequence[signal.Signals]) -> tuple[signal.Signals, ...]:
    """The stop signals a command may act on: those it was not started with ignored.

    ``nohup`` starts a command with SIGHUP ignored; a script's ``&`` (a shell without job
    control) and some CI runners, with SIGINT and SIGQUIT ignored. Whoever did asked
    that they stop nothing, so we install no handler for them: they stay ignored for us
    and, across exec, for the command we run, as under a shell (POSIX keeps signals
    ignored on entry to a non-interactive shell ignored) and as Python itself leaves an
    ignored SIGINT. Called before any handler of ours is installed.
    """
    return tuple(sig for sig in signals if signal.getsignal(sig) != signal.SIG_IGN)


@contextlib.contextmanager
def signals_blocked(signals: Sequence[signal.Signals]) -> Iterator[None]:
    """Block ``signals`` in this thread while the body runs: the threads it starts inherit
    the mask, so the command's own handlers (in the main thread) get every stop signal.
    Any that arrived meanwhile are handled when the old mask comes back."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def seconds(value: float) -> str:
    """A duration for people: 0.4s, 12s, 3m05s, 2h07m."""
    value = max(0.0, value)
    if value < 10:
        return f"{value:.1f}s"
    if value < 60:
        return f"{value:.0f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def age(created: dt.datetime, now: dt.datetime | None = None) -> float:
    """Seconds since ``created`` (never negative: clocks of two machines may disagree)."""
    now = now or dt.datetime.now(tz=dt.UTC)
    return max(0.0, (now - created).total_seconds())


class _LibraryLogLines(logging.Handler):
    """The library's log records as the CLI's own ``zklocks: ...`` lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"zklocks: {record.getMessage()}", err=True)
        except Exception:
            self.handleError(record)


VERBOSITY = "zklocks.verbosity"  # ctx.meta key: the group's -v count


def verbose_option(help_text: str) -> Callable[[F], F]:
    """A command's own ``-v`` (``-vv`` for more), counted into ``verbosity``: pass it to
    ``command_verbosity``, which merges it with the group's."""
    return click.option("-v", "--verbose", "verbosity", count=True, help=help_text)


def command_verbosity(own: int) -> int:
    """One meaning for ``-v``: ``zklocks -v run ...`` and ``zklocks run -v ...`` do the
    same (the library's lock and connection events, and the command's own notes); the
    larger count wins. Returns it."""
    meta = click.get_current_context().meta  # one dict shared by the group and command
    level = max(own, int(meta.get(VERBOSITY, 0)))
    if level > meta.get(VERBOSITY, 0):
        show_library_logs(level)
        meta[VERBOSITY] = level
    return level


def show_library_logs(verbosity: int) -> None:
    """Show the library's records: warnings by default, ``-v`` INFO, ``-vv`` DEBUG.

    Replaces the handler a previous call installed (tests invoke the CLI many times).
    """
    logger = logging.getLogger("zklocks")
    for handler in [h for h in logger.handlers if isinstance(h, _LibraryLogLines)]:
        logger.removeHandler(handler)
    logger.addHandler(_LibraryLogLines())
    logger.setLevel((logging.WARNING, logging.INFO)[verbosity] if verbosity < 2 else logging.DEBUG)
