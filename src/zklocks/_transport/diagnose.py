"""Why a connection attempt failed, in words a person can act on.

A host that refuses, a name that does not resolve and a port where something other
than ZooKeeper answers need three different fixes, and the protocol's own error ("bad
frame length 1213486160") names none of them. The connection reports each host's
failure once, with these words, and ``ConnectionFailed`` lists them.
"""

from __future__ import annotations

import asyncio
import socket

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
