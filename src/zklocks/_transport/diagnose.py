"""Why a connection attempt failed, in words a person can act on.

A host that refuses, a name that does not resolve and a port where something other
than ZooKeeper answers need three different fixes, and the protocol's own error ("bad
frame length 1213486160") names none of them. The connection reports each host's
failure once, with these words, and ``ConnectionFailed`` lists them.
"""

from __future__ import annotations

import asyncio
import socket
import ssl as _ssl

TLS = "TLS (a TLS port: connect with TLS)"

# What the first bytes of a non-ZooKeeper answer most likely are.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"HTTP/", "HTTP"),
    (b"\x15\x03", TLS),
    (b"\x16\x03", TLS),
    (b"SSH-", "SSH"),
    (b"-ERR", "Redis"),
    (b"-NOAUTH", "Redis"),
    (b"+OK", "Redis"),
    (b"220", "SMTP or FTP"),
    (b"* OK", "IMAP"),
    (b"<", "HTML or XML"),
    (b"{", "JSON"),
)


def looks_like(data: bytes) -> str | None:
    """The protocol that ``data`` (the first bytes a server sent) belongs to, if known."""
    for prefix, name in _SIGNATURES:
        if data.startswith(prefix):
            return name
    return None


def not_zookeeper(host: str, data: bytes) -> str:
    guess = looks_like(data)
    text = f"{host} answered, but not as ZooKeeper"
    return f"{text}; it looks like {guess}" if guess else text


def definite(error: BaseException) -> bool:
    """Whether waiting cannot change this failure's cause: a refused connection (nothing
    listens) or a name that does not resolve. A silent host may still answer."""
    return isinstance(error, ConnectionRefusedError | socket.gaierror)


def failure(host: str, error: BaseException, timeout: float) -> str:
    """One attempt's failure as a sentence that starts with ``host``."""
    if isinstance(error, ConnectionRefusedError):
        return f"{host} refused the connection (nothing listens on that port)"
    if isinstance(error, socket.gaierror):
        return f"{host}: unknown host name (it does not resolve)"
    if isinstance(error, asyncio.TimeoutError | TimeoutError):
        return f"{host} did not answer within {timeout:.3g} s"
    if isinstance(error, ConnectionResetError):
        return f"{host} reset the connection"
    if isinstance(error, OSError):
        return f"{host}: {error.strerror or error}"
    return f"{host} closed the connection before a session was made ({error})"


# What OpenSSL says when the other end answered our ClientHello with bytes that are not
# TLS: a plaintext server. One cause, several words: 3.0 says WRONG_VERSION_NUMBER, or
# PACKET_LENGTH_TOO_LONG when the bytes look like a record header with a huge length;
# 3.2 and later (Debian 13 has 3.5) say RECORD_LAYER_FAILURE for the latter, and a
# Python whose error table predates an OpenSSL code leaves ``reason`` None with only the
# text "[SSL] record layer failure". Matched on ``reason``, the code's name, which each
# OpenSSL keeps; the text only where Python could not name the code.
_NOT_TLS_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "PACKET_LENGTH_TOO_LONG",
        "RECORD_LAYER_FAILURE",
        "UNKNOWN_PROTOCOL",
        "HTTP_REQUEST",
        "HTTPS_PROXY_REQUEST",
    }
)


def not_tls(error: _ssl.SSLError) -> bool:
    """Whether this handshake failure means the other end does not speak TLS at all."""
    reason = error.reason
    if reason is None:  # a code this Python cannot name: the text is all there is
        return "record layer failure" in str(error).lower()
    return reason.upper() in _NOT_TLS_REASONS


def answered_in_tls(error: _ssl.SSLError) -> bool:
    """Whether a handshake that failed with ``error`` still heard TLS from the other end:
    an alert (a server that wants a client certificate, say) is TLS; a hang-up (EOF) and
    bytes that are not TLS are not."""
    if isinstance(error, _ssl.SSLEOFError | _ssl.SSLZeroReturnError):
        return False
    return not not_tls(error)


def connect_failure_reason(error: BaseException) -> str | None:
    """Why one connection attempt failed, when it is more than "no answer" (TLS mostly).

    None for the usual reasons (refused, unreachable, timed out): the caller's message
    already covers those.
    """
    if isinstance(error, _ssl.SSLCertVerificationError):
        return (
            f"TLS: the server's certificate did not verify ({error.verify_message}); "
            "trust the CA that signed it (ssl=ssl.create_default_context(cafile=...))"
        )
    if isinstance(error, _ssl.SSLError):
        reason = str(error.reason or error)
        if not_tls(error):
            return f"TLS handshake failed ({reason}): is this port plaintext? (leave out ssl=)"
        if "CERTIFICATE_REQUIRED" in reason.upper() or "BAD_CERTIFICATE" in reason.upper():
            return (
                f"TLS: the server refused our client certificate or its absence ({reason}); "
                "it requires one it trusts (mutual TLS): load one with "
                "context.load_cert_chain"
            )
        if "HANDSHAKE_FAILURE" in reason.upper():
            # TLS 1.2 has no certificate_required alert: a server that needs a client
            # certificate and gets none (Debian 12's ZooKeeper on OpenJDK 17) sends this
            # catch-all, which also means no TLS version or cipher in common.
            return (
                f"TLS handshake failed ({reason}): most likely the server requires a client "
                "certificate it trusts (mutual TLS): load one with context.load_cert_chain; "
                "otherwise we share no TLS version or cipher with it"
            )
        return f"TLS handshake failed ({reason})"
    return None
