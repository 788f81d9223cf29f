"""Until when a ZooKeeper session surely lives: the lease rule, with no I/O.

A lease says "held" until the instant the servers may have expired our session. The
connection tells a rule about every handshake and every answer (when the request was
sent, when it was answered, whether it went through the leader); the rule says
``lease_sent``, the instant from which the session timeout counts. ``lease_sent`` already
has every margin taken off, so the lease ends at ``lease_sent + session_timeout``.

**A standalone server** (``Standalone``) times sessions itself: every answer proves the
server heard us no earlier than its request was sent.

**An ensemble** (``SyncChain``): only the leader times sessions. A follower answers reads
and pings itself, and relays our touches to the leader only in its replies to the
leader's pings; cut off from the leader it goes on answering for syncLimit x tickTime or
longer (see docs/locks.md, "What lost means"). Its answers prove nothing about the
leader's timer. What does is a chain on one connection (ZooKeeper 3.8's source, read in
../shared/ZK-LEASE.md "rule A"; each step checked against the source):

1. a request A, sent at p, answered at r_A (the member touched the session in its table);
2. a sync or write B sent at least G = tickTime after r_A, answered OK: in between, the
   leader queued a ping to the member, which the member answered (with A's touch) before
   it could see B's answer, since the leader's packets to a member are one FIFO;
3. a sync or write D sent after B's answer, answered OK at a_D before the lease we had
   then ran out: D followed that ping reply on the member's single stream to the leader,
   so the leader applied A's touch before D, while the session still lived.

So the leader expires the session no earlier than p + session_timeout. Two margins: a
leader that lost its quorum without knowing yet goes on answering for about a tick after
its successor started the session timers afresh (``overlap`` = tickTime + 50 ms), and
clocks may run at different rates (``clock_drift``, a share of the session timeout).
The handshake is a proof of its own: the leader revalidates (or creates) the session.
The chain is started afresh on every connection.

The rule needs the servers' tickTime, or a bound above it: a larger tick only makes
the rule more careful. ``Timing`` says where it came from: the user's ``tick_time``, the
server's ``conf`` (four-letter word or AdminServer), the bound the servers' session
bounds prove (``session_bounds.py``), or assumed. The assumption when nothing can be
learned is the worst ZooKeeper's defaults allow, session_timeout / 2 (a session may not
be shorter than 2 ticks); it is safe, and under it a lease cannot be kept while
connected, which the connection says once at WARNING (and acquire refuses).

To keep a healthy lease alive the connection sends a ``sync`` every ``renew_interval``:
a sync is a round trip to the leader with no transaction and no disk write.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from zklocks._vocabulary import DEFAULT_CLOCK_DRIFT

__all__ = [
    "DEFAULT_CLOCK_DRIFT",
    "OPTION",
    "LeaseRule",
    "Standalone",
    "SyncChain",
    "Timing",
    "assumed_timing",
    "plant",
]

OPTION = "tick_time option"  # ``Timing.source`` of the user's own tick_time
_OVERLAP_MARGIN = 0.05  # seconds beyond a tick that a deposed leader may still answer
_MERGE = 0.005  # answers closer than this share an entry (at the later, safer times)
_KEEP = 4096  # entries of history kept at most; older ones prove nothing useful


@dataclass(frozen=True)
class Timing:
    """The servers' tickTime in seconds, and where we learnt it."""

    tick: float
    # "tick_time option", "conf of HOST:PORT", "the AdminServer of HOST",
    # "session bounds of HOST:PORT: ...", or "assumed"
    source: str
    sync_limit: int | None = None

    @property
    def assumed(self) -> bool:
        return self.source == "assumed"


def assumed_timing(session_timeout: float) -> Timing:
    """The largest tickTime ZooKeeper's defaults allow for this session timeout."""
    return Timing(session_timeout / 2, "assumed")


class LeaseRule:
    """What every rule answers; the connection calls these on its loop thread."""

    lagging = False  # True: the lease can run out while connected (a timer must watch it)

    def __init__(self, session_timeout: float, clock_drift: float) -> None:
        self.session_timeout = session_timeout
        self.clock_drift = clock_drift
        self._anchor: float | None = None  # send time the session surely counted

    def negotiated(self, session_timeout: float) -> None:
        self.session_timeout = session_timeout

    def connected(self, sent: float, resumed: bool) -> None:
        """A handshake sent at ``sent`` was accepted (a new session, or ours revalidated)."""
        if not resumed or self._anchor is None or sent > self._anchor:
            self._anchor = sent

    def answered(self, sent: float, answered: float, through_leader: bool) -> None:
        raise NotImplementedError

    def margin(self) -> float:
        """Seconds taken off the anchor: clock drift (and, on an ensemble, the overlap)."""
        return self.clock_drift * self.session_timeout

    def lease_sent(self) -> float | None:
        anchor = self._anchor
        return None if anchor is None else anchor - self.margin()

    def lease_end(self) -> float | None:
        sent = self.lease_sent()
        return None if sent is None else sent + self.session_timeout

    def renew_interval(self) -> float | None:
        """How often to send a renewing sync while connected; None: never."""
        return None


class Standalone(LeaseRule):
    """The server that answers is the one that times the session: every answer counts."""

    def answered(self, sent: float, answered: float, through_leader: bool) -> None:
        if self._anchor is None or sent > self._anchor:
            self._anchor = sent


class _History:
    """Times in arrival order, each with the best value seen up to it; prefix look-ups."""

    __slots__ = ("best", "times")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.best: list[float] = []

    def add(self, at: float, value: float) -> None:
        times, best = self.times, self.best
        if times and at - times[-1] < _MERGE:
            times[-1] = at  # later: it counts for no earlier a look-up than before
            best[-1] = max(best[-1], value)
            return
        times.append(at)
        best.append(max(best[-1], value) if best else value)
        if len(times) > 2 * _KEEP:
            del times[:_KEEP], best[:_KEEP]

    def best_until(self, at: float) -> float | None:
        """The best value among entries at or before ``at``."""
        i = bisect_right(self.times, at)
        return self.best[i - 1] if i else None

    def clear(self) -> None:
        self.times.clear()
        self.best.clear()


class SyncChain(LeaseRule):
    """Rule A (module docstring): a request, then a sync a tick later, then another."""

    lagging = True

    def __init__(self, session_timeout: float, clock_drift: float, timing: Timing) -> None:
        super().__init__(session_timeout, clock_drift)
        self.timing = timing
        self._answers = _History()  # answer time -> latest send time answered by then
        self._primed = _History()  # B's answer time -> best anchor B makes provable

    @property
    def gap(self) -> float:
        """G: at least the longest gap between the leader's pings to a member (tick/2
        nominally; a whole tick for the leader's own hiccups), on our clock."""
        return self.timing.tick * (1 + self.clock_drift)

    @property
    def overlap(self) -> float:
        """How long a deposed leader may answer after its successor started."""
        return self.timing.tick + _OVERLAP_MARGIN

    def connected(self, sent: float, resumed: bool) -> None:
        super().connected(sent, resumed)
        self._answers.clear()  # what another member answered proves nothing here
        self._primed.clear()

    def answered(self, sent: float, answered: float, through_leader: bool) -> None:
        if through_leader:
            # As D: a B answered before this was sent makes its anchor proven, if this
            # answer came while the lease we had still ran (the session still lived).
            proven = self._primed.best_until(sent)
            end = self.lease_end()
            if (
                proven is not None
                and end is not None
                and answered < end
                and (self._anchor is None or proven > self._anchor)
            ):
                self._anchor = proven
            # As B: the latest request answered a gap before this one was sent.
            basis = self._answers.best_until(sent - self.gap)
            if basis is not None:
                self._primed.add(answered, basis)
        self._answers.add(answered, sent)

    def margin(self) -> float:
        return self.overlap + self.clock_drift * self.session_timeout

    def budget(self) -> float:
        """How stale an anchor may be while the lease still runs."""
        return self.session_timeout - self.margin()

    def _shortest_interval(self) -> float:
        """I must exceed G (plus a round trip) for the chain to advance."""
        return self.gap * 1.05 + 0.01

    def renew_interval(self) -> float:
        # A sync every I proves, at each answer, the send time of the sync two before:
        # the lease is at most about 3 I stale just before the next proof. A quarter of
        # the budget leaves room for slow answers.
        return max(self._shortest_interval(), self.budget() / 4)

    def sustainable(self) -> bool:
        """Can a healthy connection keep a lease at all with this timing?"""
        return 3 * self.renew_interval() < self.budget()

    def shortest_session(self) -> float:
        """The session timeout below which ``sustainable()`` fails for this tickTime."""
        fixed = 3 * self._shortest_interval() + self.overlap
        return fixed / (1 - self.clock_drift)


class _LagRule(LeaseRule):
    """The rule before issue 21 (a planted bug for the nemesis): an answer counts once
    another arrives session_timeout / 4 later on the same connection. Unsafe: it assumes
    (syncLimit + 1) x tickTime <= session_timeout / 4 and trusts pings and reads."""

    lagging = True

    def __init__(self, session_timeout: float, clock_drift: float, lag: float | None) -> None:
        super().__init__(session_timeout, 0.0)
        self._lag = lag
        self._answers: list[tuple[float, float]] = []

    def connected(self, sent: float, resumed: bool) -> None:
        if not resumed:
            self._anchor = None
        handshake = sent - self.lag()
        if self._anchor is None or handshake > self._anchor:
            self._anchor = handshake
        self._answers.clear()

    def lag(self) -> float:
        return self.session_timeout / 4 if self._lag is None else self._lag

    def answered(self, sent: float, answered: float, through_leader: bool) -> None:
        self._answers.append((sent, answered))
        while self._answers and self._answers[0][1] <= answered - self.lag():
            first, _ = self._answers.pop(0)
            if self._anchor is None or first > self._anchor:
                self._anchor = first


_PLANTED: str | None = None


def plant(name: str) -> None:
    """Plant a known-unsafe lease rule in this process (the nemesis' checker must catch it).

    ``"lag-rule"``: the rule before issue 21. ``"trust-ping"``: every answer proves the
    session, as if every member were the leader (lag 0). For tests and the nemesis only.
    """
    global _PLANTED
    if name not in ("lag-rule", "trust-ping"):
        raise ValueError(f"unknown planted lease rule {name!r}; known: lag-rule, trust-ping")
    _PLANTED = name


def for_ensemble(session_timeout: float, clock_drift: float, timing: Timing) -> LeaseRule:
    """The rule for a connection to a member of an ensemble (or a planted one)."""
    if _PLANTED == "lag-rule":
        return _LagRule(session_timeout, clock_drift, None)
    if _PLANTED == "trust-ping":
        return _LagRule(session_timeout, clock_drift, 0.0)
    return SyncChain(session_timeout, clock_drift, timing)
