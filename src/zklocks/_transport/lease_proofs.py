"""A connection's lease proofs: which rule it feeds, the tickTime it needs, renewals.

``lease_rule.py`` holds the rules themselves (no I/O, no clock of their own). This is
the part a connection used to carry in its own attributes: choosing the rule (until the
first round trip says standalone or ensemble, assume the worst ZooKeeper allows),
learning the servers' tickTime for an ensemble's rule (the option, else asked once at
start, with a WARNING that names the option when nothing answers), and the renewing
``sync`` that keeps a healthy lease on an ensemble fresh.
"""

from __future__ import annotations

import logging
import ssl as _ssl
import time

from zklocks._transport import lease_rule as _lease_rule
from zklocks._transport.server_conf import learn_timing

__all__ = ["LeaseProofs"]

log = logging.getLogger("zklocks.connection")

_LEARN_TIMING_TIMEOUT = 1.0  # at most this of start() asking the server for tickTime


class LeaseProofs:
    """The lease rule of one connection, and when its next renewing sync is due."""

    def __init__(self, session_timeout: float, clock_drift: float, tick_time: float | None):
        self._clock_drift = clock_drift
        self._timing = (
            None if tick_time is None else _lease_rule.Timing(tick_time, "tick_time option")
        )
        # Until start() has learnt whether the server is one of an ensemble, and its
        # tickTime, assume the worst ZooKeeper allows.
        self.rule: _lease_rule.LeaseRule = _lease_rule.for_ensemble(
            session_timeout,
            clock_drift,
            self._timing or _lease_rule.assumed_timing(session_timeout),
        )
        self._last_renewal = 0.0  # when the last renewing sync was sent
        # When the most recently answered request (pings and the handshake included) was
        # sent: the server heard from us no earlier than that.
        self.last_answered_sent: float | None = None

    def answered(self, sent: float, answered: float, through_leader: bool) -> None:
        """A reply came (at ``answered``) to a request sent at ``sent``."""
        last = self.last_answered_sent
        if last is None or sent > last:
            self.last_answered_sent = sent
        self.rule.answered(sent, answered, through_leader)

    def handshake(self, sent: float, session_timeout: float, resumed: bool) -> None:
        """A handshake sent at ``sent`` was answered: an answered request of its own."""
        self.last_answered_sent = sent
        self.rule.negotiated(session_timeout)
        self.rule.connected(sent, resumed)  # a new session: its own timer

    def timing(self) -> _lease_rule.Timing | None:
        """The servers' tickTime as given or learnt (``timing.assumed``: neither)."""
        rule = self.rule
        return rule.timing if isinstance(rule, _lease_rule.SyncChain) else self._timing

    def standalone(self, session_timeout: float, last_answered_sent: float | None) -> None:
        """The server times sessions itself: every answer so far counts."""
        rule = _lease_rule.Standalone(session_timeout, self._clock_drift)
        if last_answered_sent is not None:
            rule.connected(last_answered_sent, resumed=False)
        self.rule = rule

    async def learn_timing(
        self,
        address: tuple[str, int] | None,
        ssl: _ssl.SSLContext | None,
        deadline: float,
        host: str | None,
        session_timeout: float,
    ) -> bool:
        """Give the ensemble's lease rule the servers' tickTime: the option, or asked of
        ``address``. True when the renewal interval has changed (re-arm the timer).

        Where nothing answers, the rule keeps the worst case ZooKeeper's defaults allow
        (safe, but then a lease cannot be kept while connected): said once, at WARNING,
        with the option that fixes it.
        """
        rule = self.rule
        timing = self._timing
        if timing is None and address is not None:
            budget = min(_LEARN_TIMING_TIMEOUT, max(deadline - time.monotonic(), 0.05))
            timing = await learn_timing(address[0], address[1], ssl, budget)
        if timing is None:
            log.warning(
                "could not learn the ZooKeeper servers' tickTime from %s (the `conf` "
                "four-letter word is not allowed and no AdminServer answered on port "
                "8080); assuming the largest ZooKeeper's defaults allow for a %.3g s "
                "session (%.3g s), under which a lease on an ensemble cannot be kept while "
                "connected: pass tick_time=<the servers' tickTime in seconds> (CLI: "
                "--tick-time or ZKLOCKS_TICK_TIME)",
                host,
                session_timeout,
                _lease_rule.assumed_timing(session_timeout).tick,
            )
            return False
        self._timing = timing
        if not isinstance(rule, _lease_rule.SyncChain):
            return False  # a planted rule (the nemesis' checker must catch it)
        rule.timing = timing
        log.info(
            "ensemble tickTime %.3f s (from the %s); lease renewed by a sync every %.3f s",
            timing.tick,
            timing.source,
            rule.renew_interval(),
        )
        if not rule.sustainable():
            log.warning(
                "a %.3g s session is too short to keep a lease on an ensemble with "
                "tickTime %.3g s (a lease proven through the leader is about 3 sync "
                "intervals plus a tick old); leases will be lost while connected: use a "
                "session_timeout above %.3g s",
                session_timeout,
                timing.tick,
                rule.shortest_session(),
            )
        return True

    def next_renewal(self) -> float | None:
        """When the next renewing sync is due (None: the rule needs none)."""
        renew = self.rule.renew_interval()
        return None if renew is None else self._last_renewal + renew

    def renewal_due(self, now: float) -> bool:
        """Is a renewing sync due at ``now``? If so, it counts as sent now."""
        renew = self.rule.renew_interval()
        if renew is not None and now - self._last_renewal >= renew:
            self._last_renewal = now
            return True
        return False
