"""A connection's lease proofs: which rule it feeds, the tickTime it needs, renewals.

``lease_rule.py`` holds the rules themselves (no I/O, no clock of their own). This is
the part a connection used to carry in its own attributes: choosing the rule (until the
first round trip says standalone or ensemble, assume the worst ZooKeeper allows),
learning the servers' tickTime for an ensemble's rule (the option, the ``conf``
four-letter word, the AdminServer, else the bound the servers' session bounds prove),
saying once when no lease can be kept, and the renewing ``sync`` that keeps a healthy
lease on an ensemble fresh.
"""

from __future__ import annotations

import asyncio
import logging
import ssl as _ssl
import time
from dataclasses import dataclass

from zklocks._errors import TickTimeBelowServers
from zklocks._transport import lease_rule as _lease_rule
from zklocks._transport.server_conf import learn_timing
from zklocks._transport.session_bounds import (
    SessionBounds,
    known_bounds,
    learn_bounds,
    remember_bounds,
)
from zklocks._vocabulary import NO_ANSWER

__all__ = ["LeaseProofs", "TimingQuestion"]

log = logging.getLogger("zklocks.connection")

_LEARN_TIMING_TIMEOUT = 1.0  # at most this of start() asking the server for tickTime
_SAME_TICK = 1e-6  # seconds: two tickTimes closer than this are the same


@dataclass(frozen=True)
class TimingQuestion:
    """Where and how to ask an ensemble for its tickTime (``LeaseProofs.learn_timing``)."""

    address: tuple[str, int] | None  # the member the session is on
    ssl: _ssl.SSLContext | None
    deadline: float  # start()'s, on time.monotonic()
    host: str | None  # "host:port" of that member, for the messages
    hosts: list[str]  # every member of the connect string: the ensemble's name
    requested_ms: int  # the session timeout we asked for...
    granted_ms: int  # ...and the one the server granted (clamped: one bound known)


def _choose(
    given: _lease_rule.Timing | None, bounds: SessionBounds | None
) -> _lease_rule.Timing | None:
    """The tickTime the rule uses: the given or learnt one, checked against the bounds
    (None: nothing is known)."""
    if bounds is None:
        return given
    proven = _lease_rule.Timing(bounds.tick_bound, bounds.describe())
    if given is None:
        return proven
    if bounds.agree and given.tick < bounds.tick_bound - _SAME_TICK:
        if given.source == _lease_rule.OPTION:
            raise TickTimeBelowServers(
                f"tick_time={given.tick:g} s is below the servers' tickTime, "
                f"{bounds.tick_bound:g} s by their {bounds.describe()} (ZooKeeper's defaults "
                "are 2 and 20 ticks); under a tickTime set too low the lease rule is unsafe: "
                "pass the servers' real tickTime, or leave tick_time out to use the bound"
            )
        log.warning(
            "the %s says tickTime %g s, below the %g s the %s prove; using %g s",
            given.source,
            given.tick,
            bounds.tick_bound,
            bounds.describe(),
            bounds.tick_bound,
        )
        return proven
    return given


def _problem(
    rule: _lease_rule.SyncChain,
    host: str | None,
    bounds: SessionBounds | None = None,
    why_not: str = "",
) -> str | None:
    """Why no lease can be kept on this ensemble with this session, with the fix; None
    when one can. ``why_not``: why the session bounds could not be learnt."""
    timing = rule.timing
    session = rule.session_timeout
    if timing.assumed:
        failed = f": {why_not}" if why_not else ""
        return (
            f"cannot keep a lease on the ensemble of {host} with a {session:g} s session: "
            "could not learn the servers' tickTime (the `conf` four-letter word is not "
            "allowed, no AdminServer answered on port 8080, and the session-bounds "
            f"handshakes failed{failed}), and the worst ZooKeeper allows "
            f"({session / 2:g} s) leaves no lease time: pass tick_time=<the servers' "
            "tickTime in seconds> (CLI: --tick-time or ZKLOCKS_TICK_TIME)"
        )
    if rule.sustainable():
        return None
    loose = ""
    if bounds is not None and not bounds.agree and timing.source == bounds.describe():
        loose = (
            ", or, if the servers' maxSessionTimeout or minSessionTimeout was raised "
            "(the bounds are not ZooKeeper's 2 and 20 ticks), pass their real tickTime: "
            "tick_time= (CLI: --tick-time)"
        )
    return (
        f"cannot keep a lease on the ensemble of {host} with a {session:g} s session: "
        f"with tickTime {timing.tick:g} s (from the {timing.source}) a lease proven "
        "through the leader is about 3 sync intervals plus a tick old, more than the "
        f"session allows: use a session_timeout of at least {rule.shortest_session():.3g} s "
        f"(CLI: --session-timeout){loose}"
    )


class LeaseProofs:
    """The lease rule of one connection, and when its next renewing sync is due."""

    def __init__(self, session_timeout: float, clock_drift: float, tick_time: float | None):
        self._clock_drift = clock_drift
        self._option = (
            None if tick_time is None else _lease_rule.Timing(tick_time, _lease_rule.OPTION)
        )
        self._timing = self._option
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
        self.bounds: SessionBounds | None = None  # the servers' session bounds, if learnt
        self.problem: str | None = None  # why no lease can be kept (None: one can)

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

    async def learn_timing(self, ask: TimingQuestion) -> bool:
        """Give the ensemble's lease rule the servers' tickTime. True when the renewal
        interval has changed (re-arm the timer).

        Sources, in order: the ``tick_time`` option, the ``conf`` four-letter word, the
        AdminServer, then the bound the servers' session bounds prove
        (``session_bounds.py``, learnt once per ensemble per process and always asked:
        it is also the cross-check). An option below what agreeing bounds prove raises
        ``InvalidArgument`` naming both; a learnt value below them gives way to the bound
        (an AdminServer on port 8080 may be another server's). Where nothing answers,
        the rule keeps the worst case ZooKeeper's defaults allow: safe, but then no lease
        can be kept while connected (``problem``, said once at WARNING).
        """
        rule = self.rule
        option = self._option
        budget = min(_LEARN_TIMING_TIMEOUT, max(ask.deadline - time.monotonic(), 0.05))
        bounds = known_bounds(ask.hosts)
        why_not = ""  # why the bounds are not known, if they are not
        conf_task = None
        if option is None and ask.address is not None:
            conf_task = asyncio.ensure_future(
                learn_timing(ask.address[0], ask.address[1], ask.ssl, budget)
            )
        try:
            if bounds is None and ask.address is not None:
                learnt = await learn_bounds(
                    ask.address, ask.ssl, budget, ask.requested_ms, ask.granted_ms
                )
                if isinstance(learnt, SessionBounds):
                    bounds = learnt
                    remember_bounds(ask.hosts, bounds)
                else:
                    why_not = learnt
            conf = await conf_task if conf_task is not None else None
        finally:
            if conf_task is not None and not conf_task.done():
                conf_task.cancel()  # start() was cancelled meanwhile
        self.bounds = bounds
        timing = _choose(option or conf, bounds) or _lease_rule.assumed_timing(rule.session_timeout)
        self._timing = timing
        if not isinstance(rule, _lease_rule.SyncChain):
            return False  # a planted rule (the nemesis' checker must catch it)
        rule.timing = timing
        self.problem = _problem(rule, ask.host, bounds, why_not)
        if self.problem is not None:
            log.warning("%s", self.problem)
        else:
            log.info(
                "ensemble tickTime %.3f s (from the %s); lease renewed by a sync every %.3f s",
                timing.tick,
                timing.source,
                rule.renew_interval(),
            )
        return True

    def loss_reason(
        self, session_timeout: float, ensemble: bool | None, host: str | None
    ) -> tuple[str, str]:
        """Why the lease rule's instant has come (words, metric code), said truthfully:
        "no answer" only when nothing was answered for a whole session timeout; on an
        ensemble whose member answered since, the session could not be proven at the
        leader in time (with ``problem``, if there is one)."""
        heard = self.last_answered_sent
        now = time.monotonic()
        if not ensemble or heard is None or now - heard >= session_timeout:
            return NO_ANSWER
        timing = self.timing()
        how = "" if timing is None else f"; tickTime {timing.tick:g} s from the {timing.source}"
        reason = (
            f"the session could not be proven alive at the ZooKeeper leader in time: "
            f"{host} last answered a request sent {now - heard:.3g} s ago, but no sync "
            f"through the leader confirmed the session within the {session_timeout:g} s "
            f"session timeout{how}"
        )
        problem = self.problem
        return (reason if problem is None else f"{reason}; {problem}"), "unproven"

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
