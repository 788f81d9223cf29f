"""A lease: what holding a lock gives the holder, and the rule that says it is lost.

The lease-loss rule (``loss_deadline``): ZooKeeper expires a session when it has heard
nothing from the client for the session timeout. The server's timer for the current
silence can have started no earlier than the moment the client *sent* the last request
the server answered (the server had heard from us by then). So the earliest instant the
server may expire our session, delete our node and grant the lock to someone else is

    last_answered_sent + session_timeout

measured on our own monotonic clock. ``lost`` is true from that instant on, whether or
not we have noticed a disconnection: a process that was paused (SIGSTOP, a long GC, a
suspended VM) learns it on its first look at the clock, before it reconnects. While the
connection is down but that instant has not come, the lease is ``suspended``.

The lease is also lost, at once, when the session is reported expired or our node is
deleted by anyone. Lost is sticky: a lease never comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

LostCallback = Callable[["Lease"], None]


def loss_deadline(last_answered_sent: float | None, session_timeout: float) -> float | None:
    """The instant (driver's monotonic clock) from which the server may have expired us."""
    if last_answered_sent is None:
        return None
    return last_answered_sent + session_timeout


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What a lease asks of the client's session: pure values and a clock."""

    clock: Callable[[], float]
    session_timeout: Callable[[], float]
    last_answered_sent: Callable[[], float | None]
    connected: Callable[[], bool]


class Lease:
    """Proof of holding a lock, with the fencing token to show a protected resource.

    ``token`` strictly increases across successive holders of one lock path (it is our
    node's creation zxid). Pass it with every write to the resource the lock protects,
    and have the resource refuse a token lower than the highest it has accepted: a
    holder that lost its lease without knowing it is then refused instead of corrupting
    data (see docs/locks.md, "Fencing").

    Lost-callbacks run once, on the client's event thread, so they must be quick and must
    not block on the lock; ``wait_lost`` is the blocking alternative.
    """

    def __init__(self, node: str, token: int, session: SessionFacts) -> None:
        self.node = node
        self.token = token
        self._session = session
        self._lost_reason: str | None = None
        self._callbacks: list[LostCallback] = []
        self._mutex = threading.Lock()
        self._lost_event = threading.Event()
        self._ended = False  # released by its holder: no longer watched

    def __repr__(self) -> str:
        state = "lost" if self.lost else "suspended" if self.suspended else "held"
        return f"<Lease {self.node} token={self.token} {state}>"

    @property
    def lost(self) -> bool:
        """Has the lease been lost (or may the server have expired our session)?"""
        if self._lost_reason is None:
            self.check()
        return self._lost_reason is not None

    @property
    def lost_reason(self) -> str | None:
        """Why the lease was lost, in words, or None."""
        return self._lost_reason if self.lost else None

    @property
    def suspended(self) -> bool:
        """Cut off from ZooKeeper, but not for long enough that the lease may be lost."""
        return not self.lost and not self._session.connected()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        if self.lost:
            return True
        return self._lost_event.wait(timeout)

    def add_lost_callback(self, fn: LostCallback) -> None:
        """Call ``fn(lease)`` once when the lease is lost (at once if it already is)."""
        with self._mutex:
            if self._lost_reason is None:
                self._callbacks.append(fn)
                return
        fn(self)

    def check(self) -> bool:
        """Apply the clock rule now; mark the lease lost if its time has come."""
        if self._lost_reason is not None or self._ended:
            return self._lost_reason is not None
        deadline = loss_deadline(
            self._session.last_answered_sent(), self._session.session_timeout()
        )
        if deadline is not None and self._session.clock() >= deadline:
            self.mark_lost("no answer from ZooKeeper for a whole session timeout")
        return self._lost_reason is not None

    def mark_lost(self, reason: str) -> None:
        """Record the loss (first reason wins) and run the callbacks once."""
        with self._mutex:
            if self._lost_reason is not None or self._ended:
                return
            self._lost_reason = reason
            callbacks, self._callbacks = self._callbacks, []
        self._lost_event.set()
        for callback in callbacks:
            callback(self)

    def end(self) -> None:
        """The holder released it: stop watching (a later loss is no longer news)."""
        with self._mutex:
            self._ended = True
            self._callbacks.clear()
