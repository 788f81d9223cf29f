"""ZooKeeper's four-letter words (``srvr``, ``cons``, ``dump``...) on a member's client
port, over TLS when the client uses TLS, and ``srvr``'s answer read.

Blocking and short: one connection per word, which the server answers and closes. The
client reads ``srvr`` once per ensemble and process (its version, against the
known-issues table); ``zklocks doctor`` asks each member directly. Only ``srvr`` is
allowed by a stock server (``4lw.commands.whitelist``); a word it does not allow is
answered with a line saying so, which ``not_allowed`` recognises.
"""

from __future__ import annotations

import contextlib
import socket
import ssl as _ssl
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SrvrAnswer", "ask", "not_allowed", "parse_srvr", "read_srvr", "use_reader"]

_LIMIT = 4 * 1024 * 1024  # a `cons` or `dump` of a busy server can be long


def ask(
    host: str, port: int, word: str, *, ssl: _ssl.SSLContext | None = None, timeout: float = 2.0
) -> str:
    """``word``'s answer from ``host:port`` (``OSError`` if it cannot be asked)."""
    with socket.create_connection((host, port), timeout=timeout) as raw:
        sock = raw if ssl is None else ssl.wrap_socket(raw, server_hostname=host)
        with sock:
            sock.sendall(word.encode("ascii"))
            chunks: list[bytes] = []
            size = 0
            with contextlib.suppress(_ssl.SSLError):  # a TLS peer may hang up uncleanly
                while size < _LIMIT and (chunk := sock.recv(65536)):
                    chunks.append(chunk)
                    size += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def not_allowed(answer: str) -> bool:
    """The server's refusal of a word ``4lw.commands.whitelist`` leaves out."""
    return "is not executed because it is not in the whitelist" in answer


@dataclass(frozen=True)
class SrvrAnswer:
    """What ``srvr`` says of a member: its version string and its mode."""

    version: str  # "3.8.0" (the build suffix cut off)
    mode: str  # "standalone", "leader", "follower", "observer", or "" if not said


def parse_srvr(answer: str) -> SrvrAnswer | None:
    """``Zookeeper version: 3.8.0-5a02a05..., built on ...`` and ``Mode: follower``
    lines; None if the answer has no version line (not a ZooKeeper, or refused)."""
    version = mode = None
    for line in answer.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "zookeeper version":
            version = value.strip().split(",", 1)[0].split("-", 1)[0].strip()
        elif key == "mode":
            mode = value.strip()
    if not version:
        return None
    return SrvrAnswer(version, mode or "")


Reader = Callable[[str, int, "_ssl.SSLContext | None", float], "SrvrAnswer | None"]


def _read_srvr(
    host: str, port: int, ssl: _ssl.SSLContext | None, timeout: float
) -> SrvrAnswer | None:
    return parse_srvr(ask(host, port, "srvr", ssl=ssl, timeout=timeout))


_reader: Reader = _read_srvr


def read_srvr(
    host: str, port: int, ssl: _ssl.SSLContext | None = None, timeout: float = 2.0
) -> SrvrAnswer | None:
    """A member's ``srvr``, read (``OSError`` if unreachable), through the reader that
    ``use_reader`` installed, if any."""
    return _reader(host, port, ssl, timeout)


def use_reader(reader: Reader | None) -> Reader:
    """The test seam on the version read: every ``srvr`` read of this process goes to
    ``reader`` (None: the real one again); returns the reader it replaces. A test feeds
    a version string from the known-issues table this way, on a real server."""
    global _reader
    previous, _reader = _reader, reader or _read_srvr
    return previous
