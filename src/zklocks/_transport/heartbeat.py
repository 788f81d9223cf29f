"""What the connection's one timer does when it fires (``Liveness`` says when).

In order: drop a connection that was silent for two thirds of the session; drop a
silent member before the lease's proof runs out, so another member proves it again
(``liveness.py``); send the lease's renewing ``sync`` on an ensemble; else a ping when
one is due, or to ask a member whose silence the proof can no longer afford. Then arm
the timer again. Dropping is all it does to a connection: the supervisor reconnects.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from zklocks._protocol.records import Sync
from zklocks._protocol.session import Session
from zklocks._transport.lease_proofs import LeaseProofs
from zklocks._transport.liveness import Liveness
from zklocks._transport.outgoing import Outgoing

__all__ = ["Heartbeat"]

log = logging.getLogger("zklocks.connection")


class Heartbeat:
    """The timer's duties over one connection's parts."""

    def __init__(
        self,
        liveness: Liveness,
        proofs: LeaseProofs,
        out: Outgoing,
        session: Session,
        send_lock: threading.RLock,
        host: Callable[[], str | None],
    ) -> None:
        self._liveness = liveness
        self._proofs = proofs
        self._out = out
        self._session = session
        self._send_lock = send_lock
        self._host = host

    def arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._liveness.arm(
            loop, self._proofs.next_renewal(), lambda: self.tick(loop), self._proof_end()
        )

    def _proof_end(self) -> float | None:
        """When the session's proof runs out while connected (an ensemble's lease rule;
        None on a standalone server, whose every answer proves the session)."""
        rule = self._proofs.rule
        return rule.lease_end() if rule.lagging else None

    def tick(self, loop: asyncio.AbstractEventLoop) -> None:
        liveness = self._liveness
        liveness.timer = None
        wire = self._out.wire
        if wire is None:
            return
        now = time.monotonic()
        silence = liveness.silent_for(now)
        if silence is not None:
            log.warning(
                "nothing heard from %s for %.3f s; dropping the connection", self._host(), silence
            )
            wire.abort()
            return
        proof_end = self._proof_end()
        waited = liveness.silent_before_lease_ends(now, proof_end)
        if waited is not None and proof_end is not None:
            log.warning(
                "%s has not answered for %.3f s and the session's proof runs out in "
                "%.3f s; moving to another member to prove it again",
                self._host(),
                waited,
                proof_end - now,
            )
            wire.abort()
            return
        if self._proofs.renewal_due(now):
            # On an ensemble: a round trip through the leader that the lease rule counts
            # (no transaction, no disk write); answered with no one waiting for it.
            with self._send_lock:
                self._out.write(self._session.request(Sync("/"), (None, now), None, chroot=""))
        elif liveness.ping_due(now) or liveness.probe_due(now, proof_end):
            with self._send_lock:
                self._out.write(self._session.ping((None, now)))
        self.arm(loop)
