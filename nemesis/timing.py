"""Member and session timing: ZooKeeper's sample configuration scaled down, and a tight one.

ZooKeeper's sample ``zoo.cfg`` has tickTime 2 s and syncLimit 5, and clients commonly ask
for 10 s sessions. ``sample`` keeps those proportions at a fifth of the time (runs see
five times as many faults a minute); ``tight`` is the timing of the ensemble fault tests.
What a lease rule must allow for is how long a member cut off from its leader goes on
answering: up to syncLimit x tickTime, plus half a tick of the leader's ping interval,
so ``lag`` = (syncLimit + 1) x tickTime (docs/locks.md, "What lost guarantees on an
ensemble"). Under ``sample`` that lag (2.4 s) is more than a quarter of the session
(1 s): the follower-stall case separates a rule that knows tickTime from one that guesses.

``stock`` is ZooKeeper as most people run it: the members allow ``srvr`` alone and have
no AdminServer, their session bounds are the defaults (2 and 20 ticks), and the clients
are not told tickTime: they learn a bound from the session bounds (handshake probes).
Its tickTime and syncLimit are the sample's; clients ask for the longest session the
bounds allow (20 ticks, 8 s).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    name: str
    tick_ms: int  # the members' tickTime
    sync_limit: int  # the members' syncLimit, in ticks
    session_timeout: float  # what every client asks for, in seconds
    stock: bool = False  # srvr alone, no AdminServer, default bounds, no tick_time given

    @property
    def tick(self) -> float:
        """tickTime in seconds (what ``zklocks.Client(tick_time=...)`` takes)."""
        return self.tick_ms / 1000

    @property
    def client_tick(self) -> float | None:
        """What a client is told of tickTime: nothing on the stock profile."""
        return None if self.stock else self.tick

    @property
    def four_letter_words(self) -> str:
        """The members' ``4lw.commands.whitelist``."""
        return "srvr" if self.stock else "*"

    @property
    def lag(self) -> float:
        """How far a cut-off member's answers may outrun the leader's session timer (s)."""
        return (self.sync_limit + 1) * self.tick


TIMINGS = {
    "sample": Timing("sample", tick_ms=400, sync_limit=5, session_timeout=4.0),
    "tight": Timing("tight", tick_ms=200, sync_limit=3, session_timeout=2.0),
    "stock": Timing("stock", tick_ms=400, sync_limit=5, session_timeout=8.0, stock=True),
}
