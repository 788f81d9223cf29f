"""What must hold after every step of a simulated schedule, and at its end.

Judged against the *true* rules (the scenario's layout's table, ``zklocks._core.layouts``,
looked up here, so a strategy planted into the flows cannot vouch for itself) and the
model's ground truth.

After every step
  * **Holders**: among holders whose lease is not lost, never two exclusive holders
    (fair or one-node lock, or both on one path), never two leaders (election), one
    holder per path (multi), no reader beside a writer, at most N semaphore holders. A
    lease is lost by the clock rule (``Lease.check``: last answered request *sent* +
    session timeout), by a loss notice (our node deleted, session expired), or — the two
    exemptions — its session was expired by the plan's ``ExpireSession`` fault or its
    node deleted by the plan's ``DeleteNode``, which no client can foresee (the client
    must then be told: "loss is told", below).
  * **No missed wake-up**: a waiter blocked until one of its watched ``nodes`` is
    deleted, while all of them still exist, must not be eligible by the true rule on
    the server's queue.
    That is the strategies' contract ("may not hold while all of nodes exist"), and a
    waiter that breaks it sleeps while it could hold (Curator's old semaphore bug).

When an acquire ends
  * **A grant's node exists at the grant**: the node is there, ours (our session, our
    token = its creation zxid), with no exemption: a grant must rest on a reply that
    shows our node, never on a wake-up alone (a waiter's node may have been deleted by
    someone else, or gone with its session).
  * **Granted**: the true rule grants it on the server's queue now (grants are real and
    FIFO), and the fencing token is larger than every earlier exclusive holder's (and
    for a writer, every earlier holder's) — unless the lease is already lost.
  * **Any other way out** (timeout, non-blocking miss, interrupt) leaves no node of that
    attempt behind; a timeout only after its deadline; a miss only when non-blocking; any
    other exception is a violation.

  * **Loss is told**: a holder whose node is gone (session expired, or deleted by
    someone) and who is connected, running, with no notification still on its way (nor
    the lease keeper's deferred watch on its node, ``NODE_WATCH_DELAY`` after the
    grant), must already see its lease lost: a notice cannot be missed.

When a holder releases
  * if its session expired of silence (the server heard nothing for a session timeout),
    its lease already says lost: the clock rule (``LeaseKeeper`` timer, ``Lease.check``)
    must not lag the server.

With operations (``max_hold`` and revokes)
  * **The bound is kept**: a running holder whose ``max_hold`` has passed already sees
    its lease lost (its timer is not still due).
  * **A revoke only asks**: it deletes no node, and every holder it found carries the
    request in its node's data afterwards.
  * **A revoke is heard**: a holder whose node carries a request and who is connected,
    running, with nothing on its way (notifications, a look, the deferred watch) has
    heard it (and let go early, in the simulated program).

With a lock-delay (``lock_delay``: every queued contender's)
  * **No grant within the delay**: an exclusive grant comes no earlier than
    ``lock_delay`` after a holder ahead of it, or one lost before it queued (the
    newcomer), was removed other than by its own release (expired, deleted, taken
    back: judged by what the holder did, not by the flow's mark), unless another node
    was granted since (it took the loss over, docs/locks.md).
  * **No delay after clean departures**: a contender waits out a lock-delay only where
    a node of its directory went other than of its own accord (a holder's release, a
    waiter's give-up).

At quiescence (nothing can ever happen again)
  * every client finished its script: none waits for ever (missed wake-up, deadlock);
  * no contender node is left under the lock path (no orphan).
"""

from __future__ import annotations

from typing import Protocol

from zklocks._core import dialects as _dialects
from zklocks._core import kinds as _kinds
from zklocks._core import layouts as _layouts
from zklocks._core import nodes as _nodes
from zklocks._core import revoke as _revoke
from zklocks._core.flow import AcquireSpec
from zklocks._core.strategies import Granted
from zklocks.sim.actions import Grant
from zklocks.sim.client import SimClient
from zklocks.sim.model import Model, Removal
from zklocks.sim.scenario import Scenario
from zklocks.sim.violation import Violation

__all__ = ["Checker", "Observed", "Violation"]


class Observed(Protocol):
    """What the invariants read of a simulation (``zklocks.sim.scheduler.Simulation``)."""

    now: float
    model: Model
    scenario: Scenario
    clients: list[SimClient]
    force_expired: set[int]  # sessions the plan's ExpireSession expired
    force_deleted: set[tuple[str, int]]  # held nodes the plan's DeleteNode deleted
    silently_expired: set[int]  # sessions expired after a session timeout of silence


class Checker:
    """The invariants of one ``Simulation``."""

    def __init__(self, sim: Observed) -> None:
        self.sim = sim
        self.scenario = sim.scenario
        self.permits = sim.scenario.permits or 1
        self.top_exclusive_token = 0
        self.top_token = 0
        self._queue_key = -1
        self._queue: list[_nodes.NodeName] = []
        self._tops: dict[str, int] = {}  # multi: the top token of each further path
        # the true rules of the scenario's layout (never a planted bug's)
        self.layout = _layouts.LAYOUTS[sim.scenario.layout]
        self.rules = self.layout.rules
        self.lock_delays = 0  # lock-delay waits seen (the tests show they are exercised)
        # node -> when its holder began to release it: a removal after that is clean,
        # whatever the flow marked (the invariants judge by what the holder did)
        self.releasing: dict[str, float] = {}
        self.granted_nodes: set[str] = set()  # every node granted to its client
        self.grants_at: dict[str, list[tuple[float, str]]] = {}  # directory: (when, node)

    def queue(self, path: str | None = None) -> list[_nodes.NodeName]:
        """The server's line under a lock path now (the main path's cached per change)."""
        model = self.sim.model
        if path is not None and path != self.scenario.path:
            return self._line(model.children_of(path))  # multi's further path
        if self._queue_key != model.writes:
            self._queue = self._line(model.children_of(self.scenario.path))
            self._queue_key = model.writes
        return self._queue

    def _line(self, children: list[str]) -> list[_nodes.NodeName]:
        """The line in the layout's own order (a peer's: as its contenders see it)."""
        if self.layout is _layouts.ZKLOCKS:
            return _nodes.queue(children)
        dialect = self.layout.dialect
        first = next((n for n in map(dialect.read, children) if n is not None), None)
        return [] if first is None else dialect.line_up_to(first, children) or []

    # -- after every step -------------------------------------------------------------

    def after_step(self) -> None:
        sim = self.sim
        if self.scenario.operations:
            self._check_operations()
        live = []
        for client in sim.clients:
            holding = client.holding
            if holding is None:
                continue
            for held in (holding, *client.others) if client.others else (holding,):
                if held.lease.lost or held.session_id in sim.force_expired:
                    continue  # multi: client.others are the further parts
                if (held.node, held.token) not in sim.force_deleted:
                    live.append(held)
        if len(live) > 1:
            if self.scenario.paths:
                self._check_each_path(live)
            else:
                self._check_holders(live)
        for holding in live:
            self._check_notice(sim.clients[holding.client], holding)
        if self.scenario.fair:
            for client in sim.clients:
                if client.awaiting is not None and client.attempt is not None:
                    self._check_waiter(client)

    def _check_holders(self, live: list[Grant]) -> None:
        family = self.scenario.family
        if family in ("mutex", "single", "mixed"):
            trouble = "two non-lost exclusive holders"
        elif family == "election":
            trouble = "two non-lost leaders"
        elif family == "rw":
            if not any(h.kind == "write" for h in live):
                return
            trouble = "a reader beside a non-lost writer"
        else:
            if len(live) <= self.permits:
                return
            trouble = f"{len(live)} non-lost holders of a {self.permits}-permit semaphore"
        raise Violation(f"{trouble}: {'; '.join(self._describe(h) for h in live)}")

    def _check_each_path(self, live: list[Grant]) -> None:
        """multi: one non-lost holder per lock path."""
        for path in self.scenario.paths:
            here = [h for h in live if h.node.rsplit("/", 1)[0] == path]
            if len(here) > 1:
                raise Violation(
                    f"two non-lost holders of {path}: {'; '.join(map(self._describe, here))}"
                )

    def _describe(self, holding: Grant) -> str:
        facts = holding.lease._session
        sent = facts.last_answered_sent()
        return (
            f"c{holding.client} holds {holding.kind} {holding.node} (token {holding.token}, "
            f"session {holding.session_id:#x}, granted at {holding.granted_at:.4f}, last "
            f"answered request sent at {sent})"
        )

    def _check_notice(self, client: SimClient, holding: Grant) -> None:
        """A holder whose node vanished is told as soon as nothing more is on its way."""
        if not self.vanished(holding) or client.inbox or client.pending_watches:
            return
        if client.next_timer() is not None:
            return  # the keeper's watch on our node is set NODE_WATCH_DELAY after a grant
        if client.connected and client.paused_until <= self.sim.now:
            raise Violation(
                f"{client}'s node {holding.node} is gone, nothing is on its way to it, and "
                "its lease still does not say lost (a missed loss notice)"
            )

    def _check_waiter(self, client: SimClient) -> None:
        assert client.awaiting is not None
        nodes = self.sim.model.nodes
        for path in client.awaiting:
            if path not in nodes:
                return  # a deletion is on its way to the waiter
        line = self.queue(client.awaiting[0].rsplit("/", 1)[0])  # where it waits
        me = next((node for node in line if node.attempt == client.attempt), None)
        if me is None:
            return  # our node is gone: the waiter will start over
        me = _dialects.with_permits(me, self.scenario.permits)  # a Curator lease's name lacks N
        if isinstance(self.rules.decide(me, line), Granted):
            raise Violation(
                f"missed wake-up: {client} may hold {me.name} but sleeps on "
                f"{[p.rsplit('/', 1)[1] for p in client.awaiting]}, which all still exist; "
                f"the line is {[n.name for n in line]}"
            )

    # -- operations -----------------------------------------------------------------------

    def _check_operations(self) -> None:
        now = self.sim.now
        nodes = self.sim.model.nodes
        for client in self.sim.clients:
            if client.paused_until > now or client.holding is None:
                continue
            quiet = not (client.inbox or client.pending_watches or client.pending_apart)
            timer = client.next_timer()
            settled = quiet and timer is None
            for held in (client.holding, *client.others):
                lease = held.lease
                if lease.ended or lease._lost_reason is not None:
                    continue
                bound = lease._hold_deadline
                if bound is not None and now >= bound and (timer is None or timer.due > now):
                    raise Violation(
                        f"{client} still holds {held.node} past its max_hold (due at "
                        f"{bound:.4f}, now {now:.4f}): the bound's timer did not fire"
                    )
                node = nodes.get(held.node)
                asked = (
                    node is not None and node.czxid == held.token and _revoke.is_request(node.data)
                )
                if asked and settled and client.connected and not lease._revoked:
                    raise Violation(
                        f"{client} was asked to let go of {held.node} and nothing is on "
                        "its way to it, yet its lease has not heard (a missed revoke)"
                    )

    def after_revoke(self, before: set[str], asked: int) -> None:
        """A revoke asks: it deletes nothing, and each holder now carries the request."""
        path = self.scenario.path
        gone = before - set(self.sim.model.children_of(path))
        if gone:
            raise Violation(
                f"a revoke deleted {sorted(gone)}: a revoke only asks holders to let go"
            )
        line = self.queue()
        holders = [n for n in line if isinstance(self.rules.decide(n, line), Granted)]
        unasked = [
            n.name
            for n in holders
            if not _revoke.is_request(self.sim.model.nodes[f"{path}/{n.name}"].data)
        ]
        if unasked or asked != len(holders):
            raise Violation(
                f"a revoke asked {asked} of {len(holders)} holders; not asked: {unasked}"
            )

    # -- when an acquire ends -------------------------------------------------------------

    def on_grant(self, client: SimClient, holding: Grant, spec: AcquireSpec) -> None:
        sim = self.sim
        node = sim.model.nodes.get(holding.node)
        lost = holding.lease.lost or holding.session_id in sim.force_expired
        if node is None or node.ephemeral_owner != holding.session_id:
            whose = "gone" if node is None else f"owned by session {node.ephemeral_owner:#x}"
            raise Violation(
                f"a grant's node does not exist at the grant: {client} was granted "
                f"{holding.node} in session {holding.session_id:#x}, but the node is {whose}"
                f"{' (its lease already says lost)' if lost else ''}"
            )
        if holding.token != node.czxid:
            raise Violation(f"{client}: token {holding.token} is not czxid {node.czxid}")
        if spec.fair:
            directory, name = holding.node.rsplit("/", 1)  # SemaphoreV2: path/leases
            line = self._line_of_claims(directory)
            me = _dialects.with_permits(next(n for n in line if n.name == name), spec.permits)
            if directory != spec.path:
                # SemaphoreV2 counts newer leases too, but a newer one can only have been
                # made after our decision (after we let the mutex go): judge without them.
                line = [n for n in line if n.sequence <= me.sequence]
            if not isinstance(self.rules.decide(me, line), Granted):
                raise Violation(
                    f"{client} was granted {name} out of turn; the line is {[n.name for n in line]}"
                )
        if spec.fair and spec.lock_delay is not None:
            self._check_lock_delay(client, holding, spec)
        self.granted_nodes.add(holding.node)
        directory = holding.node.rsplit("/", 1)[0]
        self.grants_at.setdefault(directory, []).append((self.sim.now, holding.node))
        if lost:
            return
        if spec.path != self.scenario.path:  # multi: tokens grow per path
            self._on_grant_elsewhere(client, holding, spec.path)
            return
        exclusive = spec.kind.exclusive or (spec.kind is _kinds.PERMIT and self.permits == 1)
        if exclusive and holding.token <= self.top_token:
            raise Violation(
                f"fencing token went backwards: {client} got {holding.token} after {self.top_token}"
            )
        if spec.kind is _kinds.READ and holding.token <= self.top_exclusive_token:
            raise Violation(
                f"fencing token went backwards: reader {client} got {holding.token} after "
                f"writer token {self.top_exclusive_token}"
            )
        if exclusive:
            self.top_exclusive_token = max(self.top_exclusive_token, holding.token)
        self.top_token = max(self.top_token, holding.token)

    def _check_lock_delay(self, client: SimClient, holding: Grant, spec: AcquireSpec) -> None:
        """No grant within ``lock_delay`` of an abnormal loss of a holder that no later
        holder took over: one ahead of it in line, or one lost before it queued (the
        newcomer's half). Exclusive kinds: for shared ones the count has documented
        limits."""
        assert spec.lock_delay is not None
        exclusive = spec.kind.exclusive or (spec.kind is _kinds.PERMIT and self.permits == 1)
        if not exclusive:
            return
        for loss in self.open_losses(holding.node):
            if self.sim.now < loss.at + spec.lock_delay - 1e-9:  # float sums
                raise Violation(
                    f"{client} was granted {holding.node.rsplit('/', 1)[1]} at "
                    f"{self.sim.now:.6f}, within lock_delay {spec.lock_delay} of the abnormal "
                    f"loss of {loss.name} at {loss.at:.6f}, which no holder took over"
                )

    def on_lock_delay(self, client: SimClient, node: str | None) -> None:
        """A contender waits out a lock-delay only where a node left abnormally (lost,
        or a waiter taken away: the count cannot say whose), never where every node
        left of its own accord (a release, a waiter giving up)."""
        self.lock_delays += 1
        spec = client.spec  # our node may be gone meanwhile: the wait ends, then it looks
        directory = node.rsplit("/", 1)[0] if node is not None else spec and spec.path
        removals = self.sim.model.removals
        if not any(r.directory == directory and self.abnormal(r) for r in removals):
            raise Violation(
                f"{client} waits out a lock-delay with no abnormal loss in {directory} (for {node})"
            )

    def abnormal(self, removal: Removal) -> bool:
        """Did the node go other than of its own accord? The ground truth, not the flow's
        mark: a holder's own release (``releasing``, unless ``max_hold`` took the node
        back first) or a waiter's own give-up (deleted by its own session, never
        granted) is clean; an expiry, another session's delete, a take-back are not,
        nor any end of a one-node ``lock`` beside queued ones (a misuse: it marks
        nothing, so a queued contender may wait after its release)."""
        if removal.name == _nodes.SINGLE_NODE:
            return True
        node = f"{removal.directory}/{removal.name}"
        released = self.releasing.get(node)
        if released is not None and released <= removal.at:
            return False
        return not (removal.own and node not in self.granted_nodes)

    def open_losses(self, node: str) -> list[Removal]:
        """Abnormal removals of nodes that held, before ``node`` (full path) was
        granted, that could block it (ahead of it in line, or gone before it queued),
        with no grant of another node of the directory since (a takeover)."""
        directory, name = node.rsplit("/", 1)
        taken_over = max(
            (at for at, other in self.grants_at.get(directory, ()) if other != node),
            default=None,
        )
        found = []
        for removal in self.sim.model.removals:
            if removal.directory != directory or (
                taken_over is not None and removal.at < taken_over
            ):
                continue
            if removal.name == _nodes.SINGLE_NODE:  # a misuse beside queued ones: the
                continue  # one-node lock marks nothing, so it never must delay anyone
            if not self.abnormal(removal):
                continue
            permits = self.scenario.permits
            line = [_dialects.with_permits(n, permits) for n in self._line(list(removal.children))]
            names = [n.name for n in line]
            if removal.name not in names:
                continue
            if name in names and names.index(removal.name) > names.index(name):
                continue  # behind us: it never blocked us
            gone = line[names.index(removal.name)]
            if isinstance(self.rules.decide(gone, line), Granted):
                found.append(removal)
        return found

    def _on_grant_elsewhere(self, client: SimClient, holding: Grant, path: str) -> None:
        top = self._tops.get(path, 0)
        if holding.token <= top:
            raise Violation(
                f"fencing token went backwards on {path}: {client} got {holding.token} after {top}"
            )
        self._tops[path] = holding.token

    def _line_of_claims(self, path: str) -> list[_nodes.NodeName]:
        """The server's line, less a one-node ``lock`` that nobody holds.

        On a mixed path, a one-node acquirer's ``lock`` exists between its create and
        its refusal (its listing, taken after the create, shows the queued contender):
        it never holds, so it is ahead of no one.
        """
        line = self.queue(path)
        if self.scenario.family != "mixed" or not line or not line[0].single:
            return line
        single = f"{self.scenario.path}/{_nodes.SINGLE_NODE}"
        node = self.sim.model.nodes[single]
        for client in self.sim.clients:
            holding = client.holding
            if holding is not None and holding.node == single and holding.token == node.czxid:
                return line
        return line[1:]

    def after_exit(self, client: SimClient, spec: AcquireSpec, result: str) -> None:
        sim = self.sim
        if result == "timed out" and (spec.deadline is None or sim.now < spec.deadline):
            raise Violation(f"{client}: timed out before its deadline {spec.deadline}")
        if result == "missed" and spec.blocking:
            raise Violation(f"{client}: a blocking acquire returned without the lock")
        left = self._nodes_of_attempt(spec)
        if left:
            how = f"interrupted at {client.interrupted_at}" if client.interrupted else result
            raise Violation(f"{client}: acquire ended ({how}) but left {left} behind")

    def _directories(self, path: str | None = None) -> tuple[str, ...]:
        """Where contenders' nodes are: each lock path, or SemaphoreV2's two directories."""
        paths = self.scenario.lock_paths if path is None else (path,)
        if self.scenario.family == "semaphore" and self.layout.two_stage_semaphore:
            return tuple(f"{p}/{stage}" for p in paths for stage in ("locks", "leases"))
        return paths

    def _nodes_of_attempt(self, spec: AcquireSpec) -> list[str]:
        if spec.fair:
            return [
                n.name
                for path in self._directories(spec.path)
                for n in self.queue(path)
                if n.attempt == spec.attempt
            ]
        node = self.sim.model.nodes.get(f"{spec.path}/{_nodes.SINGLE_NODE}")
        if node is not None and _nodes.decode_payload(node.data).attempt == spec.attempt:
            return [_nodes.SINGLE_NODE]
        return []

    def vanished(self, holding: Grant) -> bool:
        """Is the holder's node gone (or no longer its own)?"""
        node = self.sim.model.nodes.get(holding.node)
        return node is None or node.ephemeral_owner != holding.session_id

    def before_release(self, client: SimClient, holding: Grant) -> None:
        """A holder whose session expired of silence must see its lease lost by now."""
        # the lock-delay's truth: a release, unless max_hold took the node back first
        # (its plain delete and this release race, and either may land)
        if "max_hold" not in (holding.lease.lost_reason or ""):
            self.releasing.setdefault(holding.node, self.sim.now)
        if holding.session_id in self.sim.silently_expired and not holding.lease.lost:
            raise Violation(
                f"{client}'s session {holding.session_id:#x} expired after a session timeout "
                f"of silence, yet its lease of {holding.node} does not say lost as it releases "
                "(the clock rule failed)"
            )

    # -- at quiescence ----------------------------------------------------------------------

    def at_quiescence(self) -> None:
        sim = self.sim
        stuck = [client for client in sim.clients if not client.done]
        if stuck:
            raise Violation(
                "missed wake-up or deadlock: nothing can happen any more, yet "
                + "; ".join(self._stuck(client) for client in stuck)
                + f"; the line is {[n.name for n in self.queue()]}"
            )
        for path in self._directories():
            left = sim.model.children_of(path)
            if left:
                owners = {
                    name: hex(sim.model.nodes[f"{path}/{name}"].ephemeral_owner) for name in left
                }
                raise Violation(f"orphan nodes after quiescence: {owners}")

    def _stuck(self, client: SimClient) -> str:
        action = client.action
        if client.awaiting is not None:
            nodes = self.sim.model.nodes
            state = {p.rsplit("/", 1)[1]: p in nodes for p in client.awaiting}
            return f"{client} waits for ever on {state} (name: exists?)"
        return f"{client} is stuck at {action!r}"
