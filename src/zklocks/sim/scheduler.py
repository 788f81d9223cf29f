"""The seeded scheduler: many clients' lock flows, one step at a time, on a virtual clock.

Theory of operation
-------------------
Each simulated client runs a *program*: for every cycle of its script, think, run
``zklocks._core.flow.acquire`` to its end, hold, run ``zklocks._core.flow.release``. The flows are
the real ones; only the driver is the simulator's (``SimClient.drive``, which does what
``zklocks._sync.driver`` does, against the model). A program is a generator that yields
*actions* — send one request, wait for a connection, wait for a watch, sleep — and the
scheduler resumes it with the outcome.

One **step** is one enabled move, chosen by the seeded RNG among all that are enabled
now: a client's action (each request of a pipeline is its own step, so other clients'
requests interleave between them), a watch notification reaching a client, or a client
reconnecting. Between steps the clock moves a few virtual milliseconds; when nothing is
enabled it jumps to the next instant something is (a deadline, the end of a hold or a
pause, a delayed notification, a session's expiry). When nothing ever will be, the run
is **quiescent** and the final invariants are checked.

Sessions: a connected, running client pings continuously, so the server keeps hearing
from it and its ``last_answered_sent`` is now. A client cut off (``DropRequest``) or
frozen (``Pause``) is silent: the server expires its session a session timeout after it
last heard from it, and the client's lease is lost by the clock rule
(``zklocks._core.lease.loss_deadline``) no later than that. The server closes an expired
session's connection; the client learns of the expiry when it reconnects (kazoo's LOST),
fails what waited to be sent with ``SessionExpiredError``, fires SESSION_LOST to its
watchers and carries on in a new session.

Leases: a grant becomes a ``Lease`` watched by the client's own ``LeaseKeeper`` (the one
both real clients use), with its timer on the virtual clock; a release ends the lease
and runs the release flow, as ``Lock._give_up`` does.

Determinism: the scenario, the fault plan, the schedule and the attempt tokens each come
from their own ``random.Random`` seeded from the seed; nothing reads the wall clock or
iterates a set of strings. ``replay(seed, plan)`` therefore repeats a run exactly.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from zklocks._core import flow as _flow
from zklocks._core import multilock as _multilock
from zklocks._core import nodes as _nodes
from zklocks._core.drive import (
    ancestors,
    first_gone,
    parent_creates,
    parents_reply,
    pipeline_deadline,
    wake_reply,
    watch_requests,
)
from zklocks._core.errors import InvalidArgument, LockTimeout
from zklocks._core.lease import Lease, LeaseKeeper
from zklocks._core.ops import (
    TIMED_OUT,
    AwaitDeletion,
    Create,
    CreateParents,
    Exists,
    GetData,
    NodeData,
    Op,
    Pipeline,
    Reply,
    Request,
    SessionId,
    Stat,
    Wake,
)
from zklocks._core.strategies import Decision
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._vocabulary import SessionFacts, SessionState, Watcher, WatchEvent, WatchKind
from zklocks.sim.faults import (
    DelayWatch,
    DeleteNode,
    DropRequest,
    ExpireSession,
    Fault,
    FaultPlan,
    Interrupt,
    Pause,
    ReorderWatch,
    SweepContainers,
)
from zklocks.sim.invariants import Checker, Violation
from zklocks.sim.model import ClientWatches, Model, Notification
from zklocks.sim.scenario import FAMILIES, Cycle, Scenario, scenario_for

STEP = 0.002  # the clock moves up to this much between two steps (virtual seconds)
CLOSE_NOTICE = 0.001  # how soon a client notices the server closed its connection
REORDER_WINDOW = 0.05  # a reordered notification waits this long for one to overtake it
MAX_STEPS = 50_000

DecideFn: TypeAlias = Callable[[Any, Sequence[Any]], Decision]
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
class _Inbox:
    deliver_at: float
    order: float
    notification: Notification
    held: bool = False  # a reordered one, waiting to be overtaken


@dataclass(slots=True)
class _Timer:
    """A ``LeaseKeeper`` timer on the virtual clock (frozen while its client is paused)."""

    due: float
    order: int
    fn: Callable[[], None]
    cancelled: bool = False


class SimClient:
    """One simulated process: a session, a watch table, and its lock program."""

    def __init__(self, sim: Simulation, index: int, script_index: int) -> None:
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
        self.inbox: list[_Inbox] = []
        self.requests = 0  # requests sent (fault coordinate)
        self.ops = 0  # operations its acquire flows yielded (fault coordinate)
        self.events = 0  # watch notifications the server sent it (fault coordinate)
        self.attempt: str | None = None  # the acquire in progress
        self.awaiting: tuple[str, ...] | None = None  # nodes an AwaitDeletion waits on
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
        self.timers: list[_Timer] = []
        self.pending_watches: list[tuple[str, Watcher]] = []  # sent on reconnect
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

    def schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]:
        """The ``LeaseKeeper``'s timer, on the virtual clock."""
        self.sim.order += 1
        timer = _Timer(self.sim.now + delay, self.sim.order, fn)
        self.timers.append(timer)

        def cancel() -> None:
            timer.cancelled = True

        return cancel

    def next_timer(self) -> _Timer | None:
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
            holding = self.grant(spec, acquired)
            yield Sleep(sim.now + cycle.hold)
            sim.checker.before_release(self, holding)
            self.holding = None
            owner = 0 if holding.lease.lost else holding.lease.owner  # as Lock._give_up
            holding.lease._end()  # a later loss is no longer news
            if sim.trace is not None:
                sim.note(self, f"releases {_short(holding.node)}")
            try:
                yield from self.drive(_flow.release(holding.node, holding.token, owner))
            except Exception as exc:
                if isinstance(exc, Violation):
                    raise
                raise Violation(f"{self}: release of {holding.node} raised {exc!r}") from exc
            if (holding.node, holding.token) in sim.force_deleted:
                sim.after_release_of_deleted(holding)

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
                taken.append(self.grant(given[index], acquired))
            if len(taken) == len(given):
                yield Sleep(sim.now + cycle.hold)
            for holding in reversed(taken):
                yield from self.give_up(holding)

    def give_up(self, holding: Holding) -> Generator[Action, Any, None]:
        """Release one holding, as ``Lock._give_up`` does."""
        sim = self.sim
        sim.checker.before_release(self, holding)
        if self.holding is holding:
            self.holding = self.others.pop(0) if self.others else None
        else:
            self.others.remove(holding)
        owner = 0 if holding.lease.lost else holding.lease.owner  # as Lock._give_up
        holding.lease._end()
        if sim.trace is not None:
            sim.note(self, f"releases {_short(holding.node)}")
        try:
            yield from self.drive(_flow.release(holding.node, holding.token, owner))
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

    def grant(self, spec: _flow.AcquireSpec, acquired: _flow.Acquired) -> Holding:
        """What ``Lock._acquire`` does with a grant: a lease, watched by the keeper."""
        sim = self.sim
        lease = Lease(acquired.node, acquired.token, self.facts, acquired.owner)
        holding = Holding(
            self.index, spec.kind, acquired.node, acquired.token, self.session_id, lease, sim.now
        )
        self.keeper.track(lease, self.watch_node)
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
        """Run ``flow`` to its end; exceptions are thrown into it, as the sync driver does."""
        try:
            op = next(flow)
        except StopIteration as stop:
            return stop.value
        while True:
            fault = None
            if self.interruptible:
                fault = self.sim.interrupts.get((self.index, self.ops))
                self.ops += 1
            try:
                if fault is not None and not self.interrupted:
                    self.sim.fired(fault)
                    self.interrupted = True
                    self.interrupted_at = type(op).__name__
                    if fault.sent:
                        yield from self.execute(op)  # sent, then interrupted waiting
                    if self.sim.trace is not None:
                        self.sim.note(self, f"interrupted at {self.interrupted_at}")
                    op = flow.throw(KeyboardInterrupt())
                else:
                    reply = yield from self.execute(op)
                    op = flow.send(reply)
            except StopIteration as stop:
                return stop.value
            except GeneratorExit:  # the run was abandoned (a violation elsewhere)
                _abandon(flow)
                raise

    def execute(self, op: Op) -> Generator[Action, Any, Reply]:
        if isinstance(op, Pipeline):
            return tuple((yield from self.call(op.requests, pipeline_deadline(op))))
        if isinstance(op, AwaitDeletion):
            return (yield from self.await_deletion(op))
        if isinstance(op, CreateParents):
            return parents_reply((yield from self.call(parent_creates(op.path), op.deadline)))
        if isinstance(op, SessionId):
            return self.session_id
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

    def await_deletion(self, op: AwaitDeletion) -> Generator[Action, Any, Reply]:
        """``zklocks._sync.driver.await_deletion`` with the model's watches."""
        fired: list[WatchEvent] = []
        self.awaiting = op.nodes
        try:
            while True:
                watching = watch_requests(op.nodes)
                replies = yield from self.call(watching, op.deadline, fired.append)
                done = first_gone(op.nodes, replies)
                if done is not None:
                    return done
                if op.deadline is not None and self.sim.now >= op.deadline:
                    return TIMED_OUT
                if not (yield AwaitWake(fired, op.deadline)):
                    return TIMED_OUT
                events = [fired.pop(0) for _ in range(len(fired))]
                done = wake_reply(events, op.nodes)
                if done is not None:
                    return done
                # only a change that is not a deletion: set the watches again
        finally:
            self.awaiting = None


class Simulation:
    """One seeded schedule under one fault plan."""

    def __init__(
        self,
        seed: int,
        plan: FaultPlan,
        *,
        trace: bool = False,
        families: tuple[str, ...] = FAMILIES,
        max_steps: int = MAX_STEPS,
        acquire: AcquireFn | None = None,
    ) -> None:
        self.seed = seed
        self.plan = plan
        self.acquire_flow: AcquireFn = acquire or _flow.acquire
        self.scenario: Scenario = scenario_for(seed, families=families)
        self.rng = random.Random(seed * 4 + 2)
        self.tokens = random.Random(seed * 4 + 3)
        self.model = Model()
        self.now = 0.0
        self.steps = 0
        self.max_steps = max_steps
        self.trace: list[str] | None = [] if trace else None
        self.owner: dict[int, SimClient] = {}
        self.force_expired: set[int] = set()  # by the plan's ExpireSession
        self.force_deleted: set[tuple[str, int]] = set()  # held nodes DeleteNode took
        self.operator = 0  # the session of the "other client" that deletes nodes
        self.silently_expired: set[int] = set()  # not heard from for a session timeout
        self.grants: list[Holding] = []
        self.outcomes: list[Outcome] = []
        self.faults_fired: list[Fault] = []
        self.drops = {(f.client, f.request): f for f in plan if isinstance(f, DropRequest)}
        self.delays = {(f.client, f.event): f for f in plan if isinstance(f, DelayWatch)}
        self.reorders = {(f.client, f.event): f for f in plan if isinstance(f, ReorderWatch)}
        self.interrupts = {(f.client, f.op): f for f in plan if isinstance(f, Interrupt)}
        timed = [
            f for f in plan if isinstance(f, ExpireSession | Pause | SweepContainers | DeleteNode)
        ]
        self.timed = sorted(timed, key=lambda f: f.at)
        count = len(self.scenario.clients)
        self.clients = [SimClient(self, i, i) for i in range(count)]
        self.checker = Checker(self)
        self.order = 0

    # -- running ----------------------------------------------------------------------

    def run(self) -> None:
        """Run to quiescence, checking invariants after every step (raises Violation)."""
        scenario = self.scenario
        if scenario.start_cversion is not None:
            setup = self.model.open_session(60.0).id
            for path in ancestors(scenario.path):
                self.model.create(setup, path)
            self.model.set_cversion(scenario.path, scenario.start_cversion)
            self.model.close_session(setup)
        for client in self.clients:
            client.start()
        while True:
            self.steps += 1
            if self.steps > self.max_steps:
                raise Violation(f"no quiescence after {self.max_steps} steps (livelock?)")
            self.model.now = self.now
            self.housekeeping()
            moves, next_due = self.moves()
            if not moves:
                if next_due == _NEVER:
                    break
                self.now = next_due
                continue
            client, kind = moves[self.rng.randrange(len(moves))] if len(moves) > 1 else moves[0]
            self.perform(client, kind)
            self.checker.after_step()
            self.now += self.rng.random() * STEP
        self.checker.at_quiescence()

    def housekeeping(self) -> None:
        """Pings, timed faults and session expiry at ``now``."""
        now = self.now
        model = self.model
        for client in self.clients:
            if client.connected and client.paused_until <= now:
                model.touch(client.session_id)
                client.last_answered_sent = now
        while self.timed and self.timed[0].at <= now:
            fault = self.timed.pop(0)
            self.apply_timed(fault)
        for session_id in model.expire_due():
            self.silently_expired.add(session_id)
            self.session_ended(session_id, "expired (silent for a session timeout)")
        if model.outbox:
            self.route()

    def apply_timed(self, fault: ExpireSession | Pause | SweepContainers | DeleteNode) -> None:
        if isinstance(fault, ExpireSession):
            client = self.clients[fault.client]
            if self.model.expire(client.session_id):
                self.fired(fault)
                self.force_expired.add(client.session_id)
                self.session_ended(client.session_id, "expired by the plan")
        elif isinstance(fault, DeleteNode):
            self.delete_node(fault)
        elif isinstance(fault, Pause):
            client = self.clients[fault.client]
            self.fired(fault)
            client.paused_until = max(client.paused_until, self.now + fault.duration)
            if self.trace is not None:
                self.note(client, f"paused until {client.paused_until:.4f}")
        else:
            swept = self.model.sweep_containers()
            if swept:
                self.fired(fault)
                if self.trace is not None:
                    self.note(None, f"container sweep deleted {swept}")

    def delete_node(self, fault: DeleteNode) -> None:
        """Another client deletes ``fault.client``'s contender node, if it has one now."""
        client = self.clients[fault.client]
        holding = client.holding
        path = None
        if holding is not None:
            node = self.model.nodes.get(holding.node)
            if node is not None and node.czxid == holding.token:
                path = holding.node
        elif client.attempt is not None:
            prefix = f"{self.scenario.path}/"
            path = next(
                (prefix + n.name for n in self.checker.queue() if n.attempt == client.attempt),
                None,
            )
        if path is None:
            return
        if not self.model.alive(self.operator):
            self.operator = self.model.open_session(1e9).id
        self.model.delete(self.operator, path)
        self.fired(fault)
        if holding is not None:
            self.force_deleted.add((holding.node, holding.token))
        if self.trace is not None:
            self.note(client, f"another client deleted its node {_short(path)}")

    def after_release_of_deleted(self, released: Holding) -> None:
        """A one-node holder whose node the plan deleted released before it knew: its
        release checks ownership locally (the documented window, ``NODE_WATCH_DELAY``),
        so it may have deleted the *next* holder's ``lock``. That deletion is the plan's
        doing too: the victim is exempt from the holders check as the first one was."""
        node = self.model.nodes.get(released.node)
        for client in self.clients:
            holding = client.holding
            if holding is None or holding.node != released.node:
                continue
            if node is None or node.czxid != holding.token:
                self.force_deleted.add((holding.node, holding.token))
                if self.trace is not None:
                    self.note(
                        client,
                        f"its node {_short(holding.node)} went with c{released.client}'s release",
                    )

    def session_ended(self, session_id: int, why: str) -> None:
        client = self.owner.get(session_id)
        if self.trace is not None:
            self.note(client, f"session {session_id:#x} {why}")
        if client is not None and client.session_id == session_id:
            client.disconnect(CLOSE_NOTICE)  # the server closes the connection

    def moves(self) -> tuple[list[tuple[SimClient, str]], float]:
        """The moves enabled now, and the earliest instant a later one will be."""
        now = self.now
        moves: list[tuple[SimClient, str]] = []
        due = _NEVER
        if self.timed:
            due = self.timed[0].at
        for client in self.clients:
            if not client.connected or client.paused_until > now:
                expiry = self.model.expiry_due(client.session_id)
                if expiry is not None and expiry < due:
                    due = expiry
            if client.paused_until > now:
                if client.paused_until < due:
                    due = client.paused_until
                continue
            if not client.connected:
                if client.reconnect_at <= now:
                    moves.append((client, "reconnect"))
                elif client.reconnect_at < due:
                    due = client.reconnect_at
            timer = client.next_timer() if client.timers else None
            if timer is not None:
                if timer.due <= now:
                    moves.append((client, "timer"))
                elif timer.due < due:
                    due = timer.due
            if client.inbox:
                first = min(client.inbox, key=_inbox_key).deliver_at
                if first <= now:
                    moves.append((client, "deliver"))
                elif first < due:
                    due = first
            action = client.action
            if action is None:
                continue
            if isinstance(action, Send):
                moves.append((client, "act"))
                continue
            if isinstance(action, AwaitWake) and action.fired:
                moves.append((client, "act"))
                continue
            when = action.until if isinstance(action, Sleep) else action.deadline
            if when is None:
                continue
            if when <= now:
                moves.append((client, "act"))
            elif when < due:
                due = when
        return moves, due

    def perform(self, client: SimClient, kind: str) -> None:
        if kind == "reconnect":
            client.reconnect()
        elif kind == "timer":
            timer = client.next_timer()
            assert timer is not None
            client.timers.remove(timer)
            timer.fn()
        elif kind == "deliver":
            item = min(client.inbox, key=_inbox_key)
            client.inbox.remove(item)
            woken = client.watches.deliver(item.notification)
            kind, path = item.notification.kind.value, _short(item.notification.path)
            if self.trace is not None:
                self.note(client, f"watch {kind} {path} woke {woken}")
        else:
            action = client.action
            if isinstance(action, Send):
                client.resume(self.send(client, action))
            elif isinstance(action, AwaitWake):
                client.resume(bool(action.fired))
            elif isinstance(action, AwaitConnection):
                self.note(client, "gave up waiting for a connection")
                client.resume(TIMED_OUT)
            else:
                client.resume(None)

    def send(self, client: SimClient, action: Send) -> Reply:
        """One request reaching the server (or not), per the plan."""
        request = action.request
        if client.epoch != action.epoch or not client.connected:
            if self.trace is not None:
                self.note(client, f"{_describe(request)} -> connection loss (already dropped)")
            return ConnectionLossError()
        number = client.requests
        client.requests += 1
        fault = self.drops.get((client.index, number))
        if fault is not None and not fault.applied:
            self.fired(fault)
            client.disconnect(fault.outage)
            if self.trace is not None:
                self.note(client, f"{_describe(request)} -> dropped before the server")
            return ConnectionLossError()
        watch = action.watcher is not None and isinstance(request, Exists | GetData)
        reply = self.model.apply(client.session_id, request, watch=watch)
        if isinstance(reply, list) and self.scenario.shuffle_children:
            self.rng.shuffle(reply)
        self.route()
        if fault is not None:
            self.fired(fault)
            client.disconnect(fault.outage)
            if self.trace is not None:
                self.note(client, f"{_describe(request)} -> applied ({_reply(reply)}), reply lost")
            return ConnectionLossError()
        client.last_answered_sent = self.now
        if watch and action.watcher is not None and not isinstance(reply, ZooKeeperError):
            client.watches.add_data(request.path, action.watcher)
        if self.trace is not None:
            self.note(client, f"{_describe(request)} -> {_reply(reply)}")
        return reply

    def route(self) -> None:
        """Hand fired watches to their clients' inboxes, delayed or reordered per plan."""
        for notification in self.model.take_outbox():
            client = self.owner.get(notification.session_id)
            if client is None:
                continue
            number = client.events
            client.events += 1
            self.order += 1
            deliver_at = self.now
            if not client.connected:
                deliver_at = max(deliver_at, client.reconnect_at)
            for item in client.inbox:  # a held (reordered) one lets this one overtake it
                if item.held:
                    item.held = False
                    item.deliver_at = max(item.deliver_at, deliver_at)
                    item.order = self.order + 0.5
            item = _Inbox(deliver_at, self.order, notification)
            delay = self.delays.get((client.index, number))
            if delay is not None:
                self.fired(delay)
                item.deliver_at += delay.delay
            if (client.index, number) in self.reorders:
                self.fired(self.reorders[(client.index, number)])
                item.held = True
                item.deliver_at += REORDER_WINDOW
            client.inbox.append(item)

    # -- bookkeeping ----------------------------------------------------------------------

    def spec_for(
        self, client: SimClient, cycle: Cycle, path: str | None = None
    ) -> _flow.AcquireSpec:
        scenario = self.scenario
        attempt = f"{self.tokens.getrandbits(128):032x}"
        fair = scenario.fair and cycle.fair
        payload = _nodes.Payload(
            identifier=f"client-{client.index}",
            attempt="" if fair else attempt,
            host="sim",
            pid=client.index,
        )
        return _flow.AcquireSpec(
            path=path or scenario.path,
            kind=cycle.kind,
            data=_nodes.encode_payload(payload),
            attempt=attempt,
            permits=scenario.permits,
            fair=fair,
            blocking=cycle.blocking,
            deadline=None if cycle.timeout is None else self.now + cycle.timeout,
        )

    def record(
        self, client: SimClient, spec: _flow.AcquireSpec, result: str, node: str = ""
    ) -> None:
        self.outcomes.append(Outcome(client.index, spec.kind, result, self.now))
        if self.trace is not None:
            self.note(client, f"acquire {spec.kind}: {result} {_short(node)}".rstrip())
        if result != "granted":
            self.checker.after_exit(client, spec, result)

    def fired(self, fault: Fault) -> None:
        self.faults_fired.append(fault)

    def note(self, client: SimClient | None, text: str) -> None:
        if self.trace is not None:
            who = "  " if client is None else repr(client)
            self.trace.append(f"{self.steps:5d} {self.now:9.4f} {who} {text}")


_NEVER = float("inf")


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


def _inbox_key(item: _Inbox) -> tuple[float, float]:
    return (item.deliver_at, item.order)


def _short(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    parsed = _nodes.parse(name)
    if parsed is None or not parsed.attempt:
        return name
    return f"{parsed.kind}-{parsed.attempt[:6]}-{parsed.sequence}"


def _describe(request: Request) -> str:
    kind = type(request).__name__
    if isinstance(request, Create):
        flags = "E" if request.ephemeral else "C" if request.container else "P"
        flags += "S" if request.sequential else ""
        return f"{kind}[{flags}] {_short(request.path)}"
    return f"{kind} {_short(request.path)}"


def _reply(reply: Reply) -> str:
    if isinstance(reply, list):
        return "[" + ", ".join(_short(name) for name in reply) + "]"
    if isinstance(reply, ZooKeeperError):
        return type(reply).__name__
    if isinstance(reply, Stat):
        return f"stat(czxid={reply.czxid}, owner={reply.ephemeral_owner:#x})"
    if isinstance(reply, Wake):
        return "TIMED_OUT"
    text = repr(reply)
    return text if len(text) < 80 else text[:77] + "..."


@contextlib.contextmanager
def patched_decide(decide: DecideFn | None) -> Iterator[None]:
    """Run the real flows with another strategy (to plant a bug); restored after."""
    if decide is None:
        yield
        return
    names = vars(_flow)  # the flow looks ``decide`` up in its module at each call
    original = names["decide"]
    names["decide"] = decide
    try:
        yield
    finally:
        names["decide"] = original


__all__ = ["AcquireFn", "Holding", "Outcome", "SimClient", "Simulation", "patched_decide"]
