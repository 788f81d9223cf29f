"""What comes in on a connection: bytes parsed into events, each told where it goes.

The connection's loop reads a wire (its transport, or the reader role's ``_loop_reads``)
and hands the bytes here; the reader role (``caller_reads.py``) hands the loop the events
a caller read and could not settle itself. Both end in ``deliver``, one event at a time,
on the loop: a reply answers its future or token (and the lease rule hears its send and
receive times), a notification calls its watchers, a handshake's answer ends the
handshake. A refusal that ends the connection (AUTH_FAILED, a server requiring a SASL
login we do not make) is the connection's to act on (``refused``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from zklocks._protocol.errors import (
    AuthFailedError,
    MarshallingError,
    SessionClosedRequireSaslAuthError,
)
from zklocks._protocol.session import (
    Established,
    Event,
    Expired,
    ReceiveError,
    Session,
    WatchFired,
    WireReply,
)
from zklocks._transport import notices as _notices
from zklocks._transport.lease_proofs import LeaseProofs
from zklocks._transport.liveness import Liveness
from zklocks._transport.wire import Wire

__all__ = ["AUTH_FAILED", "SASL_REQUIRED", "Incoming"]

log = logging.getLogger("zklocks.connection")

AUTH_FAILED = "auth-failed"  # credentials it accepted before are refused now
SASL_REQUIRED = "sasl-required"  # the server requires a SASL login we do not make


class Incoming:
    """Parse a connection's bytes and deliver its events, on the loop."""

    def __init__(
        self,
        session: Session,
        liveness: Liveness,
        proofs: LeaseProofs,
        wires: Callable[[], list[Wire]],
        attempt: Callable[[], Wire | None],
        refused: Callable[[Wire, str], None],
        sasl: bool,
    ) -> None:
        self._session = session
        self._liveness = liveness
        self._proofs = proofs
        self._wires = wires  # the live wire and the one being set up
        self._attempt = attempt  # the wire being set up, if any
        self._refused = refused  # ends the connection for good (AUTH_FAILED, ...)
        self._sasl = sasl  # we make a SASL login (its own refusal is the login's)
        self.host: Callable[[], str | None] = lambda: None  # for the log

    def data_received(self, wire: Wire, data: bytes) -> None:
        if wire not in self._wires():
            return  # a connection we have given up on
        now = time.monotonic()
        self._liveness.heard(now)
        try:
            events = self._session.receive(data)
        except MarshallingError as exc:
            if wire is self._attempt() and wire.foreign is None:
                wire.foreign = bytes(data[:64])  # reported once, as "not ZooKeeper"
                log.debug("not a ZooKeeper answer: %s", exc)
            else:
                log.warning("dropping the connection to %s: %s", self.host(), exc)
            wire.abort()
            # The answers that came before the broken bytes are real: deliver them. The
            # rest are failed with ConnectionLossError when the connection is lost.
            events = exc.events if isinstance(exc, ReceiveError) else []
        for event in events:
            if not self.deliver(wire, event, now):
                return

    def deliver(self, wire: Wire, event: Event, now: float) -> bool:
        """One event read (at ``now``) from ``wire``; False: the wire ended."""
        if type(event) is WireReply:
            future, sent = event.token
            self._proofs.answered(sent, now, event.through_leader)
            if not event.ok and isinstance(event.value, SessionClosedRequireSaslAuthError):
                if future is not None and not future.done():
                    future.set_exception(event.value)
                if not self._sasl:
                    self._refused(wire, SASL_REQUIRED)
                    return False
                return True
            if future is None:
                if not event.ok and isinstance(event.value, AuthFailedError):
                    # Like the Java client's AUTH_FAILED: the end of the connection.
                    self._refused(wire, AUTH_FAILED)
                    return False
                return True
            if not future.done():
                if event.ok:
                    future.set_result(event.value)
                else:
                    future.set_exception(event.value)
        elif type(event) is WatchFired:
            _notices.notify(event)
        elif not wire.handshake.done():
            assert isinstance(event, Established | Expired)
            wire.handshake.set_result(event)
        return True
