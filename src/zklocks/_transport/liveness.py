"""One timer that keeps a live connection honest: ping, give up on silence, renew.

Once connected, a ping goes out whenever nothing was sent for a third of the negotiated
session timeout; if nothing at all is *received* for two thirds of it, the connection is
declared dead and dropped (a silent peer or a stalled network looks exactly like that).
On an ensemble the lease's renewing sync is due on the same timer. One timer handles
all three; it is not re-armed per packet, only when it fires or the intervals change.

**Moving before the lease runs out.** On an ensemble the session's proof (the lease
rule's ``lease_end``) can run out well before two thirds of the session timeout: it is
proven through the leader, a few ticks stale. A member that goes silent (a paused JVM, a
cut link) then costs the lease although the session lives and another member could prove
it again: a handshake is a proof of its own. So when the proof has less than
``reserve`` left, a request has waited ``quiet`` without a byte in answer, and the proof
has not run out yet, the connection is dropped and the next member is dialled. If
nothing is outstanding when that window opens, a ping is sent to ask. A member that
answers (even one cut off from the leader, answering locally) is never dropped this
way: only silence is, so the stalled-follower cases are unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["Liveness"]

_RESERVE_SHARE = 0.06  # of the session timeout: left to reconnect and re-prove
_RESERVE_MIN = 0.15  # seconds, whatever the session
_QUIET_SHARE = 0.04  # of the session timeout: an unanswered request this old is silence
_QUIET_MIN = 0.1  # seconds


class Liveness:
    """When bytes last went out and came in, and the timer that acts on it."""

    def __init__(self, session_timeout: float) -> None:
        self.last_recv = 0.0
        self.last_send = 0.0
        self.unanswered_since: float | None = None  # the first send after the last receive
        self.set_intervals(session_timeout)
        self.timer: asyncio.TimerHandle | None = None

    def set_intervals(self, timeout: float) -> None:
        """The negotiated session timeout: pings keep the session and tell a dead
        connection; on an ensemble the renewing syncs keep the lease, which pings
        cannot prove."""
        self.ping_interval = timeout / 3
        self.read_timeout = timeout * 2 / 3
        self.reserve = max(timeout * _RESERVE_SHARE, _RESERVE_MIN)
        self.quiet = max(timeout * _QUIET_SHARE, _QUIET_MIN)

    def sent(self, now: float) -> None:
        """Bytes of a request went out at ``now``."""
        self.last_send = now
        if self.unanswered_since is None:
            self.unanswered_since = now

    def heard(self, now: float) -> None:
        """Bytes came in at ``now``: the member is alive."""
        self.last_recv = now
        self.unanswered_since = None

    def connected(self, now: float) -> None:
        """A handshake was answered at ``now``: a fresh connection, nothing outstanding."""
        self.heard(now)

    def silent_for(self, now: float) -> float | None:
        """How long nothing was heard, once that is too long (drop the connection)."""
        silence = now - self.last_recv
        return silence if silence >= self.read_timeout else None

    def _window(self, lease_end: float | None) -> float | None:
        """When the proof's last ``reserve`` (less the time to tell silence) begins."""
        return None if lease_end is None else lease_end - self.reserve - self.quiet

    def probe_due(self, now: float, lease_end: float | None) -> bool:
        """Ask the member (a ping) whether it is alive: the proof is near its end, it
        has not run out, and nothing sent since the window opened would tell."""
        window = self._window(lease_end)
        return (
            window is not None
            and lease_end is not None
            and window <= now < lease_end
            and self.last_send < window
            and self.unanswered_since is None
        )

    def silent_before_lease_ends(self, now: float, lease_end: float | None) -> float | None:
        """How long a request has waited unanswered, once the member is silent and the
        proof has only ``reserve`` left (drop it and re-prove on another member)."""
        since = self.unanswered_since
        if lease_end is None or since is None or not lease_end - self.reserve <= now < lease_end:
            return None
        waited = now - since
        return waited if waited >= self.quiet else None

    def ping_due(self, now: float) -> bool:
        return now - self.last_send >= self.ping_interval

    def arm(
        self,
        loop: asyncio.AbstractEventLoop,
        renewal: float | None,
        tick: Callable[[], None],
        lease_end: float | None = None,
    ) -> None:
        """Call ``tick`` when the first of its duties is due (``renewal``: the lease's;
        ``lease_end``: when the session's proof runs out, on an ensemble)."""
        self.cancel()
        now = time.monotonic()
        due = min(self.last_recv + self.read_timeout, self.last_send + self.ping_interval)
        if renewal is not None:
            due = min(due, renewal)
        window = self._window(lease_end)
        if lease_end is not None and window is not None and now < lease_end:
            since = self.unanswered_since
            if since is None:
                if self.last_send < window:
                    due = min(due, window)  # the probe
            else:
                due = min(due, max(since + self.quiet, lease_end - self.reserve))
        self.timer = loop.call_later(max(due - now, 0), tick)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
