"""Every public lock operation, written once for the sync and the asyncio clients.

Each operation is a generator, as the flows of ``zklocks._core.flow`` are: it yields the
flows' plain operations (requests, waits) and is sent their replies, and does no I/O of
its own. The bookkeeping around the flows lives here only: who holds what and how many
times, "the owner is 0 once the lease is lost", one absolute deadline for a multi-lock,
and the cleanup on every way out. The sync driver blocks and the asyncio driver awaits,
and both throw an interruption (Ctrl-C, a cancel) *into* the operation, which releases
what it took and re-raises. So ``Lock.acquire`` is ``driver.run(acquire(...))`` and
``AsyncLock.acquire`` is ``await driver.run(acquire(...))`` (psycopg 3's ``_commit_gen``
habit).

An operation picks its session after its bookkeeping (a reentrant acquire needs none, a
release after ``stop()`` sends nothing), by yielding ``Use(session)``: the driver runs
what follows on that session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from zklocks._core import dialects as _dialects
from zklocks._core import election as _election
from zklocks._core import events as _events
from zklocks._core import flow as _flow
from zklocks._core import multilock as _multilock
from zklocks._core import revoke as _revoke
from zklocks._core import waiting as _waiting
from zklocks._core.contenders import Contender, list_contenders
from zklocks._core.deadline import Clock, Deadline
from zklocks._core.layouts import ZKLOCKS
from zklocks._core.lease import LeaseBase
from zklocks._core.ops import Op, Pipeline
from zklocks._core.steps import await_children_change
from zklocks._errors import ClientClosed, LeaseUnkeepable, LockError, NotHeld
from zklocks._frontend.holdings import LockCore, owner_word
from zklocks._frontend.multi import MultiLockCore
from zklocks._protocol.records import GetChildren
from zklocks._vocabulary import WatchEvent, WatchKind

log = logging.getLogger("zklocks.lock")

L = TypeVar("L", bound=LeaseBase)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Use:
    """Run what follows on ``session`` (the client's, looked up when the operation needs
    it, so that a closed client is reported where the old code reported it)."""

    session: Any


Step: TypeAlias = Op | Use
Operation: TypeAlias = Generator[Step, Any, T]
SessionT = TypeVar("SessionT")
InboxT = TypeVar("InboxT")


class Stepper(Generic[SessionT, InboxT]):
    """A driver's place in one run of a flow or an operation: what goes into it next (a
    reply, or an interruption to throw), the session it chose, and the inbox for the
    watches of the flow under way (a new one with each ``Use``, so a flow never hears
    another's watches). Both drivers step with it; they differ only in how they wait."""

    __slots__ = ("_flow", "_inbox", "_new_inbox", "_session", "_step", "_value", "interrupted")

    def __init__(
        self, flow: Operation[Any], session: SessionT | None, new_inbox: Callable[[], InboxT]
    ) -> None:
        self._flow = flow
        self._session = session
        self._new_inbox = new_inbox
        self._inbox = new_inbox()
        self._step: Callable[[Any], Step] = flow.send
        self._value: Any = None
        self.interrupted = False  # since the first interruption the flow is cleaning up

    def next(self) -> Op | Finished:
        """The next request or wait to execute, or the flow's value once it returned."""
        while True:
            try:
                op = self._step(self._value)
            except StopIteration as stop:
                return Finished(stop.value)
            # The flow has the reply now. Holding it here while the next operation waits
            # would keep e.g. a thousand-name listing alive per waiter.
            self._value, self._step = None, self._flow.send
            if not isinstance(op, Use):
                return op
            self._session, self._inbox = op.session, self._new_inbox()

    @property
    def session(self) -> SessionT:
        if self._session is None:
            raise RuntimeError("an operation sent a request before it chose its session")
        return self._session

    @property
    def inbox(self) -> InboxT:
        return self._inbox

    def send(self, reply: Any) -> None:
        self._value, self._step = reply, self._flow.send

    def throw(self, interruption: BaseException) -> None:
        """Interrupted (Ctrl-C, a cancel, an error while blocked): the flow cleans up."""
        self._value, self._step = interruption, self._flow.throw
        self.interrupted = True


@dataclass(frozen=True, slots=True)
class Finished:
    """What a flow returned (``Stepper.next``)."""

    value: Any


# -- one lock --------------------------------------------------------------------------


AcquireFn: TypeAlias = Callable[[_flow.AcquireSpec], _flow.Flow]
"""Makes the acquire flow of one call: ``zklocks._core.flow.acquire``, or the simulator's
planted variant of it (a test showing that an old behaviour is caught)."""


def acquire(
    lock: LockCore[L],
    owner: object,
    owner_name: str,
    timeout: float | None,
    blocking: bool,
    start: AcquireFn | None = None,
) -> Operation[L | None]:
    """The lease of ``owner`` (reentered, or newly granted), or None when not ``blocking``
    and the lock is held by another. ``timeout`` is already checked; ``start`` makes the
    flow (``zklocks._core.flow.acquire`` unless the simulator plants another)."""
    again = lock._holdings.reenter(owner)
    if again is not None:
        return again
    lock._refuse_if_sibling_held(owner)
    stale = lock._holdings.take_stale(owner)
    if stale is not None:
        yield from give_up(lock, stale)
    session = lock._client._session_or_raise()
    problem = session.facts.lease_problem()
    if problem is not None:  # nothing is created: a lease here would be lost at once
        raise LeaseUnkeepable(f"{lock.path}: {problem}")
    yield Use(session)
    # the probe's clock starts first: a timed-out wait then measures >= its timeout
    probe = _events.AcquireProbe(lock.kind, lock.path, lock._config.layout.name)
    deadline = Deadline.after(timeout, clock=session.facts.clock)
    spec = lock._config.spec(owner_name, deadline.at, blocking, session.facts.clock)
    acquired = yield from probe.watch((start or _flow.acquire)(spec))
    if acquired is None:
        return None
    lease: L = lock._client._watch_lease(acquired)
    lease._seen = acquired.seen  # what its release writes on the lock directory
    lease._label(probe.kind, probe.path, probe.trace)
    lock._adopt(lease)
    lock._holdings.add(owner, lease)
    front = lock._front
    lock._equip(
        lease,
        front.timer(session),
        lambda: front.spawn(session, take_back(lock.path, lease)),
        lambda: front.spawn(session, look_at(lease)),
        lambda: front.spawn(session, count_waiters(lock, lease)),
    )
    return lease


def release(lock: LockCore[L], owner: object) -> Operation[None]:
    """Release one hold of ``owner`` (``NotHeld`` if it holds none); the last one deletes
    our node."""
    lease = lock._holdings.leave(owner)
    if lease is not None:
        yield from give_up(lock, lease)


def leave(lock: LockCore[L], owner: object, failed: bool) -> Operation[None]:
    """Leaving ``with``: release ``owner``'s hold; ``LockLost`` if the block did not
    fail but the lease was lost while held."""
    holding = lock._holdings.get(owner)
    yield from release(lock, owner)
    lock._lost_on_exit(None if holding is None else holding.lease, failed)


def release_lease(lock: LockCore[L], lease: L, if_held: bool) -> Operation[None]:
    """``lease.release()``: one release of whichever owner holds ``lease``."""
    last = lock._holdings.leave_lease(lease, if_held=if_held)
    if last is not None:
        yield from give_up(lock, last)


def let_go(lock: LockCore[L], lease: L) -> None:
    """Release ``lease`` without waiting (``hold()``'s exit after a loss): the hold ends
    now, and its node is deleted apart from the caller, for a lost lease's delete may
    wait for a connection as long as the session lives."""
    last = lock._holdings.leave_lease(lease, if_held=True)
    if last is None:
        return
    deletion = end(last, mark=lock._config.layout is ZKLOCKS)
    try:
        session = lock._client._session_or_none()
    except ClientClosed:
        return  # nothing is sent once the client stopped: the server ends our nodes
    if session is not None:
        lock._front.spawn(session, _deleted(lock.path, deletion))


def _deleted(path: str, deletion: Generator[Op, Any, bool]) -> Operation[None]:
    try:
        yield from deletion
    except LockError as error:
        log.info("%s: our node was not deleted after the loss: %s", path, error)


def give_up(lock: LockCore[L], lease: L) -> Operation[None]:
    """End ``lease`` and delete its node (nothing is sent once the client stopped)."""
    deletion = end(lease, mark=lock._config.layout is ZKLOCKS)
    session = lock._client._session_or_none()
    if session is not None:
        yield Use(session)
        yield from deletion


def end(lease: LeaseBase, *, mark: bool = False) -> Generator[Op, Any, bool]:
    """End ``lease`` (a later loss is no longer news) and return the flow that deletes
    its node; the simulator's clients release through here too. ``mark``: mark the
    release clean on the lock directory (the zklocks layout), with the losses its
    latest listing saw taken over, which a contender with a ``lock_delay`` reads
    (``zklocks._core.lock_delay``)."""
    # once lost (our node deleted by someone, say), whoever holds the lock now may
    # not be us: the one-node release then reads the node before deleting it
    owner = 0 if lease.lost else lease.owner
    lease._end()
    return _flow.release(lease.node, lease.token, owner, mark=mark, seen=lease._seen)


def take_back(path: str, lease: LeaseBase) -> Operation[None]:
    """``max_hold`` made ``lease`` lost: delete its node (run apart from every caller), by
    name and token, so a later holder of the one-node lock is never touched. The
    holder's own release later finds it gone."""
    try:
        yield from _flow.release(lease.node, lease.token)
    except LockError as error:
        log.warning("%s: could not delete %s after max_hold: %s", path, lease.node, error)


def count_waiters(lock: LockCore[L], lease: L) -> Operation[None]:
    """Read the lock directory with a child watch (run apart from every caller) and tell
    the lease how many wait behind it; the watch's event reads again while it is held."""
    waiting = lease._waiting
    if waiting.stopped:
        return

    def changed(event: WatchEvent) -> None:
        if event.kind is WatchKind.CHILD:
            waiting.changed()

    directory, name = lease.node.rsplit("/", 1)
    (names,) = yield Pipeline((GetChildren(directory),), watcher=changed)
    if not isinstance(names, list):
        return  # the session or the directory is gone: the lease is lost or ends
    layout = lock._config.layout
    me = layout.dialect.read(name)
    line = None if me is None else layout.dialect.line_up_to(me, names)
    if me is None or line is None:
        return  # our node is gone: the lease says lost
    permits = lock._config.permits
    line = [_dialects.with_permits(node, permits) for node in line]
    me = _dialects.with_permits(me, permits)
    waiting.seen(lease, _waiting.waiting_behind(layout.rules, me, line))


def look_at(lease: LeaseBase) -> Operation[None]:
    """Read our node's data (apart from every caller: a watch may ask for it on the
    client's event thread) and hand it to the lease, which looks for a revoke request."""
    lease._data_seen((yield from _revoke.read_data(lease.node)))


def contenders(lock: LockCore[Any]) -> Operation[list[Contender]]:
    """Every contender under the lock's path: holders first, then waiters in line order."""
    yield Use(lock._client._session_or_raise())
    return (yield from list_contenders(lock.path))


def wait_for_change(lock: LockCore[Any], timeout: float | None) -> Operation[bool]:
    """True when a contender joins or leaves, False once ``timeout`` (checked) passed."""
    session = lock._client._session_or_raise()
    yield Use(session)
    deadline = Deadline.after(timeout, clock=session.facts.clock)
    return (yield from await_children_change(lock.path, deadline.at))


# -- several locks as one --------------------------------------------------------------


def acquire_all(
    multi: MultiLockCore[Any, L],
    owner: object,
    owner_name: str,
    timeout: float | None,
    start: AcquireFn | None = None,
) -> Operation[list[L]]:
    """Every part's lease (in the order given), taken in the global order under one
    deadline. On any way out (``LockTimeout``, an error, Ctrl-C, a cancel) what was taken
    is released, then the first cause is raised; an interruption that lands during that
    cleanup (not an ``Exception``) is never swallowed. ``start``: as for ``acquire``."""
    deadline = Deadline.after(timeout, clock=_clock_of(multi._parts[multi._order[0]]))
    taken: list[LockCore[L]] = []
    leases: dict[int, L] = {}
    try:
        for index in multi._order:
            part = multi._parts[index]
            lease = yield from acquire(part, owner, owner_name, deadline.remaining(), True, start)
            assert lease is not None  # a blocking acquire grants or raises
            leases[index] = lease
            taken.append(part)
    except BaseException as exc:
        interruption = yield from release_all(reversed(taken), owner)
        if interruption is not None and not _ordinary(interruption, exc):
            raise interruption from exc
        raise
    result = [leases[index] for index in range(len(multi._parts))]
    _multilock.share_fate(result)
    return result


def _clock_of(lock: LockCore[Any]) -> Clock:
    """The clock of the session ``lock``'s client runs on (the simulator's is virtual).

    With no session (not started, stopped, forked) nothing will be timed on it: the
    acquire raises ``ClientClosed`` before it waits, or reenters without waiting."""
    try:
        session = lock._client._session_or_none()
    except ClientClosed:
        session = None
    return time.monotonic if session is None else session.facts.clock


def _ordinary(interruption: BaseException, cause: BaseException) -> bool:
    """May a failure of the cleanup give way to its cause? Yes for an ``Exception``; a
    Ctrl-C or a cancel that lands during the cleanup is never swallowed."""
    return interruption is cause or isinstance(interruption, Exception)


def release_held(multi: MultiLockCore[Any, Any], owner: object) -> Operation[None]:
    """Release every part ``owner`` holds, in the reverse of the global order
    (``NotHeld`` if it holds none); the first interruption is raised once every part
    was released."""
    parts = multi._parts
    held = [parts[i] for i in reversed(multi._order) if parts[i]._holdings.get(owner)]
    if not held:
        raise NotHeld(f"this {owner_word(owner)} does not hold {multi!r}")
    interruption = yield from release_all(held, owner)
    if interruption is not None:
        raise interruption


def leave_all(multi: MultiLockCore[Any, L], owner: object, failed: bool) -> Operation[None]:
    """Leaving a multi-lock's ``with``: release every part; ``LockLost`` if the block
    did not fail but a part's lease was lost while held."""
    leases = multi.leases or []
    yield from release_held(multi, owner)
    multi._lost_on_exit(leases, failed)


def release_all(parts: Iterable[LockCore[L]], owner: object) -> Operation[BaseException | None]:
    """Release each part even if Ctrl-C (or a cancel) lands meanwhile; return the first
    interruption."""
    interruption: BaseException | None = None
    for part in parts:
        try:
            yield from release(part, owner)
        except BaseException as exc:
            interruption = interruption or exc
    return interruption


# -- observing an election -------------------------------------------------------------


def leader(lock: LockCore[Any]) -> Operation[Contender | None]:
    """Who leads the election at the lock's path now (None: nobody)."""
    yield Use(lock._client._session_or_raise())
    return (yield from _election.read_leader(lock.path, lock._config.layout.dialect))


class Ended:
    """What ``observe_step`` returns when the observation is over (the client stopped, or
    no change came in time)."""


ENDED = Ended()


@dataclass(slots=True)
class Observation:
    """Where one ``observe()`` stands: the leader read last, and the one shown last."""

    path: str
    timeout: float | None
    read: bool = False
    last: Contender | None = None
    shown: Contender | None = None
    first: bool = field(default=True)


def observe_step(lock: LockCore[Any], seen: Observation) -> Operation[Contender | Ended | None]:
    """The next leader to show (None: nobody leads), or ``ENDED``. Waits on one watch
    (the leader's node; with no leader, the path's children), never by polling."""
    while True:
        try:
            if seen.read:
                session = lock._client._session_or_raise()
                yield Use(session)
                deadline = Deadline.after(seen.timeout, clock=session.facts.clock)
                node = None if seen.last is None else seen.last.node
                dialect = lock._config.layout.dialect
                if not (yield from _election.await_change(seen.path, node, deadline.at, dialect)):
                    return ENDED
            yield Use(lock._client._session_or_raise())
            leader = yield from _election.read_leader(seen.path, lock._config.layout.dialect)
        except ClientClosed:
            return ENDED
        seen.read, seen.last = True, leader
        if seen.first or not _election.same_leader(leader, seen.shown):
            seen.first, seen.shown = False, leader
            return leader
