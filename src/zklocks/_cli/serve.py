"""``zklocks serve``: the locks under some paths over HTTP, for monitors and sidecars.

    zklocks serve --listen 127.0.0.1:9112 /locks /elections

Three parts, each in its own module: ``serve_state`` keeps a Board of every lock under the
paths fresh with ZooKeeper watches (no polling); ``serve_http`` answers the routes from
it with the standard library's HTTP server; ``serve_metrics`` turns it into Prometheus
gauges at scrape time. This module parses the options and runs the three until a stop
signal, then stops them in an order that leaves no thread behind: the HTTP server stops
accepting, the client stops (a request waiting on ZooKeeper returns at once), the request
threads are joined, then the feed.

Signals are handled as in ``status --watch``: the handler only posts to the main
thread's inbox, and they are blocked while the threads start so that every thread but
the main one inherits a mask that leaves them to it.
"""

from __future__ import annotations

import math
import queue
import signal
import ssl
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import click

from zklocks import AccessDenied, Client, InvalidPath, LockError
from zklocks._cli.common import (
    CONTEXT,
    EX_NOPERM,
    connect,
    connection_options,
    fail,
    lock_path,
    not_ignored,
    signals_blocked,
)
from zklocks._cli.options import TEXT
from zklocks._cli.security import Security, security_options
from zklocks._cli.serve_http import Server, Sources, https_context
from zklocks._cli.serve_metrics import (
    INSTALL_HINT,
    BoardCollector,
    ServerInfo,
    exposition,
    registry_for,
)
from zklocks._cli.serve_state import Board, Feed, read_one

DEFAULT_LISTEN = "127.0.0.1:9112"
SERVERS_EVERY = 60.0  # seconds between reads of the members' versions (zklocks_server_info)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

SERVE_EPILOG = """\b
Examples:
  zklocks serve /locks                              # http://127.0.0.1:9112
  zklocks serve --listen 0.0.0.0:9112 /locks /elections
  zklocks serve --https-cert cert.pem --https-key key.pem /locks
  curl -s localhost:9112/leader/elections/cron      # {"leader": ..., "token": ...}

\b
Routes (GET): /healthz (200 connected, 503 not), /locks, /locks/PATH (as `zklocks status
PATH --json`), /leader/PATH, /metrics (Prometheus). Needs ZooKeeper 3.6+ (persistent
watches) and prometheus_client (pip install "zklocks[metrics]").
Exit status: 0 stopped by a signal; 1 cannot listen or read the paths; 69 ZooKeeper
unreachable; 77 ZooKeeper's ACL refused; 2 usage error.
"""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1)."""
    host, colon, port_text = value.rpartition(":")
    if not colon:
        host, port_text = "", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"{value!r} is not HOST:PORT with a port from 0 to 65535")
    return host, port


def _listen_option(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    try:
        return parse_listen(value)
    except ValueError as problem:
        raise click.BadParameter(str(problem), ctx, param) from None


def _roots(paths: Sequence[str]) -> tuple[str, ...]:
    roots: list[str] = []
    for path in paths:
        try:
            roots.append(path if path == "/" else lock_path(path))
        except InvalidPath as problem:
            raise click.BadParameter(
                f"{problem}. A path looks like /locks.", param_hint="PATH"
            ) from None
    return tuple(dict.fromkeys(roots))


_FILE = click.Path(exists=True, dir_okay=False)


@click.command(
    context_settings=CONTEXT,
    epilog=SERVE_EPILOG,
    short_help="Serve lock state over HTTP (JSON, Prometheus).",
)
@click.argument("paths", nargs=-1, required=True, type=TEXT, metavar="PATH [PATH]...")
@click.option(
    "--listen",
    type=TEXT,
    default=DEFAULT_LISTEN,
    show_default=True,
    callback=_listen_option,
    metavar="HOST:PORT",
    help="Where to listen. Port 0: any free port (printed at start).",
)
@click.option("--https-cert", type=_FILE, help="Serve HTTPS with this certificate (PEM).")
@click.option("--https-key", type=_FILE, help="The HTTPS certificate's key, if not in it.")
@connection_options
@security_options()
def serve(
    paths: tuple[str, ...],
    listen: tuple[str, int],
    https_cert: str | None,
    https_key: str | None,
    hosts: str,
    connect_timeout: float,
    security: Security,
) -> None:
    """Serve the state of every lock under PATH... over HTTP, kept fresh by ZooKeeper
    watches: JSON for people and sidecars, Prometheus gauges for monitoring.

    Binds 127.0.0.1 unless --listen says otherwise. Runs until Ctrl-C or SIGTERM.
    """
    roots = _roots(paths)
    try:
        import prometheus_client  # noqa: F401 (checked before anything starts)
    except ImportError:
        fail(INSTALL_HINT)
    tls = _tls(https_cert, https_key)
    inbox: queue.SimpleQueue[object] = queue.SimpleQueue()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        inbox.put(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in not_ignored(STOP_SIGNALS)}
    try:
        with signals_blocked(STOP_SIGNALS):  # the threads started here leave the signals to us
            app = _start(roots, listen, tls, hosts, connect_timeout, security)
        # a stop signal that came while starting is in the inbox now: it stops at once
        click.echo(f"zklocks: serving {', '.join(roots)} on {app.url} (Ctrl-C to stop)", err=True)
        while True:
            try:
                inbox.get(timeout=1.0)
                break
            except queue.Empty:
                continue
        app.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if key is not None and cert is None:
        raise click.BadParameter("--https-key needs --https-cert")
    if cert is None:
        return None
    try:
        return https_context(cert, key)
    except (ssl.SSLError, OSError) as problem:
        reason = getattr(problem, "reason", None) or problem
        raise click.BadParameter(f"cannot load {Path(cert).name}: {reason}") from None


def _start(
    roots: tuple[str, ...],
    listen: tuple[str, int],
    tls: ssl.SSLContext | None,
    hosts: str,
    connect_timeout: float,
    security: Security,
) -> App:
    """Listen, connect, read the paths once, start the threads."""
    app = App(roots, tls)
    try:
        app.listen(listen)
        app.connect(connect(hosts, connect_timeout, security=security))
        app.start()
    except BaseException:
        app.stop()
        raise
    return app


class App:
    """The client, the feed and the HTTP server of one ``zklocks serve``, started and
    stopped together (the tests run it in-process)."""

    def __init__(self, roots: Sequence[str], tls: ssl.SSLContext | None = None) -> None:
        self.roots = tuple(roots)
        self.tls = tls
        self.client: Client | None = None
        self.feed: Feed | None = None
        self.server: Server | None = None
        self._serving: threading.Thread | None = None
        self._server_info: list[ServerInfo] = []
        self._servers_at = -math.inf

    def listen(self, address: tuple[str, int]) -> None:
        host, port = address
        try:
            self.server = Server((host, port), self._sources(), self.tls)
        except OSError as problem:
            fail(f"cannot listen on {host}:{port}: {problem.strerror or problem}")

    def connect(self, client: Client) -> None:
        self.client = client

    def start(self) -> None:
        assert self.client is not None and self.server is not None
        self.feed = Feed(self.client, self.roots)
        try:
            self.feed.start()
        except AccessDenied as problem:
            fail(f"cannot read {', '.join(self.roots)}: {problem}", EX_NOPERM)
        except LockError as problem:
            fail(f"cannot serve {', '.join(self.roots)}: {problem}")
        self._serving = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.2}, name="zklocks-serve"
        )
        self._serving.start()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def stop(self) -> None:
        """Idempotent; joins every thread it started."""
        if self._serving is not None and self.server is not None:
            self.server.shutdown()  # no new request is accepted
            self._serving.join()
            self._serving = None
        if self.feed is not None:
            self.feed.stopping()
        if self.client is not None:
            self.client.stop()  # a request or the feed waiting on ZooKeeper returns now
        if self.server is not None:
            self.server.server_close()  # joins the request threads
            self.server = None
        if self.feed is not None:
            self.feed.stop()
            self.feed = None

    def _sources(self) -> Sources:
        collector = BoardCollector(self._board, self._connected, self._servers)
        registry = registry_for(collector)
        return Sources(
            roots=self.roots,
            board=self._board,
            connected=self._connected,
            feed_error=lambda: None if self.feed is None else self.feed.error,
            read_one=self._read_one,
            metrics=lambda: exposition(registry),
        )

    def _board(self) -> Board:
        return Board() if self.feed is None else self.feed.board

    def _connected(self) -> bool:
        return self.client is not None and self.client.connected

    def _servers(self) -> list[ServerInfo]:
        """Each member's version, read again at most once a minute (a scrape then costs
        no connection to the members)."""
        now = time.monotonic()
        if self.client is not None and now - self._servers_at > SERVERS_EVERY:
            self._servers_at = now
            self._server_info = [
                (m.member, m.version, ",".join(i.jira for i in m.losses))
                for m in self.client.server_versions()
                if m.error is None
            ]
        return self._server_info

    def _read_one(self, path: str) -> dict[str, object] | None:
        if self.client is None:
            raise LockError("not connected yet")
        return read_one(self.client, path)
