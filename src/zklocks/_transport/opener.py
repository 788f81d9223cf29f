"""Getting the session onto a connection: dial, handshake, log in; expire on the way.

The supervisor (``Connection``) asks for a live session after start and after every
drop; the ``Opener`` tries hosts (in the ``Dialer``'s order, each with its share of the
time left) until one completes the handshake and, with ``sasl=``, the SASL exchange. It
owns the attempt under way, the aborted attempts whose sockets are still closing, and
when and where the last handshake happened.

* **Expiry.** The session is LOST when a server says so during the handshake, or when a
  full session timeout has passed since the last answered request was sent without a
  connection coming back (the server must have expired it by then: it cannot have
  heard from us later than we sent). The connection is told (``on_expired``), and the
  search goes on for a new session.
* **Backoff.** A connection that died young is followed by a capped, jittered, doubling
  pause before the next search (``Dialer.pause_after_drop``), never past the expiry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from zklocks._protocol.errors import ConnectionFailedError, ZooKeeperError
from zklocks._protocol.records import GetSASLRequest
from zklocks._protocol.session import Established, Expired, Session
from zklocks._transport.auth import sasl_login
from zklocks._transport.dialer import Dialer
from zklocks._transport.lease_proofs import LeaseProofs
from zklocks._transport.liveness import Liveness
from zklocks._transport.outgoing import Outgoing
from zklocks._transport.sasl import SASL, SaslFailed
from zklocks._transport.wire import Wire

__all__ = ["Opener", "session_timeout_of"]

log = logging.getLogger("zklocks.connection")


def session_timeout_of(session: Session) -> float:
    """The negotiated session timeout in seconds (the requested one before that)."""
    ms = session.timeout_ms or session.requested_timeout_ms
    return ms / 1000


class Opener:
    """Dials until a session is live on a wire; one attempt at a time."""

    def __init__(
        self,
        session: Session,
        out: Outgoing,
        liveness: Liveness,
        proofs: LeaseProofs,
        dialer: Dialer,
        sasl: SASL | None,
        on_data: Callable[[Wire, bytes], None],
        on_expired: Callable[[int, list[tuple[str, Any]]], None],
    ) -> None:
        self._session = session
        self._out = out
        self._liveness = liveness
        self._proofs = proofs
        self.dialer = dialer
        self._sasl = sasl
        self._on_data = on_data
        self._on_expired = on_expired
        self.attempt: Wire | None = None  # the connection being set up, if any
        self.abandoned: set[Wire] = set()  # aborted attempts whose sockets are closing
        self.last_host: str | None = None  # ``host:port`` of the last session made
        self.address: tuple[str, int] | None = None  # the member of the last handshake
        self._connected_at = 0.0

    def expiry_deadline(self) -> float | None:
        """When the session must be gone on the server if we have not been heard since."""
        last = self._proofs.last_answered_sent
        if not self._session.session_id or last is None:
            return None
        return last + session_timeout_of(self._session)

    async def back_off(self) -> None:
        """After a drop: reconnect at once if the connection had lived, else wait (see
        ``Dialer.pause_after_drop``), never past the session's expiry."""
        lived = time.monotonic() - self._connected_at >= self._liveness.ping_interval
        pause = self.dialer.pause_after_drop(lived)
        if pause is None:
            return
        expiry = self.expiry_deadline()
        if expiry is not None:
            pause = min(pause, max(expiry - time.monotonic(), 0.0))
        await asyncio.sleep(pause)

    async def establish(self, deadline: float | None) -> tuple[Wire, Established]:
        """Try hosts until a session is live on a wire; handles expiry on the way.

        ``deadline`` bounds the whole search (start only); raises ConnectionFailedError.
        """
        session = self._session
        search = self.dialer.search()
        while True:
            if self._out.closing:
                raise asyncio.CancelledError  # a cancel that wait_for swallowed
            now = time.monotonic()
            expiry = self.expiry_deadline()
            if expiry is not None and now >= expiry:
                self._on_expired(session.session_id, session.expire())
                continue
            if deadline is not None and now >= deadline:
                raise search.out_of_time()
            bounds = (expiry, deadline)
            timeout = session_timeout_of(session)
            host, port, limit = search.next_attempt(now, bounds, timeout)
            outcome = await self._connect_one(host, port, limit)
            if isinstance(outcome, tuple):
                return outcome
            if isinstance(outcome, Expired):
                self._on_expired(outcome.session_id, outcome.watchers)
                search.session_ended()
                continue  # the server hung up; a new connection asks for a new session
            pause = search.failed(f"{host}:{port}", outcome, starting=deadline is not None)
            if pause is not None:
                # Every host failed once: pause before the next round, not longer than
                # the time left.
                for bound in bounds:
                    if bound is not None:
                        pause = min(pause, max(bound - time.monotonic(), 0))
                await asyncio.sleep(pause)

    async def let_go(self) -> None:
        """On close, after the wires were hung up: wait a little for the aborted
        attempts' sockets to close, and forget the attempt."""
        if self.abandoned:
            await asyncio.wait([w.lost for w in self.abandoned], timeout=1.0)
        self.attempt = None

    def abandon(self, wire: Wire) -> None:
        """Abort a connection attempt; close() waits until its socket is really closed."""
        if wire.transport is None or wire.lost.done():
            return
        wire.abort()
        self.abandoned.add(wire)
        wire.lost.add_done_callback(lambda _: self.abandoned.discard(wire))

    async def _connect_one(
        self, host: str, port: int, timeout: float
    ) -> tuple[Wire, Established] | Expired | str | None:
        """The live wire, the session's end, or for a failure its reason when definite,
        else None."""
        loop = asyncio.get_running_loop()
        wire = Wire(loop, self._on_data, self._out.wire_ended)
        self.attempt = wire
        try:
            started = time.monotonic()
            try:
                event = await asyncio.wait_for(self._handshake(wire, host, port), timeout)
            except SaslFailed as exc:
                self.abandon(wire)
                with self._out.lock:
                    self._session.disconnect()
                name = f"{host}:{port}"
                raise ConnectionFailedError(
                    str(exc), hosts=(name,), reasons=(str(exc),), refused=True
                ) from None
            except (TimeoutError, OSError, ZooKeeperError) as exc:
                log.debug("could not connect to %s:%s: %r", host, port, exc)
                self.abandon(wire)
                elapsed = time.monotonic() - started
                return await self.dialer.failed(
                    host, port, exc, wire, timeout, elapsed, self.last_host
                )
            except BaseException:
                self.abandon(wire)
                raise
            if isinstance(event, Expired):
                self.abandon(wire)
                return event
            self.last_host = f"{host}:{port}"
            self.dialer.connected()
            return wire, event
        finally:
            self.attempt = None

    async def _handshake(self, wire: Wire, host: str, port: int) -> Established | Expired:
        loop = asyncio.get_running_loop()
        sent = time.monotonic()
        await loop.create_connection(lambda: wire, host, port, ssl=self.dialer.ssl)
        assert wire.transport is not None
        with self._out.lock:
            wire.transport.write(self._session.connect())
        self._liveness.sent(sent)
        event = await wire.handshake
        if isinstance(event, Established) and self._sasl is not None:
            await self._sasl_login(wire, self._sasl, host, port)
        if isinstance(event, Established):
            # the handshake is an answered request: the server heard us no earlier
            self._proofs.handshake(sent, event.timeout_ms / 1000, event.resumed)
            self.address = (host, port)
            self._connected_at = time.monotonic()
        return event

    async def _sasl_login(self, wire: Wire, sasl: SASL, host: str, port: int) -> None:
        transport = wire.transport
        assert transport is not None

        def send(token: bytes, answer: asyncio.Future[Any]) -> None:
            now = time.monotonic()
            with self._out.lock:
                transport.write(self._session.request(GetSASLRequest(token), (answer, now), None))
            self._liveness.sent(now)

        await sasl_login(sasl, host, port, wire.lost, send)
