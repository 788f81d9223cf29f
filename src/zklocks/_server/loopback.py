"""Loopback ports for a local ZooKeeper, and the four-letter words we ask on them."""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
from pathlib import Path

__all__ = ["ephemeral_range", "four_letter", "free_ports", "port_is_free"]


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections (Linux's default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports outside the kernel's ephemeral range.

    Why outside: a port picked now is bound by a JVM only later. A port from the
    ephemeral range (what ``bind(port 0)`` gives) can meanwhile become the local end of
    any outgoing connection on the machine (a member dialling a peer, a proxy, a
    client), and then the member cannot bind it: a client port fails the start, and a
    taken quorum port makes the member unable to lead. Ports outside that range are
    only ever taken by someone binding them on purpose. The sockets stay bound until
    all are picked, so the picks are distinct.
    """
    low, high = ephemeral_range()
    pool = [*range(20000, min(low, 32768)), *range(max(high + 1, 61000), 65536)]
    if len(pool) < count:  # a machine whose ephemeral range covers everything
        pool = []
    rng = random.SystemRandom()
    with contextlib.ExitStack() as stack:
        picked: list[int] = []
        for port in rng.sample(pool, min(len(pool), 4 * count + 64)):
            if len(picked) == count:
                break
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            picked.append(port)
        while len(picked) < count:
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            picked.append(sock.getsockname()[1])
        return picked


def port_is_free(port: int) -> bool:
    """Whether the JVM could bind ``port`` now (it binds with ``SO_REUSEADDR``)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def four_letter(port: int, word: str, timeout: float, context: ssl.SSLContext | None = None) -> str:
    """Ask ``word`` (``ruok``, ``srvr``, ``conf``...) on 127.0.0.1:``port``, over TLS
    when ``context`` is given; the server answers and then closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        sock = raw if context is None else context.wrap_socket(raw)
        with sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            with contextlib.suppress(ssl.SSLError):  # a TLS peer may hang up uncleanly
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")
