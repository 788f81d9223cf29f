"""The lease keeper: one per client, it watches every lease the client holds.

It tells each lease of our node's deletion (a getData watch on it), of the session's
expiry or the client's stop (the connection's states), and times the lease rule's
instant (``lease.loss_deadline``) while cut off, and on an ensemble also while
connected. The leases themselves, and the rule, are in ``lease.py``.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

from zklocks._core import events as _events
from zklocks._core.lease import Cancel, LeaseBase, Scheduler, loss_deadline
from zklocks._vocabulary import SessionFacts, SessionState, Watcher, WatchEvent, WatchKind

__all__ = ["NODE_WATCH_DELAY", "LeaseKeeper"]


NODE_WATCH_DELAY = 0.05
"""Seconds after a grant before the watch on our own node (a getData watch) is set.

Most locks are held briefly: a lease released sooner never needs the watch, and the
uncontended cycle stays at 3 requests (2 for the one-node lock). Session expiry and the
clock rule are watched from the grant on; only a deletion of our node by someone else
is noticed up to this much (plus ``ARM_SPACING``) later than it could be.
"""

ARM_SPACING = NODE_WATCH_DELAY / 5
"""The leases' node watches are set by one timer per client, which fires at most this
often: every due watch at each firing. One timer per lease would wake the client's
event thread once per grant, to set a watch that a lease released sooner never needs.
"""


class LeaseKeeper:
    """Watches a client's leases: our node's deletion, session expiry, the clock rule.

    Both clients use one: it watches each lease's node (a getData watch, set without
    waiting for its reply, ``NODE_WATCH_DELAY`` after the grant, so a grant costs no
    extra round trip), marks every lease lost when the session expires or the client
    stops, and while cut off arms one timer for the instant the server may have expired
    us (``loss_deadline``). On an ensemble (``SessionFacts.lagging``) that instant can
    come while still connected, so the timer also runs then, re-armed at each firing
    while a lease is held (one timer per client, firing about once a ping interval).
    """

    def __init__(self, facts: Callable[[], SessionFacts | None], schedule: Scheduler) -> None:
        self._facts = facts
        self._schedule = schedule
        self._leases: weakref.WeakSet[LeaseBase] = weakref.WeakSet()
        self._cancel_timer: Cancel | None = None
        self._timer_mutex = threading.Lock()  # track() arms from the caller's thread
        # leases whose node watch is due (at, arm), in order; one timer sets them
        self._arms: deque[tuple[float, Callable[[], None]]] = deque()
        self._arming = False  # that timer is set
        self._connected = False
        self._suspended = False  # cut off since the last CONNECTED (for the resumed event)

    def _trace_all(self, name: str) -> None:
        if _events.tracing is not None:  # no hold has a span otherwise
            for lease in list(self._leases):
                if not lease.ended and not lease.lost:
                    lease._traced(name)

    def track(self, lease: LeaseBase, watch_node: Callable[[str, Watcher], None]) -> None:
        """Start watching ``lease``; ``watch_node`` sets a getData watch on its node."""
        self._leases.add(lease)

        on_event = _NodeWatch(lease, watch_node)

        def arm() -> None:
            if not lease.ended and not lease.lost:
                watch_node(lease.node, on_event)
                lease._watch_set()

        self._arm_later(arm)
        if self._cancel_timer is None and self._timed_while_connected():
            self._arm_timer()

    def _now(self) -> float:
        facts = self._facts()  # the session's clock (the simulator's is virtual)
        return time.monotonic() if facts is None else facts.clock()

    def _arm_later(self, arm: Callable[[], None]) -> None:
        """Run ``arm`` ``NODE_WATCH_DELAY`` from now, on the one timer that sets them."""
        due = self._now() + NODE_WATCH_DELAY
        with self._timer_mutex:
            self._arms.append((due, arm))
            if self._arming:
                return
            self._arming = True
        self._schedule(NODE_WATCH_DELAY, self._arm_due)

    def _arm_due(self) -> None:
        """(The timer) set every due watch; again for the next, ``ARM_SPACING`` on."""
        now = self._now()
        due: list[Callable[[], None]] = []
        with self._timer_mutex:
            arms = self._arms
            while arms and arms[0][0] <= now:
                due.append(arms.popleft()[1])
            later = max(arms[0][0] - now, ARM_SPACING) if arms else None
            self._arming = later is not None
        if later is not None:
            self._schedule(later, self._arm_due)
        for arm in due:
            arm()

    def on_state(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self.mark_all_lost("the ZooKeeper session expired", "session_expired")
        elif state is SessionState.CLOSED:
            self.mark_all_lost("the client was stopped", "client_stopped")
        elif state is SessionState.SUSPENDED:
            self._connected = False
            self._suspended = True
            self._trace_all("zklocks.suspended")
            self._arm_timer()
        elif state is SessionState.CONNECTED:
            self._connected = True
            if self._suspended:
                self._suspended = False
                self._trace_all("zklocks.resumed")
            if self._timed_while_connected():
                self._arm_timer()
            else:
                self._disarm_timer()

    def _timed_while_connected(self) -> bool:
        facts = self._facts()
        return self._connected and facts is not None and facts.lagging()

    def mark_all_lost(self, reason: str, code: str) -> None:
        self._disarm_timer()
        for lease in list(self._leases):
            lease._mark_lost(reason, code)

    def disown_all(self, reason: str) -> None:
        """In a forked child: every lease reads as lost, quietly (``LeaseBase._disown``).
        The timer is the parent's loop's and is left alone."""
        for lease in list(self._leases):
            lease._disown(reason)

    def _arm_timer(self) -> None:
        facts = self._facts()
        if facts is None:
            return
        deadline = loss_deadline(facts)
        with self._timer_mutex:
            delay = deadline.remaining()
            if delay is None:
                return  # no request answered yet: no instant to time
            self._disarm_timer()
            self._cancel_timer = self._schedule(delay, self._fire)

    def _fire(self) -> None:
        self.check_all()
        live = any(not lease.ended and not lease.lost for lease in list(self._leases))
        if live and self._timed_while_connected():
            self._arm_timer()  # the instant moved on with newer answers: time it again
        else:
            self._cancel_timer = None

    def check_all(self) -> None:
        for lease in list(self._leases):
            lease._check()

    def _disarm_timer(self) -> None:
        cancel, self._cancel_timer = self._cancel_timer, None
        if cancel is not None:
            cancel()


class _NodeWatch:
    """The watcher on a lease's node: a deletion or the session's end makes the lease
    lost, a data change (a revoke request) is looked at and watched again.

    An object, not a closure: a closure that re-arms itself holds itself through its
    own cell, and every lease would then leave a reference cycle for the garbage
    collector, whose passes were a fifth of the asyncio client's CPU under load."""

    __slots__ = ("_lease", "_watch_node")

    def __init__(self, lease: LeaseBase, watch_node: Callable[[str, Watcher], None]) -> None:
        self._lease = lease
        self._watch_node = watch_node

    def __call__(self, event: WatchEvent) -> None:
        lease = self._lease
        if event.kind is WatchKind.DELETED:
            lease._mark_lost(f"our node {lease.node} was deleted", "node_deleted")
        elif event.kind is WatchKind.SESSION_LOST:
            lease._mark_lost("the ZooKeeper session expired", "session_expired")
        elif event.kind is WatchKind.CLOSED:
            lease._mark_lost("the client was stopped", "client_stopped")
        elif not lease.lost:
            self._watch_node(lease.node, self)  # a data change: watch again
            lease._data_changed()  # a revoke request, it can only be
