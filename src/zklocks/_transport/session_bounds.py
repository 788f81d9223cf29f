"""What the servers' session bounds tell about their tickTime, learnt from two handshakes.

A ZooKeeper server clamps every requested session timeout to
[minSessionTimeout, maxSessionTimeout], which default to 2 and 20 ticks. Those bounds
are the one fact about tickTime that a stock server gives every client: since 3.5.3 the
``conf`` four-letter word is refused unless the operator allows it, and the AdminServer
is often off or unpublished (Kafka's bundled configuration, a Kubernetes Service on 2181
alone). So we ask for a 1 ms and a 2^31-1 ms session in two throwaway handshakes (each
closed at once, nothing else sent): the answers are the two bounds.

Under the default bounds tickTime = min/2 = max/20. An operator may *raise* a bound;
then that bound over-states tickTime, which only makes the lease rule more careful. So
the larger of min/2 and max/20 is a safe upper bound on tickTime unless an operator
lowered *both* bounds below their defaults (docs/locks.md, "What this assumes"). When
the two agree, they are taken as exact, and a tickTime below them is a contradiction.

The user's own handshake reveals one bound whenever its timeout was clamped, which saves
that probe. What is learnt is kept once per ensemble (its set of hosts) per process.

Cost, per ensemble per process: two TCP (or TLS) connections, and two createSession and
two closeSession transactions (four in all); a few milliseconds at ``start()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as _ssl
import threading
from dataclasses import dataclass

from zklocks._protocol.session import Established, Session

__all__ = ["SessionBounds", "forget_all", "known_bounds", "learn_bounds", "remember_bounds"]

log = logging.getLogger("zklocks.connection")

SHORTEST_ASK_MS = 1  # asks for the server's minSessionTimeout
LONGEST_ASK_MS = 2**31 - 1  # asks for its maxSessionTimeout
_DEFAULT_MIN_TICKS = 2
_DEFAULT_MAX_TICKS = 20
_CLOSE_WAIT = 0.5  # seconds a probe waits for its closeSession's answer


@dataclass(frozen=True)
class SessionBounds:
    """The shortest and longest session timeout (ms) the servers grant, and who said so."""

    shortest_ms: int
    longest_ms: int
    source: str  # "HOST:PORT"

    @property
    def tick_bound(self) -> float:
        """The largest tickTime (seconds) the bounds allow, unless both were lowered."""
        return (
            max(self.shortest_ms / _DEFAULT_MIN_TICKS, self.longest_ms / _DEFAULT_MAX_TICKS) / 1000
        )

    @property
    def agree(self) -> bool:
        """min/2 and max/20 name the same tickTime: the bounds are (very likely) defaults."""
        return self.shortest_ms * _DEFAULT_MAX_TICKS == self.longest_ms * _DEFAULT_MIN_TICKS

    def describe(self) -> str:
        return (
            f"session bounds of {self.source}: {self.shortest_ms / 1000:g} s to "
            f"{self.longest_ms / 1000:g} s"
        )


_known: dict[frozenset[str], SessionBounds] = {}
_known_lock = threading.Lock()


def _key(hosts: list[str]) -> frozenset[str]:
    return frozenset(hosts)


def known_bounds(hosts: list[str]) -> SessionBounds | None:
    """What this process learnt already of the ensemble at ``hosts`` (``host:port``)."""
    with _known_lock:
        return _known.get(_key(hosts))


def remember_bounds(hosts: list[str], bounds: SessionBounds) -> None:
    with _known_lock:
        _known[_key(hosts)] = bounds


def forget_all() -> None:
    """Forget every ensemble's bounds (tests that start ensembles on reused ports)."""
    with _known_lock:
        _known.clear()


async def _granted(host: str, port: int, ssl: _ssl.SSLContext | None, ask_ms: int) -> int:
    """The timeout (ms) a new session asking for ``ask_ms`` is granted; the session is
    closed at once (a server that refuses the close expires it after that timeout)."""
    session = Session(timeout_ms=ask_ms)
    reader, writer = await asyncio.open_connection(
        host, port, ssl=ssl, server_hostname=host if ssl is not None else None
    )
    try:
        writer.write(session.connect())
        await writer.drain()
        granted: int | None = None
        while granted is None:
            data = await reader.read(4096)
            if not data:
                raise ConnectionError("the server hung up on the handshake")
            for event in session.receive(data):
                if isinstance(event, Established):
                    granted = event.timeout_ms
        if granted <= 0:  # a server that refused the session
            raise ConnectionError("the server granted no session")
        writer.write(session.close_session(None))
        await writer.drain()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.read(4096), _CLOSE_WAIT)
        return granted
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def learn_bounds(
    address: tuple[str, int],
    ssl: _ssl.SSLContext | None,
    timeout: float,
    requested_ms: int,
    granted_ms: int,
) -> SessionBounds | str:
    """The session bounds of the server at ``address``, or why they could not be learnt
    (a probe failed, or did not answer within ``timeout``).

    ``requested_ms``/``granted_ms`` are the user's own handshake: clamped down, the grant
    is the longest bound; clamped up, the shortest; either saves one probe.
    """
    host, port = address
    shortest = granted_ms if granted_ms > requested_ms else None
    longest = granted_ms if granted_ms < requested_ms else None
    asks = [
        ask
        for ask, known in ((SHORTEST_ASK_MS, shortest), (LONGEST_ASK_MS, longest))
        if known is None
    ]
    try:
        answers = await asyncio.wait_for(
            asyncio.gather(*(_granted(host, port, ssl, ask) for ask in asks)), timeout
        )
    except asyncio.TimeoutError:
        return f"{host}:{port} did not answer the session-bounds handshakes within {timeout:g} s"
    except Exception as exc:  # refused, reset, TLS, a malformed answer (MarshallingError)
        log.debug("asking %s:%s for its session bounds: %r", host, port, exc)
        return (
            f"the session-bounds handshakes with {host}:{port} failed ({exc or type(exc).__name__})"
        )
    found = dict(zip(asks, answers, strict=True))
    shortest = shortest if shortest is not None else found[SHORTEST_ASK_MS]
    longest = longest if longest is not None else found[LONGEST_ASK_MS]
    if not 0 < shortest <= longest:
        return f"{host}:{port} granted sessions of {shortest} ms and {longest} ms: no bounds"
    return SessionBounds(shortest, longest, f"{host}:{port}")
