"""One timer that keeps a live connection honest: ping, give up on silence, renew.

Once connected, a ping goes out whenever nothing was sent for a third of the negotiated
session timeout; if nothing at all is *received* for two thirds of it, the connection is
declared dead and dropped (a silent peer or a stalled network looks exactly like that).
On an ensemble the lease's renewing sync is due on the same timer. One timer handles
all three; it is not re-armed per packet, only when it fires or the intervals change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["Liveness"]


class Liveness:
    """When bytes last went out and came in, and the timer that acts on it."""

    def __init__(self, session_timeout: float) -> None:
        self.last_recv = 0.0
        self.last_send = 0.0
        self.ping_interval = session_timeout / 3
        self.read_timeout = session_timeout * 2 / 3
        self.timer: asyncio.TimerHandle | None = None

    def set_intervals(self, timeout: float) -> None:
        """The negotiated session timeout: pings keep the session and tell a dead
        connection; on an ensemble the renewing syncs keep the lease, which pings
        cannot prove."""
        self.ping_interval = timeout / 3
        self.read_timeout = timeout * 2 / 3

    def sent(self, now: float) -> None:
        self.last_send = now

    def silent_for(self, now: float) -> float | None:
        """How long nothing was heard, once that is too long (drop the connection)."""
        silence = now - self.last_recv
        return silence if silence >= self.read_timeout else None

    def ping_due(self, now: float) -> bool:
        return now - self.last_send >= self.ping_interval

    def arm(
        self,
        loop: asyncio.AbstractEventLoop,
        renewal: float | None,
        tick: Callable[[], None],
    ) -> None:
        """Call ``tick`` when the first of its duties is due (``renewal``: the lease's)."""
        self.cancel()
        due = min(self.last_recv + self.read_timeout, self.last_send + self.ping_interval)
        if renewal is not None:
            due = min(due, renewal)
        self.timer = loop.call_later(max(due - time.monotonic(), 0), tick)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
