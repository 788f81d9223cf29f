"""Which server to dial next, how long to wait for it, and why it failed.

Theory of operation
-------------------
Hosts are tried in turn (shuffled once at start), starting with the one after the host
that failed. Each attempt is bounded by ``connect_timeout`` and by a share of the time
left, so a member that accepts TCP and never answers cannot use it all. When every host
has failed once, the search pauses (jittered, doubling, never past the time left).

Each host's failure is said once per outage, in words a person can act on (refused,
unknown name, silent, not ZooKeeper, a TLS refusal or mismatch; see ``diagnose.py``).
At start, a round in which every host failed for such a *definite* reason ends the
search at once: waiting will not change it. A plaintext handshake that a server ends by
hanging up without a byte is either a TLS-only port or a member without quorum; one TLS
probe of that port (asked once) tells them apart.

The ``Dialer`` owns what outlives one search (the host order, the failures reported this
outage, the reconnect backoff); a ``Search`` is one ``establish`` round's bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl as _ssl
from collections.abc import Iterable

from zklocks._protocol.errors import ConnectionFailedError, ConnectionLossError
from zklocks._transport import diagnose as _diagnose
from zklocks._transport.wire import Wire

__all__ = ["Dialer", "Search"]

log = logging.getLogger("zklocks.connection")

_BACKOFF_MIN = 0.02
_BACKOFF_MAX = 1.0


async def speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` answers a TLS ClientHello with TLS (its certificate unchecked:
    only the protocol is asked). A TLS-only ZooKeeper port hangs up on a plaintext
    handshake without a byte, exactly as a member without quorum does; this tells them
    apart."""
    context = _ssl.SSLContext(_ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = _ssl.CERT_NONE
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context), timeout
        )
    except _ssl.SSLError as exc:
        return _diagnose.answered_in_tls(exc)
    except (TimeoutError, OSError):
        return False
    # Abort: no close_notify, no wait for the server's. ZooKeeper 3.9 on OpenJDK 21
    # (Debian 13) never answers ours, and a graceful close then waited asyncio's
    # ssl_shutdown_timeout, 30 s, before start() could name the TLS port.
    writer.transport.abort()
    return True


class Dialer:
    """The servers of one connection, in the order they are tried, and their failures."""

    def __init__(
        self,
        addresses: list[tuple[str, int]],
        ssl: _ssl.SSLContext | None,
        connect_timeout: float | None,
    ) -> None:
        self.addresses = addresses
        self.ssl = ssl
        self._connect_timeout = connect_timeout
        self._host_index = 0
        self._failures: dict[str, str] = {}  # host -> why it first failed (this outage)
        self._reported: set[tuple[str, str]] = set()  # (host, kind of failure) logged
        self._refusals: set[str] = set()  # hosts that refused us (TLS), this outage
        self._tls_ports: dict[str, bool] = {}  # host -> answers TLS (asked once, at start)
        self._reconnect_backoff = _BACKOFF_MIN

    def next_host(self) -> tuple[str, int]:
        host, port = self.addresses[self._host_index % len(self.addresses)]
        self._host_index += 1
        return host, port

    def attempt_timeout(self, session_timeout: float) -> float:
        """How long one connection attempt may wait for the handshake's answer.

        At most a third of the session timeout even with a single host: a server that
        accepts TCP but never answers (one still starting after a restart, a frozen
        process) must leave time for a second attempt before the session expires.
        """
        if self._connect_timeout is not None:
            return self._connect_timeout
        return max(session_timeout / max(len(self.addresses), 3), 0.1)

    def connected(self) -> None:
        """A session is live: the next outage reports its failures afresh."""
        self._failures.clear()
        self._reported.clear()
        self._refusals.clear()

    def pause_after_drop(self, lived: bool) -> float | None:
        """After a drop: None (reconnect at once) if the connection had lived, else how
        long to wait: jittered, doubling up to ``_BACKOFF_MAX``. A server that answers the
        handshake and then breaks every connection (a protocol error, a proxy gone wrong)
        would otherwise cost a reconnect per round trip."""
        if lived:
            self._reconnect_backoff = _BACKOFF_MIN
            return None
        backoff = self._reconnect_backoff
        self._reconnect_backoff = min(backoff * 2, _BACKOFF_MAX)
        return random.uniform(backoff / 2, backoff)

    def session_ended(self) -> None:
        """The session expired: the next connection asks for a new one at once."""
        self._reconnect_backoff = _BACKOFF_MIN

    async def failed(
        self,
        host: str,
        port: int,
        error: BaseException,
        wire: Wire,
        timeout: float,
        elapsed: float,
        last_host: str | None,
    ) -> str | None:
        """An attempt failed: say why (once per host and kind, this outage); return the
        reason when it is definite (see ``_diagnose.definite``), else None.

        ``last_host`` is the host of the last session, None before the first one: then
        a silent hang-up may be a TLS-only port, and the report is INFO (``start()``
        raises with these reasons); WARNING for a client that was connected.
        """
        name = f"{host}:{port}"
        tls_port = False
        if self._hung_up_plain(error, wire, last_host):
            if name not in self._tls_ports:
                left = timeout - elapsed
                self._tls_ports[name] = await speaks_tls(host, port, max(left, 0.001))
            tls_port = self._tls_ports[name]
        return self._report(name, error, wire, timeout, tls_port, last_host)

    def _report(
        self,
        host: str,
        error: BaseException,
        wire: Wire,
        limit: float,
        tls_port: bool,
        last_host: str | None,
    ) -> str | None:
        tls = None if wire.foreign is not None else self._tls_failure(error, wire, tls_port)
        if wire.foreign is not None:
            text, kind = _diagnose.not_zookeeper(host, wire.foreign), "foreign"
            sure = _diagnose.looks_like(wire.foreign) == _diagnose.TLS
        elif tls is not None:
            text, kind = f"{host}: {tls}", "tls"
            self._refusals.add(host)
            sure = True
        else:
            text, kind = _diagnose.failure(host, error, limit), type(error).__name__
            sure = _diagnose.definite(error)
        self._failures.setdefault(host, text)
        if (host, kind) not in self._reported:
            self._reported.add((host, kind))
            log.log(logging.WARNING if last_host else logging.INFO, "%s", text)
        return text if sure else None

    def _hung_up_plain(self, error: BaseException, wire: Wire, last_host: str | None) -> bool:
        """A plaintext client's first handshake ended by a silent hang-up: a TLS-only port,
        or a member that is not serving (no quorum yet). ``speaks_tls`` tells which."""
        return (
            self.ssl is None
            and last_host is None
            and isinstance(error, ConnectionLossError)
            and wire.foreign is None
        )

    def _tls_failure(self, error: BaseException, wire: Wire, tls_port: bool) -> str | None:
        """What a TLS refusal (or a TLS mismatch, either way) means, else None."""
        reason = _diagnose.connect_failure_reason(error)
        if reason is None and wire.error is not None:
            reason = _diagnose.connect_failure_reason(wire.error)
        if reason is None and tls_port:
            reason = (
                "the server hung up on our plaintext handshake and speaks TLS on that port; "
                "connect with ssl=True or an ssl.SSLContext"
            )
        if (
            reason is None
            and self.ssl is not None
            and wire.transport is None  # the TLS handshake did not complete
            and isinstance(error, ConnectionResetError | ConnectionAbortedError | _ssl.SSLEOFError)
        ):
            reason = (
                "the server hung up during the TLS handshake (a plaintext port? "
                "then leave out ssl=, or serve TLS on that port)"
            )
        return reason

    def reasons(self, hosts: Iterable[str]) -> list[str]:
        """Why each of ``hosts`` failed first this outage (those that did)."""
        return [self._failures[h] for h in hosts if h in self._failures]

    def refused_any(self, hosts: Iterable[str]) -> bool:
        """Did any of ``hosts`` refuse us (TLS) this outage? Then waiting will not help."""
        return bool(self._refusals & set(hosts))

    def search(self) -> Search:
        return Search(self)


class Search:
    """One search for a server (``Connection._establish``): the hosts tried, and whether
    every failure of this round so far had a definite cause."""

    def __init__(self, dialer: Dialer) -> None:
        self._dialer = dialer
        self.tried: dict[str, None] = {}
        self._failures = 0
        self._backoff = _BACKOFF_MIN
        # This round's failures, when every one so far had a definite cause (refused,
        # unknown name, a TLS refusal or mismatch); None once a host was silent or
        # answered. At start, a round of definite failures ends the search at once.
        self._definite: dict[str, str] | None = {}

    def next_attempt(
        self, now: float, bounds: tuple[float | None, ...], session_timeout: float
    ) -> tuple[str, int, float]:
        """The next host, and how long to give it: a share of the time left before each
        of ``bounds``, so one member that accepts TCP but never answers (a frozen
        process) leaves time for the others."""
        dialer = self._dialer
        host, port = dialer.next_host()
        self.tried[f"{host}:{port}"] = None
        count = len(dialer.addresses)
        limit = dialer.attempt_timeout(session_timeout)
        left_in_round = count - self._failures % count
        for bound in bounds:
            if bound is not None:
                limit = min(limit, (bound - now) / left_in_round)
        return host, port, max(limit, 0.001)

    def out_of_time(self) -> ConnectionFailedError:
        """The start deadline passed: every host tried, and why each failed."""
        tried = self.tried
        reasons = self._dialer.reasons(tried)
        message = "no ZooKeeper server answered" + (
            f" ({'; '.join(reasons)})" if reasons else f" (tried {', '.join(tried)})"
        )
        refused = self._dialer.refused_any(tried)
        return ConnectionFailedError(
            message, hosts=tuple(tried), reasons=tuple(reasons), refused=refused
        )

    def session_ended(self) -> None:
        """The server said the session expired; a new connection asks for a new one."""
        self._backoff = _BACKOFF_MIN
        self._dialer.session_ended()

    def failed(self, name: str, reason: str | None, starting: bool) -> float | None:
        """Count a failed attempt (``reason``: its definite cause, else None). When the
        round is over, the pause before the next (to be cut to the time left), else None.

        Raises ``ConnectionFailedError`` at start (``starting``) when every host of the
        round failed for a reason that waiting will not change.
        """
        self._failures += 1
        if self._definite is not None and reason is not None:
            self._definite[name] = reason
        else:
            self._definite = None
        if self._failures % len(self._dialer.addresses) != 0:
            return None
        definite = self._definite
        if starting and definite:
            raise ConnectionFailedError(
                "no ZooKeeper server could be reached (" + "; ".join(definite.values()) + ")",
                hosts=tuple(self.tried),
                reasons=tuple(definite.values()),
                refused=self._dialer.refused_any(definite),
            )
        self._definite = {}
        backoff = self._backoff
        self._backoff = min(backoff * 2, _BACKOFF_MAX)
        return random.uniform(backoff / 2, backoff)
