"""Telling a TLS port from a plaintext one, on OpenSSL 3.0 (Debian 12) and 3.5 (Debian 13).

``speaks_tls`` asks a port with a ClientHello, against local sockets that act as the
servers did: a TLS server that never answers our close_notify (ZooKeeper 3.9 on OpenJDK
21), and a plaintext one that answers with bytes that are not TLS. The words OpenSSL
uses for the latter changed between versions; both are fed to the classification.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zklocks._transport import diagnose
from zklocks._transport.dialer import speaks_tls
from zklocks.server import make_tls_files


def _serve_once(handle: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """Accept one connection on 127.0.0.1 in a thread, ``handle(conn, done)`` it; yield
    the port. ``done`` is set when the test is over."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            handle(conn, done)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()
        thread.join(5)


@pytest.fixture
def tls_port_that_ignores_close_notify(tmp_path: Path) -> Iterator[int]:
    files = make_tls_files(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.server_keystore)

    def handle(conn: socket.socket, done: threading.Event) -> None:
        with context.wrap_socket(conn, server_side=True):  # the handshake, then silence
            done.wait(60)

    yield from _serve_once(handle)


def test_a_tls_port_is_named_at_once_though_it_never_answers_close_notify(
    tls_port_that_ignores_close_notify: int,
) -> None:
    began = time.monotonic()
    assert asyncio.run(speaks_tls("127.0.0.1", tls_port_that_ignores_close_notify, 10.0))
    assert time.monotonic() - began < 2.0  # not asyncio's 30 s ssl_shutdown_timeout


@pytest.mark.parametrize(
    "answer",
    [b"\x00\x00\x00\x10" + b"\x00" * 16, b"\x16\x03\x03\x7f\xff" + b"\x00" * 64],
    ids=["zookeeper-frame", "huge-record-length"],
)
def test_a_plaintext_answer_is_not_tls_on_this_openssl(answer: bytes) -> None:
    def handle(conn: socket.socket, done: threading.Event) -> None:
        conn.recv(5)
        conn.sendall(answer)
        done.wait(10)

    for port in _serve_once(handle):
        assert asyncio.run(speaks_tls("127.0.0.1", port, 10.0)) is False


def _ssl_error(
    reason: str | None, text: str, cls: type[ssl.SSLError] = ssl.SSLError
) -> ssl.SSLError:
    """An ``ssl.SSLError`` as the ssl module raises it (it sets ``reason`` and ``library``)."""
    error = cls(1, f"{text} (_ssl.c:1029)")
    error.reason = reason
    error.library = "SSL"
    return error


# (OpenSSL 3.0's words, OpenSSL 3.5's words) for one cause, as each says it
NOT_TLS = [
    _ssl_error("WRONG_VERSION_NUMBER", "[SSL: WRONG_VERSION_NUMBER] wrong version number"),
    _ssl_error("PACKET_LENGTH_TOO_LONG", "[SSL: PACKET_LENGTH_TOO_LONG] packet length too long"),
    _ssl_error("RECORD_LAYER_FAILURE", "[SSL: RECORD_LAYER_FAILURE] record layer failure"),
    _ssl_error(None, "[SSL] record layer failure"),  # a Python that cannot name the code
]
TLS_ALERTS = [
    _ssl_error(
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
        "[SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] sslv3 alert handshake failure",
    ),
    _ssl_error(
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
        "[SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] ssl/tls alert handshake failure",
    ),
    _ssl_error(
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required",
    ),
]


@pytest.mark.parametrize("error", NOT_TLS, ids=lambda e: str(e.reason))
def test_every_wording_of_a_plaintext_answer_is_named_as_one(error: ssl.SSLError) -> None:
    assert diagnose.not_tls(error) and not diagnose.answered_in_tls(error)
    message = diagnose.connect_failure_reason(error)
    assert message is not None and "plaintext" in message and "ssl=" in message


@pytest.mark.parametrize("error", TLS_ALERTS, ids=lambda e: str(e))
def test_an_alert_in_either_wording_is_tls(error: ssl.SSLError) -> None:
    assert diagnose.answered_in_tls(error) and not diagnose.not_tls(error)
    message = diagnose.connect_failure_reason(error)
    assert message is not None and "client certificate" in message


def test_a_hang_up_in_the_handshake_is_not_tls() -> None:
    eof = _ssl_error(
        "UNEXPECTED_EOF_WHILE_READING", "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF", ssl.SSLEOFError
    )
    assert not diagnose.answered_in_tls(eof)
