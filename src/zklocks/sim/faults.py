"""Faults as data: a ``FaultPlan`` is a tuple of the records below.

A plan says *what goes wrong where*, never *how*: the scheduler looks each fault up when
the named client reaches the named request, operation or instant. So a plan is printed
with a failing seed, pasted back into ``replay`` or ``python -m zklocks.sim --plan``,
and shrunk by dropping faults one by one.

Coordinates: ``client`` is the client's index in the scenario; ``request`` counts that
client's ZooKeeper requests from 0 (each request of a pipeline counts); ``op`` counts the
operations its acquire flows yielded from 0; ``event`` counts the watch notifications the
server sent it from 0; ``at`` is virtual time in seconds.

Text form (``format_plan`` / ``parse_plan``), faults separated by ``;``::

    drop:client=1,request=4,applied=1,outage=0.3; pause:client=0,at=0.2,duration=4.0

``delete:client=2,at=0.4`` is another client deleting client 2's contender node;
``revoke:at=0.3`` an operator asking the lock's holders to let go (``zklocks revoke``).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True, slots=True)
class DropRequest:
    """The connection drops with this request in flight: the reply is ConnectionLoss.

    ``applied=False``: lost before the server saw it. ``applied=True``: the server
    applied it and the reply was lost. The client reconnects after ``outage`` seconds
    (if that is longer than its session timeout, it finds its session expired).
    """

    client: int
    request: int
    applied: bool
    outage: float


@dataclass(frozen=True, slots=True)
class ExpireSession:
    """At ``at`` the server expires the client's session (as closing it from elsewhere)."""

    client: int
    at: float


@dataclass(frozen=True, slots=True)
class DelayWatch:
    """The client's ``event``-th watch notification arrives ``delay`` seconds late."""

    client: int
    event: int
    delay: float


@dataclass(frozen=True, slots=True)
class ReorderWatch:
    """The client's ``event``-th watch notification arrives after the one that follows."""

    client: int
    event: int


@dataclass(frozen=True, slots=True)
class Pause:
    """The client process freezes (GC, SIGSTOP) at ``at`` for ``duration`` seconds."""

    client: int
    at: float
    duration: float


@dataclass(frozen=True, slots=True)
class Interrupt:
    """KeyboardInterrupt thrown into the client's acquire flow at its ``op``-th operation.

    ``sent=True``: the operation's requests were sent (and applied) first, as when the
    interrupt lands while the driver waits for the replies.
    """

    client: int
    op: int
    sent: bool


@dataclass(frozen=True, slots=True)
class SweepContainers:
    """At ``at`` the server's container manager deletes empty lock paths."""

    at: float


@dataclass(frozen=True, slots=True)
class DeleteNode:
    """At ``at`` another client (an operator, a clean-up script) deletes the node of
    ``client``'s acquire in progress (a queued waiter's node) or of the lease it holds.

    Fires only if that client has such a node then; a one-node acquirer that does not
    hold has none.
    """

    client: int
    at: float


@dataclass(frozen=True, slots=True)
class Revoke:
    """At ``at`` an operator asks every holder of the lock path to let go (the revoke
    flow, ``zklocks._core.revoke``, on a session of its own). Drawn only for scenarios
    with operations (``scenario_for(operations=True)``)."""

    at: float


Fault: TypeAlias = (
    DropRequest
    | ExpireSession
    | DelayWatch
    | ReorderWatch
    | Pause
    | Interrupt
    | SweepContainers
    | DeleteNode
    | Revoke
)
FaultPlan: TypeAlias = tuple[Fault, ...]

_KINDS: dict[str, type[Fault]] = {
    "drop": DropRequest,
    "expire": ExpireSession,
    "delay": DelayWatch,
    "reorder": ReorderWatch,
    "pause": Pause,
    "interrupt": Interrupt,
    "sweep": SweepContainers,
    "delete": DeleteNode,
    "revoke": Revoke,
}
_NAMES = {cls: name for name, cls in _KINDS.items()}


def format_fault(fault: Fault) -> str:
    fields = []
    for f in dataclasses.fields(fault):
        value = getattr(fault, f.name)
        text = str(int(value)) if isinstance(value, bool) else repr(value)
        fields.append(f"{f.name}={text}")
    return f"{_NAMES[type(fault)]}:{','.join(fields)}"


def format_plan(plan: FaultPlan) -> str:
    """The plan as one line of text that ``parse_plan`` reads back exactly."""
    return "; ".join(format_fault(fault) for fault in plan)


def parse_plan(text: str) -> FaultPlan:
    """Read a plan written by ``format_plan`` (``""`` is the empty plan)."""
    faults: list[Fault] = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, _, body = part.partition(":")
        cls = _KINDS.get(name.strip())
        if cls is None:
            raise ValueError(f"unknown fault kind {name!r} in {part!r}")
        values: dict[str, object] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for item in body.split(","):
            key, _, raw = item.partition("=")
            key = key.strip()
            if key not in types:
                raise ValueError(f"{name} has no field {key!r}")
            kind = types[key]
            values[key] = (
                raw.strip() == "1"
                if kind in ("bool", bool)
                else int(raw)
                if kind in ("int", int)
                else float(raw)
            )
        faults.append(cls(**values))  # type: ignore[arg-type]
    return tuple(faults)


def random_plan(
    rng: random.Random, *, clients: int, session_timeout: float, horizon: float
) -> FaultPlan:
    """Up to four faults aimed where a small scenario will meet them."""
    plan: list[Fault] = []
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4))):
        client = rng.randrange(clients)
        roll = rng.random()
        if roll < 0.30:
            long = rng.random() < 0.25
            outage = session_timeout * rng.uniform(1.05, 1.6) if long else rng.uniform(0.0, 0.3)
            plan.append(DropRequest(client, rng.randrange(24), rng.random() < 0.5, _r(outage)))
        elif roll < 0.42:
            plan.append(ExpireSession(client, _r(rng.uniform(0.0, horizon))))
        elif roll < 0.57:
            plan.append(DelayWatch(client, rng.randrange(6), _r(rng.uniform(0.0, 0.5))))
        elif roll < 0.65:
            plan.append(ReorderWatch(client, rng.randrange(6)))
        elif roll < 0.80:
            long = rng.random() < 0.6
            duration = session_timeout * rng.uniform(1.05, 2.0) if long else rng.uniform(0, 0.5)
            plan.append(Pause(client, _r(rng.uniform(0.0, horizon)), _r(duration)))
        elif roll < 0.93:
            plan.append(Interrupt(client, rng.randrange(12), rng.random() < 0.5))
        else:
            plan.append(SweepContainers(_r(rng.uniform(0.0, horizon))))
    # drawn after the others, so that adding this kind left every other seed's faults
    # as they were
    if rng.random() < DELETE_NODE_SHARE:
        plan.append(DeleteNode(rng.randrange(clients), _r(rng.uniform(0.0, horizon))))
    return tuple(plan)


def operator_plan(rng: random.Random, *, horizon: float) -> FaultPlan:
    """One or two revokes, for a scenario with operations (on top of its other faults)."""
    return tuple(Revoke(_r(rng.uniform(0.0, horizon))) for _ in range(rng.choice((1, 1, 2))))


DELETE_NODE_SHARE = 0.25
"""How many random plans get a ``DeleteNode`` (on top of their other faults)."""


def _r(value: float) -> float:
    return round(value, 3)
