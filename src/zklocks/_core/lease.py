"""A lease: what holding a lock gives the holder, and the rule that says it is lost.

The lease-loss rule (``loss_deadline``): ZooKeeper expires a session when it has heard
nothing from the client for the session timeout. The server's timer for the current
silence can have started no earlier than the moment the client *sent* the last request
the server answered (the server had heard from us by then). So the earliest instant the
server may expire our session, delete our node and grant the lock to someone else is

    last_answered_sent + session_timeout

measured on our own monotonic clock. That holds where the server that answers is the
one that times the session (a standalone server). On an ensemble only the leader times
sessions and a member cut off from it goes on answering for a while, so the session's
``last_answered_sent`` fact is then the connection's ``lease_sent``: an earlier answer
the leader has surely counted (see ``Connection.lease_sent`` and docs/locks.md, "What
lost guarantees on an ensemble"). ``lost`` is true from that instant on, whether or
not we have noticed a disconnection: a process that was paused (SIGSTOP, a long GC, a
suspended VM) learns it on its first look at the clock, before it reconnects. While the
connection is down but that instant has not come, the lease is ``suspended``.

The lease is also lost, at once, when the session is reported expired or our node is
deleted by anyone. Lost is sticky: a lease never comes back.

A bound on the hold (``max_hold``) is a second clock rule: ``max_hold`` seconds after
the grant the lease is lost, on our own clock whatever the connection's state (a timer
on the client's event thread, and the same test at every look at ``lost``), and the
lock that made it is asked to take its node back (``_limit_hold``'s ``take_back``) so
the next waiter is granted. A released lease's timer is cancelled, and a firing after
the end is ignored: the bound never reaches a later holder.

A revoke request (``zklocks._core.revoke``) is a marker written into our node's data.
The keeper's watch on our node fires on that change, and the lease then looks at the
data. A request written *before* the watch was set fires nothing, so the lease also
looks once after the watch is set (ZooKeeper answers one session's requests in order:
that look sees any write made before the watch), when someone listens for revokes.
Heard once; a lease never un-hears it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

from zklocks._core import current as _current
from zklocks._core import events as _events
from zklocks._core import revoke as _revoke
from zklocks._core import waiting as _waiting
from zklocks._core.deadline import Deadline
from zklocks._errors import LockError, LockLost
from zklocks._protocol.records import Stat
from zklocks._vocabulary import SessionFacts

LostCallback = Callable[["LeaseBase"], None]
RevokeCallback = Callable[["LeaseBase"], None]
Cancel = Callable[[], None]
Scheduler = Callable[[float, Callable[[], None]], Cancel]

MAX_HOLD = "max_hold"
"""The loss reason's metric code (and the word in ``lost_reason``) for an overlong hold."""


def loss_deadline(session: SessionFacts) -> Deadline:
    """The instant, on the session's clock, from which the server may have expired us
    (never while no request of the session was answered)."""
    sent = session.last_answered_sent()
    return Deadline(None if sent is None else sent + session.session_timeout(), session.clock)


class LeaseBase:
    """Proof of holding a lock, with the fencing token to show a protected resource.

    ``token`` strictly increases across successive holders of one lock path (it is our
    node's creation zxid). Pass it with every write to the resource the lock protects,
    and have the resource refuse a token lower than the highest it has accepted: a
    holder that lost its lease without knowing it is then refused instead of corrupting
    data (see docs/locks.md, "Fencing").

    Lost-callbacks run once, on the client's event thread (the event loop, for
    ``AsyncClient``), so they must be quick and must not block on the lock;
    ``wait_lost`` is the waiting alternative.
    """

    def __init__(self, node: str, token: int, session: SessionFacts, owner: int = 0) -> None:
        self._node = node
        self._token = token
        self._owner = owner
        self._session = session
        self._lost_reason: str | None = None
        self._callbacks: list[LostCallback] = []
        self._mutex = threading.Lock()
        self._ended = False  # released by its holder: no longer watched
        # what the lock events and metrics report (set by the lock that made it)
        self._kind = "lock"
        self._path = node.rsplit("/", 1)[0]
        self._granted_at = time.monotonic()
        self._counted = False  # counted in the "held" gauge until released or lost
        self._hold: _events.HoldTrace | None = None  # the hold's span, when traced
        # the hold's bound (``_limit_hold``): when it falls, and who takes our node back
        self._max_hold: float | None = None
        self._hold_deadline: float | None = None
        self._take_back: Callable[[], None] | None = None
        self._cancel_hold_timer: Cancel | None = None
        # revoke requests: who listens, whether heard, and how to look at our node's data
        self._revoke_callbacks: list[RevokeCallback] = []
        self._revoked = False
        self._look: Callable[[], None] | None = None  # the front end's read; answers _data_seen
        self._node_watched = False
        self._looked = False  # looked (or looking) since the watch was set
        self._waiting = _waiting.Waiting()  # who queues behind: add_waiting_callback
        # the lock directory's stat at the grant's latest listing (zklocks._core.lock_delay)
        self._seen: Stat | None = None

    @property
    def token(self) -> int:
        """The fencing token: our node's creation zxid, higher for every later holder."""
        return self._token

    @property
    def node(self) -> str:
        """The full path of our contender node: release deletes it, and so does ZooKeeper
        when our session ends."""
        return self._node

    @property
    def owner(self) -> int:
        """The id of the ZooKeeper session that created our node (0 if unknown)."""
        return self._owner

    def _label(self, kind: str, path: str, trace: _events.AcquireTrace | None = None) -> None:
        """Named by the lock that made it (for logs and metrics); counted as held until it
        ends. A lease lost or released meanwhile is never counted, so never uncounted.
        With ``trace`` (the acquire's span) the hold's span starts here, linked to it."""
        self._kind = kind
        self._path = path
        with self._mutex:
            if self._lost_reason is None and not self._ended:
                self._counted = _events.lease_held(kind, path)
                if trace is not None:
                    self._hold = trace.hold(kind, path, self._token, self._node)

    @property
    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of this hold's span (``zklocks.hold``) while it is held
        and traced (OpenTelemetry installed and a tracer provider configured), else
        None: hand it to work done under the lock so its spans join the hold
        (``zklocks run`` puts it in the command's ``TRACEPARENT``)."""
        hold = self._hold
        return None if hold is None else hold.traceparent()

    def _traced(self, name: str) -> None:
        """An event on the hold's span (suspended, resumed), when traced."""
        hold = self._hold
        if hold is not None:
            hold.event(name)

    def __repr__(self) -> str:
        if self.lost:
            state = "lost"
        elif self._ended:
            state = "released"
        else:
            state = "suspended" if self.suspended else "held"
        return f"<Lease {self.node} token={self.token} {state}>"

    @property
    def lost(self) -> bool:
        """Has the lease been lost (or may the server have expired our session)?"""
        if self._lost_reason is None:
            self._check()
        return self._lost_reason is not None

    @property
    def lost_reason(self) -> str | None:
        """Why the lease was lost, in words, or None."""
        return self._lost_reason if self.lost else None

    def check(self) -> None:
        """Raise ``LockLost`` if the lease is lost: a cheap checkpoint (no I/O)."""
        if self.lost:
            raise LockLost(f"{self._path}: the lease was lost ({self._lost_reason})")

    def time_left(self) -> float:
        """Seconds until lost unless the session is proven again (the lease rule's bound,
        on the session's clock, and ``max_hold``'s); 0.0 once lost or released. No I/O."""
        if self.lost or self._ended:
            return 0.0
        left = loss_deadline(self._session).remaining()
        bound = Deadline(self._hold_deadline, self._session.clock).remaining()
        return min((t for t in (left, bound) if t is not None), default=0.0)

    @property
    def suspended(self) -> bool:
        """Cut off from ZooKeeper, but not for long enough that the lease may be lost.

        Never for a lease that has ended: it no longer depends on the connection."""
        return not self._ended and not self.lost and not self._session.connected()

    def add_lost_callback(self, fn: LostCallback) -> None:
        """Call ``fn(lease)`` once when the lease is lost (at once if it already is)."""
        with self._mutex:
            if self._lost_reason is None:
                self._callbacks.append(fn)
                return
        fn(self)

    def add_revoke_callback(self, fn: RevokeCallback) -> None:
        """Call ``fn(lease)`` once when someone asks this holder to let go (at once if
        someone has already): ``client.revoke(path)``, ``zklocks revoke``, or Curator's
        ``Revoker`` for a ``layout="curator"`` lock.

        Revocation is a request, not a loss: the lease stays held until the holder
        releases it (do that from another thread or task, not in ``fn``). ``fn`` runs on
        a thread (or, for ``AsyncClient``, in a task) of the client's, so it must be
        quick; an exception it raises is logged and ignored.
        """
        with self._mutex:
            heard = self._revoked
            if not heard:
                self._revoke_callbacks.append(fn)
        if heard:
            self._run_revoke_callback(fn)
        else:
            self._look_if_due()

    def add_waiting_callback(self, fn: _waiting.WaitingCallback) -> None:
        """Call ``fn(lease, waiting)`` when contenders queue behind this holder.

        ``waiting`` counts the contenders queued behind our node that do not hold
        (others holding beside it, readers or permits, do not count). ``fn`` runs each
        time that count rises, and once at once if someone already waits. Only a lease
        with such a callback watches the lock directory's children, while it is held;
        waiters still watch only their predecessor. ``fn`` runs on a thread (or, for
        ``AsyncClient``, in a task) of the client's, so it must be quick; an exception it
        raises is logged and ignored.
        """
        if not self._ended and self._lost_reason is None:
            self._waiting.add(self, fn)

    def _allow_waiter_counts(self, count: Callable[[], None]) -> None:
        """(The lock that made it) how to count who waits behind us: ``count()`` reads
        the lock directory with a child watch, apart from the caller."""
        self._waiting.allow(count)

    def _allow_looks(self, look: Callable[[], None]) -> None:
        """(The lock that made it) how to read our node's data: ``look()`` answers with
        ``_data_seen``, apart from the caller."""
        self._look = look
        self._look_if_due()

    def _watch_set(self) -> None:
        """(The keeper) our node's data watch is set: a request written before it shows
        only in a look made after it."""
        self._node_watched = True
        self._look_if_due()

    def _data_changed(self) -> None:
        """(The keeper) our node's data changed: only a revoke request changes it."""
        look = self._look
        if look is not None and not self._revoked and not self._ended:
            look()

    def _look_if_due(self) -> None:
        with self._mutex:
            due = (
                self._look is not None
                and self._node_watched
                and bool(self._revoke_callbacks)
                and not self._looked
                and not self._ended
            )
            if due:
                self._looked = True
        look = self._look  # read once: a release on another thread may drop it
        if due and look is not None:
            look()

    def _data_seen(self, data: bytes | None) -> None:
        """Our node's data, as a look found it: a revoke request runs the callbacks."""
        if data is None or not _revoke.is_request(data):
            return
        with self._mutex:
            if self._revoked or self._ended:
                return
            self._revoked = True
            callbacks, self._revoke_callbacks = self._revoke_callbacks, []
        _events.lease_revoke_requested(self._kind, self._path, self._token)
        self._traced("zklocks.revoke_requested")
        for callback in callbacks:
            self._run_revoke_callback(callback)

    def _run_revoke_callback(self, fn: RevokeCallback) -> None:
        try:
            fn(self)
        except Exception:
            _events.log.exception("%s: a revoke callback failed", self._path)

    def _limit_hold(
        self, max_hold: float, schedule: Scheduler, take_back: Callable[[], None]
    ) -> None:
        """Bound the hold to ``max_hold`` seconds from now (the grant), on our own clock.

        ``schedule`` arms the timer on the client's event thread; ``take_back`` deletes
        our node, apart from every caller, once the bound has made the lease lost."""
        self._max_hold = max_hold
        self._hold_deadline = Deadline.after(max_hold, clock=self._session.clock).at
        self._take_back = take_back
        cancel = schedule(max_hold, self._overheld)
        with self._mutex:
            if self._lost_reason is None and not self._ended:
                self._cancel_hold_timer = cancel
                return
        cancel()  # lost or released meanwhile: the timer has nothing left to do

    def _overheld(self) -> None:
        """The bound has fallen (the timer is the authority: it may fire a hair early)."""
        self._mark_lost(f"held longer than max_hold ({self._max_hold:g} s)", MAX_HOLD)

    def _check(self) -> bool:
        """Apply the clock rules now; mark the lease lost if its time has come."""
        if self._lost_reason is not None or self._ended:
            return self._lost_reason is not None
        if Deadline(self._hold_deadline, self._session.clock).passed():
            self._overheld()
            return True
        if loss_deadline(self._session).passed():
            self._mark_lost(*self._session.loss_reason())
        return self._lost_reason is not None

    def _mark_lost(self, reason: str, code: str) -> None:
        """Record the loss (first reason wins) and run the callbacks once.

        ``code`` is the reason as a metric label: ``node_deleted``, ``session_expired``,
        ``client_stopped``, ``no_answer``, ``unproven`` (a member answered, nothing proved
        the session at the leader) or ``max_hold``. A loss to ``max_hold`` first has our
        node taken back, so the next waiter does not wait on the callbacks.
        """
        with self._mutex:
            if self._lost_reason is not None or self._ended:
                return
            self._lost_reason = reason
            callbacks, self._callbacks = self._callbacks, []
            counted, self._counted = self._counted, False
            cancel, self._cancel_hold_timer = self._cancel_hold_timer, None
            hold, self._hold = self._hold, None
        self._waiting.stop()
        if cancel is not None:
            cancel()
        take_back = self._take_back  # read once: a release on another thread may drop it
        if code == MAX_HOLD and take_back is not None:
            take_back()
        if hold is not None:
            hold.end(MAX_HOLD if code == MAX_HOLD else "lost", code)
        held_for = time.monotonic() - self._granted_at
        _events.lease_lost(self._kind, self._path, held_for, self._token, (reason, code), counted)
        self._wake_waiters()
        for callback in callbacks:
            callback(self)

    def _wake_waiters(self) -> None:
        raise NotImplementedError

    @property
    def ended(self) -> bool:
        """Released by its holder."""
        return self._ended

    def _disown(self, reason: str) -> None:
        """In a process forked from the holder's: this copy of the lease proves nothing
        here, so it reads as lost. Called at the fork, where no lock may be taken (one
        held by a thread of the parent stays held in the child) and no callback may run:
        only plain attribute writes, no callbacks, no metrics."""
        if self._lost_reason is None and not self._ended:
            self._lost_reason = reason
            self._callbacks = []
            self._counted = False

    def _lost_on_exit(self, exc: BaseException | None) -> None:
        """Leaving a ``with`` block normally after the lease was lost raises ``LockLost``
        (as leaving ``with lock`` does)."""
        if exc is None and self.lost:
            raise LockLost(f"{self._path}: the lease was lost while held ({self.lost_reason})")

    def _end(self) -> None:
        """The holder released it: stop watching (a later loss is no longer news)."""
        with self._mutex:
            if self._ended:
                return
            self._ended = True
            self._callbacks.clear()
            counted, self._counted = self._counted, False
            cancel, self._cancel_hold_timer = self._cancel_hold_timer, None
            self._revoke_callbacks.clear()
            hold, self._hold = self._hold, None
            # the front end's reads hold this lease: dropped, nothing is left for the
            # garbage collector (its passes cost the asyncio client a fifth of its CPU)
            self._look = self._take_back = None
        self._waiting.stop()
        if cancel is not None:
            cancel()  # a released lease's bound never fires on a later holder
        if hold is not None:
            hold.end("revoked" if self._revoked else "released", None)
        _events.lease_released(self._kind, self._path, time.monotonic() - self._granted_at, counted)


Releaser = Callable[["Lease", bool], None]
AsyncReleaser = Callable[["AsyncLease", bool], Awaitable[None]]


def _not_from_a_lock(lease: LeaseBase) -> LockError:
    return LockError(f"{lease!r} was not made by a lock: there is nothing to release")


class Lease(LeaseBase):
    """Proof of holding a lock, from the sync ``Client``: ``token`` (fencing), ``node``,
    ``lost`` and ``lost_reason``; ``wait_lost`` blocks the calling thread.

    A lease is also a handle on the hold: ``lease.release()`` releases it from any
    thread, and ``with lock.acquire(timeout=5) as lease:`` releases it on the way out
    of the block, whatever way that is.
    """

    def __init__(self, node: str, token: int, session: SessionFacts, owner: int = 0) -> None:
        super().__init__(node, token, session, owner)
        # Made by the first wait_lost: most leases are never waited on, and an Event (a
        # Condition and its lock) per acquire was measurable in the many-locks benchmark.
        self._lost_event: threading.Event | None = None
        self._releaser: Releaser | None = None  # set by the lock that granted it

    def release(self) -> None:
        """Release this lease, from any thread (not only the one that acquired it).

        It counts as one ``release()`` of the lock by the thread that holds it: the node
        is deleted when that thread's last hold ends (a reentrant lock counts). A lost
        lease is released without an error, as ``Lock.release()`` does. ``NotHeld`` if
        it was released already; ``ClientClosed`` in a process forked from the holder's.
        """
        if self._releaser is None:
            raise _not_from_a_lock(self)
        self._releaser(self, False)

    def __enter__(self) -> Lease:
        _current.entered(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release (unless released already, by any thread); then, leaving normally, a
        lease that was lost raises ``LockLost``."""
        _current.left()
        if self._releaser is None:
            raise _not_from_a_lock(self)
        self._releaser(self, True)
        self._lost_on_exit(exc)

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        if self.lost:  # (checks the timing, which may lose it: not under the mutex)
            return True
        with self._mutex:  # the loss sets its reason under it, then wakes the event
            if self._lost_reason is not None:
                return True
            if self._lost_event is None:
                self._lost_event = threading.Event()
            event = self._lost_event
        return event.wait(timeout)

    def _wake_waiters(self) -> None:
        with self._mutex:
            event = self._lost_event
        if event is not None:
            event.set()


class AsyncLease(LeaseBase):
    """Proof of holding a lock, from ``AsyncClient``: ``token`` (fencing), ``node``,
    ``lost`` and ``lost_reason``; ``await lease.wait_lost()``. Loop-thread only.

    ``await lease.release()`` releases it from any task, and
    ``async with await lock.acquire(timeout=5) as lease:`` on the way out of the block.
    """

    def __init__(self, node: str, token: int, session: SessionFacts, owner: int = 0) -> None:
        super().__init__(node, token, session, owner)
        self._lost_event = asyncio.Event()
        self._releaser: AsyncReleaser | None = None  # set by the lock that granted it

    async def release(self) -> None:
        """Release this lease, from any task of the client's loop (not only the one that
        acquired it); as ``Lease.release``, it counts as one release by the holding task.
        """
        if self._releaser is None:
            raise _not_from_a_lock(self)
        await self._releaser(self, False)

    async def __aenter__(self) -> AsyncLease:
        _current.entered(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """As ``Lease.__exit__``."""
        _current.left()
        if self._releaser is None:
            raise _not_from_a_lock(self)
        await self._releaser(self, True)
        self._lost_on_exit(exc)

    async def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        if self.lost:
            return True
        try:
            await asyncio.wait_for(self._lost_event.wait(), timeout)
        except TimeoutError:
            return self.lost
        return True

    def _wake_waiters(self) -> None:
        self._lost_event.set()


def current_lease() -> Lease | AsyncLease | None:
    """The lease of this thread's (or asyncio task's) innermost ``with lock``, ``with
    lease`` or ``zklocks.exclusive`` call; None outside every one.

    For a fenced write deep inside the block without handing the lease down:
    ``zklocks.current_lease().token``. A task started inside an ``async with`` block
    starts with its leases too (asyncio copies the context into it).
    """
    for lease in reversed(_current.inside()):
        # (a released lease holds nothing: a block whose exit an interruption cut short,
        # ``lock.hold()``'s rare race, leaves its ended lease behind)
        if isinstance(lease, Lease | AsyncLease) and not lease.ended:
            return lease
    return None
