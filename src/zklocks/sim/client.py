"""A simulated client: one process's session, watches, lease keeper and lock program,
and the simulator's driver of the lock flows.

A client runs a *program*: for every cycle of its script, think, run
``zklocks._core.flow.acquire`` to its end, hold, run ``zklocks._core.flow.release``. The
flows are the real ones; only the driver is the simulator's (``SimClient.drive``, a short
loop like ``zklocks._sync.driver``: send the requests, hand over the watch events of the
run, or the deadline). A program is a generator that yields *actions* — send one
request, wait for a connection, wait for a watch, sleep — and the scheduler
(``zklocks.sim.scheduler``) resumes it with the outcome.

The client knows its simulation only as a ``World``: what it reads and reports, named
here, so this module does not import the scheduler that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from zklocks._core import flow as _flow
from zklocks._core import multilock as _multilock
from zklocks._core import nodes as _nodes
from zklocks._core.errors import InvalidArgument, LockTimeout
from zklocks._core.lease import Lease, LeaseKeeper
from zklocks._core.ops import (
    TIMED_OUT,
    Cleanup,
    NodeData,
    Op,
    Pipeline,
    Reply,
    Request,
    SessionId,
    Wait,
    inline_cleanups,
    too_late,
)
from zklocks._frontend import operations
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._vocabulary import SessionFacts, SessionState, Watcher, WatchEvent, WatchKind
from zklocks.sim.faults import Fault, Interrupt
from zklocks.sim.model import ClientWatches, Model, Notification
from zklocks.sim.scenario import Cycle, Scenario
from zklocks.sim.violation import Violation

AcquireFn: TypeAlias = Callable[[_flow.AcquireSpec], _flow.Flow]
"""Makes the acquire flow of one call: ``zklocks._core.flow.acquire``, or a test's variant
of it (to plant an old behaviour and show that the simulator finds it)."""


class _Abandoned(BaseException):
    """Thrown into a flow whose run ended early, so it finishes instead of being closed."""


# -- actions a client's program yields ------------------------------------------------


@dataclass(slots=True)
class Send:
    """Send one request now (the reply is the outcome)."""

    request: Request
    watcher: Watcher | None
    epoch: int  # the connection it is sent on; a drop since then loses it


@dataclass(slots=True)
class AwaitConnection:
    """Wait to reconnect: outcome CONNECTED, EXPIRED (new session) or TIMED_OUT."""

    deadline: float | None


@dataclass(slots=True)
class AwaitWake:
    """Wait until a watcher fired into ``fired`` (True) or the deadline passed (False)."""

    fired: list[WatchEvent]
    deadline: float | None


@dataclass(slots=True)
class Sleep:
    until: float


Action: TypeAlias = Send | AwaitConnection | AwaitWake | Sleep
CONNECTED = "connected"
EXPIRED = "expired"


@dataclass(slots=True)
class Holding:
    """A grant while (and after) its holder holds it."""

    client: int
    kind: str
    node: str
    token: int
    session_id: int
    lease: Lease
    granted_at: float


@dataclass(slots=True)
class Outcome:
    """How one acquire call ended: granted | missed | timed out | interrupted."""

    client: int
    kind: str
    result: str
    at: float


@dataclass(slots=True)
class Delivery:
    """A watch notification on its way to a client (``deliver_at`` on the virtual clock)."""

    deliver_at: float
    order: float
    notification: Notification
    held: bool = False  # a reordered one, waiting to be overtaken


@dataclass(slots=True)
class Timer:
    """A ``LeaseKeeper`` timer on the virtual clock (frozen while its client is paused)."""

    due: float
    order: int
    fn: Callable[[], None]
    cancelled: bool = False


class Checks(Protocol):
    """The invariants a client's program reports to (``zklocks.sim.invariants.Checker``)."""

    def before_release(self, client: SimClient, holding: Holding) -> None: ...

    def on_grant(self, client: SimClient, holding: Holding, spec: _flow.AcquireSpec) -> None: ...


class World(Protocol):
    """What a client needs of the simulation that runs it (``Simulation``)."""

    now: float
    order: int  # a tie-breaker the clients' timers and the scheduler's deliveries share
    trace: list[str] | None
    model: Model
    scenario: Scenario
    owner: dict[int, SimClient]
    grants: list[Holding]
    force_deleted: set[tuple[str, int]]
    interrupts: dict[tuple[int, int], Interrupt]
    acquire_flow: AcquireFn

    @property
    def checker(self) -> Checks: ...

    def spec_for(
        self, client: SimClient, cycle: Cycle, path: str | None = None
    ) -> _flow.AcquireSpec: ...

    def record(
        self, client: SimClient, spec: _flow.AcquireSpec, result: str, node: str = ""
    ) -> None: ...

    def after_release_of_deleted(self, released: Holding) -> None: ...

    def route(self) -> None: ...

    def fired(self, fault: Fault) -> None: ...

    def note(self, client: SimClient | None, text: str) -> None: ...


class SimClient:
    """One simulated process: a session, a watch table, and its lock program."""

    def __init__(self, sim: World, index: int, script_index: int) -> None:
        self.sim = sim
        self.index = index
        self.script = sim.scenario.clients[script_index]
        self.session_id = 0
        self.connected = True
        self.epoch = 0
        self.reconnect_at = 0.0
        self.paused_until = 0.0
        self.last_answered_sent: float | None = None
        self.watches = ClientWatches()
        self.inbox: list[Delivery] = []  # notifications on their way to it
        self.requests = 0  # requests sent (fault coordinate)
        self.ops = 0  # operations its acquire flows yielded (fault coordinate)
        self.events = 0  # watch notifications the server sent it (fault coordinate)
        self.attempt: str | None = None  # the acquire in progress
        self.awaiting: tuple[str, ...] | None = None  # nodes its flow watches and waits on
        self.holding: Holding | None = None
        self.others: list[Holding] = []  # multi: the parts held beyond ``holding``
        self.interruptible = False
        self.interrupted = False
        self.interrupted_at = ""  # the kind of operation the interrupt landed on
        self.action: Action | None = None
        self.done = False
        self.facts = SessionFacts(
            clock=lambda: self.sim.now,
            session_timeout=lambda: self.script.session_timeout,
            last_answered_sent=lambda: self.last_answered_sent,
            connected=lambda: self.connected,
        )
        # leases are watched by the clients' own LeaseKeeper: node deletion, session
        # events, and the clock rule's timer while cut off
        self.timers: list[Timer] = []
        self.pending_watches: list[tuple[str, Watcher]] = []  # sent on reconnect
        self.pending_looks: list[Lease] = []  # leases' looks at their node, on reconnect
        self.hold: Sleep | None = None  # the hold under way, which letting go cuts short
        self.keeper = LeaseKeeper(lambda: self.facts, self.schedule)
        self._program = self.program()

    def __repr__(self) -> str:
        return f"c{self.index}"

    # -- session --------------------------------------------------------------------

    def open_session(self) -> None:
        record = self.sim.model.open_session(self.script.session_timeout)
        self.session_id = record.id
        self.sim.owner[record.id] = self
        self.connected = True
        self.last_answered_sent = self.sim.now

    def disconnect(self, outage: float) -> None:
        """The connection drops; what was in flight is lost; reconnect after ``outage``."""
        if self.connected:
            self.connected = False
            self.epoch += 1
            self.reconnect_at = self.sim.now + outage
            self.keeper.on_state(SessionState.SUSPENDED)
        else:
            self.reconnect_at = max(self.reconnect_at, self.sim.now + outage)

    def reconnect(self) -> None:
        sim = self.sim
        if sim.model.alive(self.session_id):
            self.connected = True
            sim.model.touch(self.session_id)
            self.last_answered_sent = sim.now
            sim.note(self, "reconnected")
            self.keeper.on_state(SessionState.CONNECTED)
            pending, self.pending_watches = self.pending_watches, []
            for path, watcher in pending:
                self.watch_node(path, watcher)
            looks, self.pending_looks = self.pending_looks, []
            for lease in looks:
                self.look(lease)
            if isinstance(self.action, AwaitConnection):
                self.resume(CONNECTED)
            return
        # the server expired us meanwhile: LOST, every watcher told, then a fresh session
        if sim.trace is not None:
            sim.note(self, f"reconnected: session {self.session_id:#x} expired")
        lost = self.watches.drain() + self.pending_watches
        self.pending_watches = []
        for path, watcher in lost:
            watcher(WatchEvent(WatchKind.SESSION_LOST, path))
        self.keeper.on_state(SessionState.LOST)
        self.open_session()
        self.keeper.on_state(SessionState.CONNECTED)
        if isinstance(self.action, AwaitConnection):
            self.resume(EXPIRED)

    def watch_node(self, path: str, watcher: Watcher) -> None:
        """``SyncSession.watch_node``: a getData-watch; DELETED at once if already gone."""
        if not self.connected:
            self.pending_watches.append((path, watcher))
            return
        reply = self.sim.model.get_data(self.session_id, path, watch=True)
        self.sim.route()
        if isinstance(reply, NodeData):
            self.watches.add_data(path, watcher)
        elif isinstance(reply, NoNodeError):
            watcher(WatchEvent(WatchKind.DELETED, path))

    def look(self, lease: Lease) -> None:
        """A lease's look at its node's data (for a revoke request): a getData, sent once
        connected; its reply answers ``_data_seen``."""
        if not self.connected:
            self.pending_looks.append(lease)
            return
        reply = self.sim.model.get_data(self.session_id, lease.node)
        lease._data_seen(reply.data if isinstance(reply, NodeData) else None)

    def let_go_early(self) -> None:
        """Asked to let go (a revoke), or bound by ``max_hold``: the hold ends now, and the
        program's release gives the node back (by name and token, as ``_take_back``)."""
        if self.hold is not None:
            self.hold.until = min(self.hold.until, self.sim.now)

    def schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        """The ``LeaseKeeper``'s timer, on the virtual clock."""
        self.sim.order += 1
        timer = Timer(self.sim.now + delay, self.sim.order, fn)
        self.timers.append(timer)

        def cancel() -> None:
            timer.cancelled = True

        return cancel

    def next_timer(self) -> Timer | None:
        live = [t for t in self.timers if not t.cancelled]
        self.timers = live
        return min(live, key=lambda t: (t.due, t.order)) if live else None

    # -- the program ------------------------------------------------------------------

    def start(self) -> None:
        self.open_session()
        self.resume(None)

    def resume(self, value: object) -> None:
        try:
            self.action = self._program.send(value)
        except StopIteration:
            self.action = None
            self.done = True

    def program(self) -> Generator[Action, Any, None]:
        sim = self.sim
        if sim.scenario.paths:
            yield from self.multi_program()
            return
        for cycle in self.script.cycles:
            if cycle.think:
                yield Sleep(sim.now + cycle.think)
            spec = sim.spec_for(self, cycle)
            acquired = yield from self.acquire(spec, cycle)
            if acquired is None:
                continue
            holding = self.grant(spec, acquired, cycle)
            yield from self.hold_for(cycle.hold)
            yield from self.give_up(holding)

    def multi_program(self) -> Generator[Action, Any, None]:
        """What ``MultiLock`` does: take the locks in the global order under one deadline;
        if one is not had, release what was taken; hold; release in reverse order."""
        sim = self.sim
        for cycle in self.script.cycles:
            if cycle.think:
                yield Sleep(sim.now + cycle.think)
            given = [sim.spec_for(self, cycle, sim.scenario.paths[i]) for i in cycle.given]
            taken: list[Holding] = []
            for index in _multilock.global_order(given):
                acquired = yield from self.acquire(given[index], cycle)
                if acquired is None:
                    break
                taken.append(self.grant(given[index], acquired, cycle))
            if len(taken) == len(given):
                yield from self.hold_for(cycle.hold)
            for holding in reversed(taken):
                yield from self.give_up(holding)

    def hold_for(self, seconds: float) -> Generator[Action, Any, None]:
        self.hold = Sleep(self.sim.now + seconds)
        try:
            yield self.hold
        finally:
            self.hold = None

    def give_up(self, holding: Holding) -> Generator[Action, Any, None]:
        """Release one holding, as ``Lock.release`` does (``operations.end``)."""
        sim = self.sim
        sim.checker.before_release(self, holding)
        if self.holding is holding:
            self.holding = self.others.pop(0) if self.others else None
        else:
            self.others.remove(holding)
        deletion = operations.end(holding.lease)  # the release rule of both clients
        if sim.trace is not None:
            sim.note(self, f"releases {short(holding.node)}")
        try:
            yield from self.drive(deletion)
        except Exception as exc:
            if isinstance(exc, Violation):
                raise
            raise Violation(f"{self}: release of {holding.node} raised {exc!r}") from exc
        if (holding.node, holding.token) in sim.force_deleted:
            sim.after_release_of_deleted(holding)

    def acquire(self, spec: _flow.AcquireSpec, cycle: Cycle) -> Generator[Action, Any, Any]:
        sim = self.sim
        self.attempt = spec.attempt
        self.interruptible = True
        self.interrupted = False
        if sim.trace is not None:
            until = "never" if spec.deadline is None else f"{spec.deadline:.4f}"
            sim.note(self, f"acquire {cycle.kind} blocking={spec.blocking} deadline={until}")
        try:
            acquired = yield from self.drive(sim.acquire_flow(spec))
        except InvalidArgument as exc:
            if spec.fair or sim.scenario.family != "mixed":
                raise Violation(f"{self}: acquire {spec.kind} raised {exc!r}") from exc
            sim.record(self, spec, "refused")  # a one-node lock beside queued ones
            return None
        except KeyboardInterrupt:
            if not self.interrupted:
                raise
            sim.record(self, spec, "interrupted")
            return None
        except LockTimeout:
            sim.record(self, spec, "timed out")
            return None
        except Exception as exc:
            if isinstance(exc, Violation):
                raise
            raise Violation(f"{self}: acquire {spec.kind} raised {exc!r}") from exc
        finally:
            self.interruptible = False
            self.attempt = None
        if acquired is None:
            sim.record(self, spec, "missed")
            return None
        return acquired

    def grant(self, spec: _flow.AcquireSpec, acquired: _flow.Acquired, cycle: Cycle) -> Holding:
        """What the clients' acquire operation (``_frontend/operations.acquire``) does
        with a grant: a lease, watched by the keeper; with operations, listening for
        revokes and bounded by the cycle's ``max_hold``."""
        sim = self.sim
        lease = Lease(acquired.node, acquired.token, self.facts, acquired.owner)
        holding = Holding(
            self.index, spec.kind, acquired.node, acquired.token, self.session_id, lease, sim.now
        )
        self.keeper.track(lease, self.watch_node)
        if sim.scenario.operations:
            lease._allow_looks(lambda: self.look(lease))
            lease.add_revoke_callback(lambda _lease: self.let_go_early())
            if cycle.max_hold is not None:
                lease._limit_hold(cycle.max_hold, self.schedule, self.let_go_early)
        if self.holding is None:
            self.holding = holding
        else:  # multi: a further part
            self.others.append(holding)
        sim.grants.append(holding)
        sim.record(self, spec, "granted", acquired.node)
        sim.checker.on_grant(self, holding, spec)
        return holding

    # -- the driver: what zklocks._sync.driver does, against the model ---------------------

    def drive(self, flow: _flow.Flow) -> Generator[Action, Any, Any]:
        """Run ``flow`` to its end as the sync driver does: send its requests, hand it the
        watch events of this run (``fired``) or the deadline; a planned interrupt is
        thrown into it as the sync driver throws a KeyboardInterrupt. Its cleanup runs
        in place, one operation at a time (a fault may land on each), where the sync
        driver runs it apart from the caller."""
        flow = inline_cleanups(flow)
        fired: list[WatchEvent] = []
        step: Callable[[Any], Op] = flow.send
        value: Any = None
        try:
            while True:
                try:
                    op = step(value)
                except StopIteration as stop:
                    return stop.value
                step, value = flow.send, None
                fault = None
                if self.interruptible:
                    fault = self.sim.interrupts.get((self.index, self.ops))
                    self.ops += 1
                if fault is None or self.interrupted:
                    value = yield from self.execute(op, fired)
                    continue
                self.sim.fired(fault)
                self.interrupted = True
                self.interrupted_at = type(op).__name__
                if fault.sent:
                    yield from self.execute(op, fired)  # sent, then interrupted waiting
                if self.sim.trace is not None:
                    self.sim.note(self, f"interrupted at {self.interrupted_at}")
                step, value = flow.throw, KeyboardInterrupt()
        except GeneratorExit:  # the run was abandoned (a violation elsewhere)
            _abandon(flow)
            raise
        finally:
            self.awaiting = None

    def execute(self, op: Op, fired: list[WatchEvent]) -> Generator[Action, Any, Reply]:
        """One operation's reply; ``awaiting`` names the watched nodes while it waits."""
        early = too_late(op, self.sim.now)
        if early is not None:
            return early
        if isinstance(op, Wait):
            if not (yield AwaitWake(fired, op.deadline)):
                return TIMED_OUT
            events = tuple(fired)
            fired.clear()
            return events
        if isinstance(op, Pipeline):
            watcher = fired.append if op.watch else None
            self.awaiting = tuple(r.path for r in op.requests) if op.watch else None
            return tuple((yield from self.call(op.requests, op.deadline, watcher)))
        self.awaiting = None
        if isinstance(op, SessionId):
            return self.session_id
        assert not isinstance(op, Cleanup), "drive() runs cleanup in place"
        return (yield from self.call((op,), op.deadline))[0]

    def call(
        self, requests: Sequence[Request], deadline: float | None, watcher: Watcher | None = None
    ) -> Generator[Action, Any, list[Reply]]:
        """``SyncSession.call``: wait to be connected (or time out), then send them all."""
        if not self.connected:
            status = yield AwaitConnection(deadline)
            if status is TIMED_OUT:
                return [TIMED_OUT for _ in requests]
            if status == EXPIRED:
                return [SessionExpiredError() for _ in requests]
        epoch = self.epoch
        replies: list[Reply] = []
        for request in requests:
            if self.epoch != epoch:  # dropped with this one in flight
                replies.append(ConnectionLossError())
                continue
            replies.append((yield Send(request, watcher, epoch)))
        return replies


def _abandon(flow: _flow.Flow) -> None:
    """Finish a flow left mid-way: every cleanup request it makes answers ClientClosed.

    A flow is never ``close()``d (it would answer GeneratorExit by yielding its cleanup),
    and the garbage collector would close one left suspended when a run stops at a
    violation; so it is thrown an exception and its cleanup is answered instead.
    """
    try:
        op = flow.throw(_Abandoned())
        for _ in range(1000):
            if isinstance(op, Pipeline):
                op = flow.send(tuple(ClientClosedError() for _ in op.requests))
            elif isinstance(op, SessionId):
                op = flow.send(0)
            else:
                op = flow.send(ClientClosedError())
    except (StopIteration, _Abandoned, Exception):
        return


def short(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    parsed = _nodes.parse(name)
    if parsed is None or not parsed.attempt:
        return name
    return f"{parsed.kind}-{parsed.attempt[:6]}-{parsed.sequence}"


__all__ = [
    "AcquireFn",
    "Action",
    "AwaitConnection",
    "AwaitWake",
    "Delivery",
    "Holding",
    "Outcome",
    "Send",
    "SimClient",
    "Sleep",
    "Timer",
    "World",
    "short",
]
