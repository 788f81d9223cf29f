"""The seeded scheduler: many clients' lock flows, one step at a time, on a virtual clock.

Theory of operation
-------------------
Each simulated client (``zklocks.sim.client.SimClient``) runs a *program* of lock
calls through the real flows and its own small driver; a program yields *actions* —
send one request, wait for a connection, wait for a watch, sleep — and the scheduler
resumes it with the outcome.

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

Leases: a client acquires and releases through the real clients' operations
(``zklocks._frontend.operations``); a grant becomes a ``Lease`` watched by the client's
own ``LeaseKeeper`` (the one both real clients use), with its timer on the virtual clock;
a release ends the lease and runs the release flow.

Operations (``operations=True``): a cycle may bound its lease with ``max_hold``; when the
bound falls, the lease is lost and its node is taken back apart from the holder (the
operations' ``take_back``, run in one step), who holds on, as a hung holder would,
until its own release finds the node gone. A
``Revoke`` fault is an operator running the revoke flow in one step
(``zklocks.sim.operator``); holders listen, and a holder asked lets go early.

Determinism: the scenario, the fault plan, the schedule and the attempt tokens each come
from their own ``random.Random`` seeded from the seed; nothing reads the wall clock or
iterates a set of strings. ``replay(seed, plan)`` therefore repeats a run exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from zklocks._core import flow as _flow
from zklocks._core import kinds as _kinds
from zklocks._core import layouts as _layouts
from zklocks._core import nodes as _nodes
from zklocks._core import revoke as _revoke
from zklocks._core.ops import TIMED_OUT, Reply, Request, Wake
from zklocks._core.steps import ancestors
from zklocks._core.strategies import Decision, Rules
from zklocks._frontend.operations import AcquireFn
from zklocks._protocol.errors import ConnectionLossError, ZooKeeperError
from zklocks._protocol.records import Create, Exists, GetData, Stat
from zklocks.sim.actions import (
    AwaitConnection,
    AwaitWake,
    Delivery,
    Grant,
    Outcome,
    Send,
    Sleep,
)
from zklocks.sim.client import SimClient, short
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
    Revoke,
    SweepContainers,
)
from zklocks.sim.invariants import Checker, Violation
from zklocks.sim.model import Model
from zklocks.sim.operator import RevokeFn, operate
from zklocks.sim.scenario import FAMILIES, Cycle, Scenario, scenario_for

STEP = 0.002  # the clock moves up to this much between two steps (virtual seconds)
CLOSE_NOTICE = 0.001  # how soon a client notices the server closed its connection
REORDER_WINDOW = 0.05  # a reordered notification waits this long for one to overtake it
MAX_STEPS = 50_000

DecideFn: TypeAlias = Callable[[Any, Sequence[Any]], Decision]


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
        rules: Rules | None = None,
        layout: str = "zklocks",
        operations: bool = False,
        revoke: RevokeFn | None = None,
        lock_delay: float | None = None,
    ) -> None:
        self.seed = seed
        self.plan = plan
        self.acquire_flow: AcquireFn = acquire or _flow.acquire
        self.revoke_flow: RevokeFn = revoke or _revoke.revoke
        # Whose queue every contender stands in, and the rules it decides by: the
        # layout's, or a test's (to plant a bug); passed to the flow in each spec.
        chosen = _layouts.LAYOUTS[layout]
        self.layout = chosen if rules is None else chosen.with_rules(rules)
        self.scenario: Scenario = scenario_for(
            seed, families=families, layout=layout, operations=operations, lock_delay=lock_delay
        )
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
        self.grants: list[Grant] = []
        self.outcomes: list[Outcome] = []
        self.faults_fired: list[Fault] = []
        self.drops = {(f.client, f.request): f for f in plan if isinstance(f, DropRequest)}
        self.delays = {(f.client, f.event): f for f in plan if isinstance(f, DelayWatch)}
        self.reorders = {(f.client, f.event): f for f in plan if isinstance(f, ReorderWatch)}
        self.interrupts = {(f.client, f.op): f for f in plan if isinstance(f, Interrupt)}
        timed = [
            f
            for f in plan
            if isinstance(f, ExpireSession | Pause | SweepContainers | DeleteNode | Revoke)
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

    def apply_timed(
        self, fault: ExpireSession | Pause | SweepContainers | DeleteNode | Revoke
    ) -> None:
        if isinstance(fault, ExpireSession):
            client = self.clients[fault.client]
            if self.model.expire(client.session_id):
                self.fired(fault)
                self.force_expired.add(client.session_id)
                self.session_ended(client.session_id, "expired by the plan")
        elif isinstance(fault, DeleteNode):
            self.delete_node(fault)
        elif isinstance(fault, Revoke):
            self.revoke(fault)
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
            self.note(client, f"another client deleted its node {short(path)}")

    def revoke(self, fault: Revoke) -> None:
        """An operator asks the holders of the lock path to let go (``zklocks revoke``)."""
        if not self.model.alive(self.operator):
            self.operator = self.model.open_session(1e9).id
        path = self.scenario.path
        before = set(self.model.children_of(path))
        asked = operate(self.model, self.operator, self.revoke_flow(path))
        self.fired(fault)
        self.checker.after_revoke(before, asked)
        if self.trace is not None:
            self.note(None, f"an operator asked {asked} holder(s) to let go")
        self.route()

    def after_release_of_deleted(self, released: Grant) -> None:
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
                        f"its node {short(holding.node)} went with c{released.client}'s release",
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
            kind, path = item.notification.kind.value, short(item.notification.path)
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
            item = Delivery(deliver_at, self.order, notification)
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
        self, client: SimClient, cycle: Cycle, path: str, deadline: float | None, blocking: bool
    ) -> _flow.AcquireSpec:
        """One attempt's spec, drawn from the seed (``deadline`` is on the virtual clock:
        the acquire operation made it from the cycle's timeout)."""
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
            path=path,
            kind=_kinds.of(cycle.kind),
            data=_nodes.encode_payload(payload),
            attempt=attempt,
            permits=scenario.permits,
            fair=fair,
            blocking=blocking,
            deadline=deadline,
            layout=self.layout,
            lock_delay=scenario.lock_delay if fair else None,
            clock=self.clock,
        )

    def clock(self) -> float:
        """The virtual clock, for a spec's lock-delay."""
        return self.now

    def record(
        self, client: SimClient, spec: _flow.AcquireSpec, result: str, node: str = ""
    ) -> None:
        self.outcomes.append(Outcome(client.index, spec.kind.name, result, self.now))
        if self.trace is not None:
            self.note(client, f"acquire {spec.kind}: {result} {short(node)}".rstrip())
        if result != "granted":
            self.checker.after_exit(client, spec, result)

    def fired(self, fault: Fault) -> None:
        self.faults_fired.append(fault)

    def note(self, client: SimClient | None, text: str) -> None:
        if self.trace is not None:
            who = "  " if client is None else repr(client)
            self.trace.append(f"{self.steps:5d} {self.now:9.4f} {who} {text}")


_NEVER = float("inf")


def _inbox_key(item: Delivery) -> tuple[float, float]:
    return (item.deliver_at, item.order)


def _describe(request: Request) -> str:
    kind = type(request).__name__
    if isinstance(request, Create):
        flags = "E" if request.ephemeral else "C" if request.container else "P"
        flags += "S" if request.sequential else ""
        return f"{kind}[{flags}] {short(request.path)}"
    return f"{kind} {short(request.path)}"


def _reply(reply: Reply) -> str:
    if isinstance(reply, list):
        return "[" + ", ".join(short(n) if isinstance(n, str) else repr(n) for n in reply) + "]"
    if isinstance(reply, ZooKeeperError):
        return type(reply).__name__
    if isinstance(reply, Stat):
        return f"stat(czxid={reply.czxid}, owner={reply.ephemeral_owner:#x})"
    if isinstance(reply, Wake):
        return "TIMED_OUT"
    text = repr(reply)
    return text if len(text) < 80 else text[:77] + "..."


__all__ = ["AcquireFn", "Grant", "Outcome", "SimClient", "Simulation"]
