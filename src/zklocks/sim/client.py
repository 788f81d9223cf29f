"""A simulated client: one process's session, watches, lease keeper and lock program,
and the simulator's driver of the lock operations.

A client runs a *program*: for every cycle of its script, think, acquire, hold, release.
It takes and gives back its locks through ``zklocks._frontend.operations`` (``acquire``
and ``release``, or ``acquire_all`` and ``release_held`` for a multi-lock), the code both
real clients run, on lock objects of its own (``zklocks.sim.locks``); so the flows,
the bookkeeping and the cleanup on every way out are the real ones, and only the driver
is the simulator's (``SimClient.drive``, a short loop like ``zklocks._sync.driver``, on
the same ``operations.Stepper``: send the requests, hand over the watch events of the
flow run, or the deadline). A program is a generator that yields *actions*
(``zklocks.sim.actions``): send one request, wait for a connection, wait for a watch,
sleep; and the scheduler (``zklocks.sim.scheduler``) resumes it with the outcome.

The client knows its simulation only as a ``World``: what it reads and reports, named
here, so this module does not import the scheduler that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol, TypeVar, cast

from zklocks._core import flow as _flow
from zklocks._core import kinds as _kinds
from zklocks._core import nodes as _nodes
from zklocks._core.carrying import never_sent, watch_answer
from zklocks._core.lease import Lease
from zklocks._core.lease_keeper import LeaseKeeper
from zklocks._core.lock_delay import LockDelayWait
from zklocks._core.ops import (
    TIMED_OUT,
    Cleanup,
    Op,
    Pipeline,
    Reply,
    Request,
    SessionId,
    Wait,
    inline_cleanups,
    too_late,
)
from zklocks._errors import InvalidArgument, LockTimeout
from zklocks._frontend import operations
from zklocks._frontend.operations import AcquireFn
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    SessionExpiredError,
)
from zklocks._protocol.records import NodeData
from zklocks._vocabulary import SessionFacts, SessionState, Watcher, WatchEvent, WatchKind
from zklocks.sim.actions import (
    CONNECTED,
    EXPIRED,
    Action,
    AwaitConnection,
    AwaitWake,
    Delivery,
    Grant,
    Send,
    Sleep,
    Timer,
)
from zklocks.sim.faults import Fault, Interrupt
from zklocks.sim.locks import SimConfig, SimLock, SimMultiLock
from zklocks.sim.model import ClientWatches, Model
from zklocks.sim.operator import operate
from zklocks.sim.scenario import Cycle, Scenario
from zklocks.sim.violation import Violation

T = TypeVar("T")


class _Abandoned(BaseException):
    """Thrown into a flow whose run ended early, so it finishes instead of being closed."""


class Checks(Protocol):
    """The invariants a client's program reports to (``zklocks.sim.invariants.Checker``)."""

    def before_release(self, client: SimClient, holding: Grant) -> None: ...

    def on_grant(self, client: SimClient, holding: Grant, spec: _flow.AcquireSpec) -> None: ...

    def on_lock_delay(self, client: SimClient, node: str | None) -> None: ...


class World(Protocol):
    """What a client needs of the simulation that runs it (``Simulation``)."""

    now: float
    order: int  # a tie-breaker the clients' timers and the scheduler's deliveries share
    trace: list[str] | None
    model: Model
    scenario: Scenario
    owner: dict[int, SimClient]
    grants: list[Grant]
    force_deleted: set[tuple[str, int]]
    interrupts: dict[tuple[int, int], Interrupt]
    acquire_flow: AcquireFn

    @property
    def checker(self) -> Checks: ...

    def spec_for(
        self, client: SimClient, cycle: Cycle, path: str, deadline: float | None, blocking: bool
    ) -> _flow.AcquireSpec: ...

    def record(
        self, client: SimClient, spec: _flow.AcquireSpec, result: str, node: str = ""
    ) -> None: ...

    def after_release_of_deleted(self, released: Grant) -> None: ...

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
        self.ops = 0  # operations its acquires yielded (fault coordinate)
        self.events = 0  # watch notifications the server sent it (fault coordinate)
        self.attempt: str | None = None  # the acquire in progress
        self.awaiting: tuple[str, ...] | None = None  # nodes its flow watches and waits on
        self.holding: Grant | None = None
        self.others: list[Grant] = []  # multi: the parts held beyond ``holding``
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
        self.pending_apart: list[operations.Operation[None]] = []  # run on reconnect
        self.spec: _flow.AcquireSpec | None = None  # the attempt under way (or the last)
        self.released: list[Grant] = []  # released by the operation under way
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
            apart, self.pending_apart = self.pending_apart, []
            for operation in apart:
                self.run_apart(operation)
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
        """``SyncCarrier.watch_node``: a getData-watch; DELETED at once if already gone."""
        if not self.connected:
            self.pending_watches.append((path, watcher))
            return
        reply = self.sim.model.get_data(self.session_id, path, watch=True)
        self.sim.route()
        if isinstance(reply, NodeData):
            self.watches.add_data(path, watcher)
        elif (event := watch_answer(path, reply)) is not None:
            watcher(event)

    def let_go_early(self) -> None:
        """Asked to let go (a revoke callback): the hold ends now, and the program
        releases. (Past ``max_hold`` the operation takes our node back apart, and the
        holder, like a hung one, holds on until its own release finds the node gone.)"""
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
        """Each cycle: think, acquire, hold, release."""
        sim = self.sim
        for cycle in self.script.cycles:
            if cycle.think:
                yield Sleep(sim.now + cycle.think)
            taking, giving = self.calls(cycle)
            acquired = yield from self.acquire(taking)
            if acquired is None:
                continue
            if sim.scenario.operations:
                for lease in acquired if isinstance(acquired, list) else [acquired]:
                    lease.add_revoke_callback(lambda _lease: self.let_go_early())
            yield from self.hold_for(cycle.hold)
            yield from self.release(giving)

    def calls(
        self, cycle: Cycle
    ) -> tuple[operations.Operation[Lease | list[Lease] | None], operations.Operation[None]]:
        """One cycle's acquire and release: ``Lock``'s, or, in a multi scenario, those of
        ``MultiLock`` over the locks in the order the cycle gives them."""
        sim = self.sim
        start = sim.acquire_flow
        if sim.scenario.paths:
            multi = SimMultiLock([self.lock(cycle, sim.scenario.paths[i]) for i in cycle.given])
            return (
                operations.acquire_all(multi, self.index, self.name, cycle.timeout, start),
                operations.release_held(multi, self.index),
            )
        lock = self.lock(cycle, sim.scenario.path)
        return (
            operations.acquire(lock, self.index, self.name, cycle.timeout, cycle.blocking, start),
            operations.release(lock, self.index),
        )

    @property
    def name(self) -> str:
        """The owner's name in its nodes' data (``identifier``)."""
        return f"client-{self.index}"

    def lock(self, cycle: Cycle, path: str) -> SimLock:
        """The lock of one cycle on ``path``, as ``Client.lock`` would make it; its spec is
        drawn from the seed when its acquire asks."""
        sim = self.sim

        def draw(deadline: float | None, blocking: bool) -> _flow.AcquireSpec:
            spec = sim.spec_for(self, cycle, path, deadline, blocking)
            self.spec, self.attempt = spec, spec.attempt
            if sim.trace is not None:
                until = "never" if deadline is None else f"{deadline:.4f}"
                sim.note(self, f"acquire {spec.kind} blocking={blocking} deadline={until}")
            return spec

        fair = sim.scenario.fair and cycle.fair
        config = SimConfig(
            path=path,
            kind=_kinds.of(cycle.kind),
            fair=fair,
            permits=sim.scenario.permits,
            max_hold=cycle.max_hold,
            draw=draw,
        )
        return SimLock(self, config)

    def hold_for(self, seconds: float) -> Generator[Action, Any, None]:
        self.hold = Sleep(self.sim.now + seconds)
        try:
            yield self.hold
        finally:
            self.hold = None

    def acquire(self, taking: operations.Operation[Any]) -> Generator[Action, Any, Any]:
        """Drive one acquire operation; what it granted, or None (recorded as refused,
        missed, timed out or interrupted). The unexpected is a ``Violation``."""
        sim = self.sim
        self.interruptible = True
        self.interrupted = False
        self.spec = None
        try:
            acquired = yield from self.drive(taking)
        except InvalidArgument as exc:
            spec = self.spec
            if spec is None or spec.fair or sim.scenario.family != "mixed":
                raise Violation(f"{self}: acquire raised {exc!r}") from exc
            sim.record(self, spec, "refused")  # a one-node lock beside queued ones
            return None
        except KeyboardInterrupt:
            if not self.interrupted or self.spec is None:
                raise
            sim.record(self, self.spec, "interrupted")
            return None
        except LockTimeout:
            assert self.spec is not None
            sim.record(self, self.spec, "timed out")
            return None
        except Exception as exc:
            if isinstance(exc, Violation):
                raise
            raise Violation(f"{self}: acquire raised {exc!r}") from exc
        finally:
            self.interruptible = False
            self.attempt = None
            self.after_releases()
        if acquired is None:
            assert self.spec is not None
            sim.record(self, self.spec, "missed")
            return None
        return acquired

    def granted(self, acquired: _flow.Acquired) -> Lease:
        """The lease of a grant (``Host._watch_lease``), watched by the keeper; the grant
        is recorded and checked at once, before the operation equips the lease."""
        sim = self.sim
        spec = self.spec
        assert spec is not None, "a grant comes from a spec this client drew"
        lease = Lease(acquired.node, acquired.token, self.facts, acquired.owner)
        self.keeper.track(lease, self.watch_node)
        holding = Grant(
            self.index,
            spec.kind.name,
            acquired.node,
            acquired.token,
            self.session_id,
            lease,
            sim.now,
        )
        if self.holding is None:
            self.holding = holding
        else:  # multi: a further part
            self.others.append(holding)
        sim.grants.append(holding)
        sim.record(self, spec, "granted", acquired.node)
        sim.checker.on_grant(self, holding, spec)
        return lease

    def releasing(self, lease: Lease) -> None:
        """The last release of ``lease`` begins (``SimHoldings.leave``): the invariants
        look at its holder, which then holds it no more."""
        holding = next(
            h for h in (self.holding, *self.others) if h is not None and h.lease is lease
        )
        self.sim.checker.before_release(self, holding)
        if self.holding is holding:
            self.holding = self.others.pop(0) if self.others else None
        else:
            self.others.remove(holding)
        self.released.append(holding)
        if self.sim.trace is not None:
            self.sim.note(self, f"releases {short(holding.node)}")

    def after_releases(self) -> None:
        """Once the releases of an operation are done: a node the plan deleted under its
        holder may have taken the next holder's with it (``after_release_of_deleted``)."""
        released, self.released = self.released, []
        for holding in released:
            if (holding.node, holding.token) in self.sim.force_deleted:
                self.sim.after_release_of_deleted(holding)

    def release(self, giving: operations.Operation[None]) -> Generator[Action, Any, None]:
        """Drive one release operation (``Lock.release``, ``MultiLock.release``)."""
        try:
            yield from self.drive(giving)
        except Exception as exc:
            if isinstance(exc, Violation):
                raise
            raise Violation(f"{self}: release raised {exc!r}") from exc
        finally:
            self.after_releases()

    def run_apart(self, operation: operations.Operation[None]) -> None:
        """What a real client runs apart from every caller (``Front.spawn``), run in one
        step against the model once connected; none of it is lost to a fault."""
        if not self.connected:
            self.pending_apart.append(operation)
            return
        operate(self.sim.model, self.session_id, inline_cleanups(_ops_of(operation)))
        self.sim.route()

    # -- the driver: what zklocks._sync.driver does, against the model ---------------------

    def drive(self, operation: operations.Operation[T]) -> Generator[Action, Any, T]:
        """Run ``operation`` to its end as the sync driver does (``operations.Stepper``):
        send its requests, hand it the watch events of this flow run or the deadline; a
        planned interrupt is thrown into it as the sync driver throws a
        KeyboardInterrupt. Its cleanup runs in place, one operation at a time (a fault
        may land on each), where the sync driver runs it apart from the caller."""
        flow = inline_cleanups(_ops_of(operation))
        stepper: operations.Stepper[SimClient, list[WatchEvent]] = operations.Stepper(
            flow, self, list
        )
        try:
            while not isinstance(op := stepper.next(), operations.Finished):
                fault = None
                if self.interruptible:
                    fault = self.sim.interrupts.get((self.index, self.ops))
                    self.ops += 1
                if fault is None or self.interrupted:
                    stepper.send((yield from self.execute(op, stepper.inbox)))
                    continue
                self.sim.fired(fault)
                self.interrupted = True
                self.interrupted_at = type(op).__name__
                if fault.sent:
                    yield from self.execute(op, stepper.inbox)  # sent, then interrupted waiting
                if self.sim.trace is not None:
                    self.sim.note(self, f"interrupted at {self.interrupted_at}")
                stepper.throw(KeyboardInterrupt())
            value: T = op.value
            return value
        except GeneratorExit:  # the run was abandoned (a violation elsewhere)
            _abandon(flow)
            raise
        finally:
            self.awaiting = None

    def current_node(self) -> str | None:
        """The node of the acquire under way (full path), as the server has it now."""
        spec, attempt = self.spec, self.attempt
        if spec is None or attempt is None:
            return None
        names = self.sim.model.children_of(spec.path)
        return next((f"{spec.path}/{n}" for n in names if attempt in n), None)

    def execute(self, op: Op, fired: list[WatchEvent]) -> Generator[Action, Any, Reply]:
        """One operation's reply; ``awaiting`` names the watched nodes while it waits."""
        early = too_late(op, self.sim.now)
        if early is not None:
            return early
        if isinstance(op, LockDelayWait):
            self.sim.checker.on_lock_delay(self, self.current_node())
        if isinstance(op, Wait):
            if not (yield AwaitWake(fired, op.deadline)):
                return TIMED_OUT
            events = tuple(fired)
            fired.clear()
            return events
        if isinstance(op, Pipeline):
            watcher = op.watcher or (fired.append if op.watch else None)
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
        """``SyncCarrier.call``: wait to be connected (or time out), then send them all."""
        if not self.connected:
            status = yield AwaitConnection(deadline)
            if status is TIMED_OUT:
                return never_sent(requests)
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


def _ops_of(operation: operations.Operation[T]) -> Generator[Op, Any, T]:
    """``operation`` as a flow of ops for ``inline_cleanups``, which passes its ``Use``
    steps through untouched (the ``Stepper`` reads them; the simulator has one session)."""
    return cast(Generator[Op, Any, T], operation)


def _abandon(flow: Generator[Op, Any, Any]) -> None:
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


__all__ = ["Checks", "SimClient", "World", "short"]
