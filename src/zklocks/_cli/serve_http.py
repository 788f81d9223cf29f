"""The HTTP side of ``zklocks serve``: the routes, and the standard library's server.

Why the standard library's ``ThreadingHTTPServer``: five read-only GET routes answered
from memory need no framework, and a sidecar should not pull one in; a thread per
request keeps a slow client (or a TLS handshake) from holding up the others. HTTP/1.0
(one request per connection) means no idle keep-alive thread outlives a request, so a
stop joins every request thread (``block_on_close``) and leaves none behind.

``route`` decides what to answer (status, type, body) from the Board and two readers;
it does no socket I/O, so every route can be read in one place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from zklocks import AccessDenied, ClientClosed, InvalidPath, LockError
from zklocks._cli.common import lock_path
from zklocks._cli.sanitise import clean
from zklocks._cli.serve_state import (
    Board,
    LockView,
    fresh_state,
    is_election,
    leader_of,
    under,
)
from zklocks._cli.status_view import json_time

log = logging.getLogger("zklocks.serve")

JSON = "application/json"
REQUEST_TIMEOUT = 10.0  # seconds a client may take to send its request (or handshake)


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes


@dataclasses.dataclass(frozen=True)
class Sources:
    """What the routes read: the Board, the connection, and the two ZooKeeper readers
    for a path the Board does not hold (``read_one``) and the metrics (``metrics``)."""

    roots: Sequence[str]
    board: Callable[[], Board]
    connected: Callable[[], bool]
    feed_error: Callable[[], str | None]
    read_one: Callable[[str], dict[str, Any] | None]
    metrics: Callable[[], tuple[bytes, str]]


def _json(status: int, document: object) -> Answer:
    # json.dumps escapes every control and non-ASCII character: foreign text is safe
    return Answer(status, JSON, (json.dumps(document, indent=2) + "\n").encode("ascii"))


def error(status: int, message: str) -> Answer:
    return _json(status, {"error": message})


def route(method: str, target: str, sources: Sources) -> Answer:
    """The answer to ``method target`` (target as the request line has it)."""
    if method not in ("GET", "HEAD"):
        return error(405, f"{clean(method)} is not allowed: every route is read-only (GET)")
    path = urllib.parse.unquote(urllib.parse.urlsplit(target).path, errors="strict")
    if path == "/healthz":
        return _health(sources)
    if path == "/metrics":
        body, content_type = sources.metrics()
        return Answer(200, content_type, body)
    if path in ("/locks", "/locks/"):
        return _json(200, _lock_list(sources.board(), dt.datetime.now(tz=dt.UTC)))
    for prefix, answer in (("/locks/", _one_lock), ("/leader/", _leader)):
        if path.startswith(prefix):
            lock, problem = _lock_argument(path[len(prefix) - 1 :], sources.roots)
            return problem or answer(lock, sources)
    return error(404, f"no route {clean(path)}: try /healthz, /locks, /locks/PATH, "
                 "/leader/PATH or /metrics")  # fmt: skip


def _health(sources: Sources) -> Answer:
    board = sources.board()
    connected = sources.connected()
    document = {
        "connected": connected,
        "listed_at": None if board.listed_at is None else json_time(board.listed_at),
        "locks": len(board.locks),
        "error": sources.feed_error(),
    }
    return _json(200 if connected else 503, document)


def _lock_list(board: Board, now: dt.datetime) -> list[dict[str, Any]]:
    return [_summary(view, now) for view in board.locks.values()]


def _summary(view: LockView, now: dt.datetime) -> dict[str, Any]:
    return {
        "path": view.path,
        "kind": view.kind,
        "holders": len(view.holders),
        "waiters": len(view.waiters),
        "token": view.token,
        "tokens": [holder["token"] for holder in view.holders],
        "oldest_hold_s": round(view.oldest_hold(now), 3),
    }


def _lock_argument(path: str, roots: Sequence[str]) -> tuple[str, Answer | None]:
    try:
        path = lock_path(path)
    except InvalidPath as problem:
        return path, error(400, f"{problem}. A lock path looks like /locks/orders.")
    if not any(under(path, root) for root in roots):
        shown = ", ".join(roots)
        return path, error(404, f"{clean(path)} is not under the paths served here: {shown}")
    return path, None


def _one_lock(path: str, sources: Sources) -> Answer:
    now = dt.datetime.now(tz=dt.UTC)
    view = sources.board().locks.get(path)
    if view is not None:
        return _json(200, fresh_state(view.state, now))
    state, problem = _read(path, sources)
    return problem or _json(200, state)


def _leader(path: str, sources: Sources) -> Answer:
    view = sources.board().locks.get(path)
    if view is None:
        state, problem = _read(path, sources)
        if problem is not None:
            return problem
        view = LockView(path, "", state)
    entries = [*view.holders, *view.waiters]
    if not is_election(view.kind, entries):
        return error(404, f"not an election: {clean(path)} holds a {clean(view.kind or 'lock')}"
                     f"; see /locks{clean(path)}")  # fmt: skip
    return _json(200, leader_of(view))


def _read(path: str, sources: Sources) -> tuple[dict[str, Any], Answer | None]:
    """A fresh ``status --json`` read of a path the Board does not hold."""
    try:
        state = sources.read_one(path)
    except AccessDenied as problem:
        return {}, error(403, f"cannot read {clean(path)}: {problem}")
    except (LockError, ClientClosed) as problem:
        return {}, error(503, f"cannot read {clean(path)}: {problem}")
    if state is None:
        return {}, error(404, f"no such lock: {clean(path)} does not exist")
    return state, None


# -- the server ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: Server
    timeout = REQUEST_TIMEOUT
    server_version = "zklocks-serve"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_POST(self) -> None:
        self._answer()

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _answer(self, *, body: bool = True) -> None:
        try:
            answer = route(self.command, self.path, self.server.sources)
        except UnicodeDecodeError:
            answer = error(400, "the path is not UTF-8 once %-decoded")
        except Exception:
            log.exception("serving %s", clean(self.path))
            answer = error(500, "internal error; see the log of zklocks serve")
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.send_header("Cache-Control", "no-store")
        if answer.status == 405:
            self.send_header("Allow", "GET, HEAD")
        self.end_headers()
        if body:
            self.wfile.write(answer.body)

    def log_message(self, format: str, *args: Any) -> None:
        # the request line is the client's text: escaped before it reaches a terminal
        log.debug("%s %s", clean(self.address_string()), clean(format % args, limit=None))


class Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` on IPv4 or IPv6, optionally HTTPS, that joins its threads
    on close."""

    daemon_threads = False
    block_on_close = True

    def __init__(
        self,
        address: tuple[str, int],
        sources: Sources,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.sources = sources
        self.tls = tls
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[Any, Any]:
        connection, address = super().get_request()
        connection.settimeout(REQUEST_TIMEOUT)
        if self.tls is not None:  # the handshake happens in the request's thread
            connection = self.tls.wrap_socket(
                connection, server_side=True, do_handshake_on_connect=False
            )
        return connection, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError) as problem:
                log.info("TLS handshake with %s failed: %s", client_address[0], problem)
                return
        super().finish_request(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        shown = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{shown}:{port}"


def https_context(cert: str, key: str | None) -> ssl.SSLContext:
    """A server-side TLS context; raises ``ssl.SSLError``/``OSError`` for a bad file."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
