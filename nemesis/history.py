"""The history: what the clients and the nemesis recorded, as JSON lines, and its parse.

Every event is one JSON object with ``c`` (a client's number, or ``"nemesis"`` /
``"runner"``), ``ev`` and ``t`` (``time.monotonic()`` of the machine: one clock for every
process). A client's events, with ``n`` numbering its acquisitions:

    invoke/ok/fail  op=acquire  kind (lock, read, write, permit), hold (planned seconds);
                                ok: token, node; fail: error
    queued          the acquire's own first listing had come back and it waited (t read
                    after: ``--lock-delay`` runs; from the library's ``queued at position``
                    log record, so the listing's reply is the lock-delay count's baseline)
    held            the lease said held at t (``t`` read *before* ``lease.lost`` said False)
    lost            the first look at ``lease.lost`` that said True (t read before), reason
    told            the lost-callback ran at t, reason
    invoke/ok/fail  op=release
    invoke/ok/fail  op=write    w (the turn's number), store (zk, pg, redis); invoke:
                                token, element; fail: error (``stale: ...`` or
                                ``conflict: ...``: refused; ``unknown: ...``: no answer)
    session-lost    the client's listener heard ``ConnectionState.LOST`` at t: the session
                    it had expired (its nodes are gone, deleted by the server)
    client-start, client-error, client-stop

The nemesis's: ``fault`` (id, kind, target ``m<myid>`` or ``c<client>``, detail) and
``healed`` (id) when it was undone; ``note`` (text). The runner's: ``start`` (the run's
parameters), ``stores`` (the guarded-set workload's PostgreSQL port, Redis port and
pid), ``faults-begin`` (the clients are up, the nemesis starts), ``final`` (the
guarded-set workload: a store's set once every client stopped, ``store`` and
``elements``, or ``error`` if it could not be read) and ``end``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Event = dict[str, Any]


@dataclass
class Hold:
    """One acquisition, from its invoke to its release (or its failure)."""

    client: int
    n: int
    kind: str
    invoke: float
    planned: float | None = None
    ok: float | None = None
    failed: float | None = None
    error: str | None = None
    token: int | None = None
    node: str | None = None
    queued: float | None = None  # its first listing had come back, and it waited
    first_held: float | None = None
    last_held: float | None = None
    lost: float | None = None
    lost_reason: str | None = None
    told: float | None = None
    release_invoke: float | None = None
    release_end: float | None = None
    release_error: str | None = None

    @property
    def claimed(self) -> tuple[float, float] | None:
        """``[ok, last time the lease said held]``: the span the lease said held throughout.

        ``lost`` is sticky, so a lease that said held at ``last_held`` said held at every
        instant since it was handed over (at the latest at ``ok``).
        """
        if self.ok is None or self.last_held is None:
            return None
        return self.ok, max(self.ok, self.last_held)

    @property
    def label(self) -> str:
        return f"c{self.client}#{self.n} {self.kind}"


REFUSALS = ("stale", "conflict")  # a write's error that says nothing was applied


@dataclass
class Write:
    """One read-modify-write adding ``element`` to the set in one store."""

    client: int
    n: int  # the acquisition it was made under
    w: int
    token: int
    invoke: float
    store: str = "set"
    element: str | None = None
    end: float | None = None
    accepted: bool | None = None  # None: no answer recorded
    error: str | None = None

    @property
    def refused(self) -> bool:
        """The store said no and applied nothing (not an unknown outcome)."""
        return self.accepted is False and (self.error or "").split(":")[0] in REFUSALS

    @property
    def label(self) -> str:
        return f"c{self.client}#{self.n} {self.store} write {self.w}"


@dataclass
class Fault:
    id: int
    kind: str
    target: str
    start: float
    end: float | None = None
    detail: str = ""


@dataclass
class History:
    t0: float = 0.0
    faults_begin: float | None = None  # when the clients were up and the nemesis began
    end: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    holds: list[Hold] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    clients: dict[int, Event] = field(default_factory=dict)
    session_losses: dict[int, list[float]] = field(default_factory=dict)  # client: times
    notes: list[tuple[float, str]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)
    finals: dict[str, list[str]] = field(default_factory=dict)  # store: its set at the end
    final_errors: list[str] = field(default_factory=list)

    @property
    def last_time(self) -> float:
        if self.end is not None:
            return self.end
        times = [self.t0]
        for h in self.holds:
            times += [t for t in (h.invoke, h.ok, h.last_held, h.release_end) if t is not None]
        times += [f.end or f.start for f in self.faults]
        return max(times)


def dumps(event: Event) -> str:
    return json.dumps(event, separators=(",", ":"))


def load(path: str | Path) -> list[Event]:
    """Every event of a ``history.jsonl`` (a torn last line is skipped)."""
    events: list[Event] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                events.append(event)
    return events


def parse(events: Iterable[Event]) -> History:
    history = History()
    holds: dict[tuple[int, int], Hold] = {}
    writes: dict[tuple[int, int, str], Write] = {}
    faults: dict[int, Fault] = {}
    for e in events:
        who, ev, t = e.get("c"), e.get("ev"), float(e.get("t", 0.0))
        if who == "runner":
            if ev == "start":
                history.t0 = t
                history.params = dict(e.get("params", {}))
            elif ev == "faults-begin":
                history.faults_begin = t
            elif ev == "final":
                if "error" in e:
                    history.final_errors.append(f"{e.get('store')}: {e['error']}")
                else:
                    history.finals[str(e["store"])] = [str(x) for x in e.get("elements", [])]
            elif ev == "end":
                history.end = t
        elif who == "nemesis":
            if ev == "fault":
                fault = Fault(int(e["id"]), e["kind"], e["target"], t, None, e.get("detail", ""))
                faults[fault.id] = fault
                history.faults.append(fault)
            elif ev == "healed" and int(e["id"]) in faults:
                faults[int(e["id"])].end = t
            elif ev == "note":
                history.notes.append((t, str(e.get("text", ""))))
        elif isinstance(who, int):
            _client_event(history, holds, writes, who, ev, t, e)
    return history


def _client_event(
    history: History,
    holds: dict[tuple[int, int], Hold],
    writes: dict[tuple[int, int, str], Write],
    c: int,
    ev: Any,
    t: float,
    e: Event,
) -> None:
    op = e.get("op")
    if ev == "client-start":
        history.clients[c] = e
        return
    if ev == "session-lost":
        history.session_losses.setdefault(c, []).append(t)
        return
    if ev == "client-error":
        history.errors.append((t, f"c{c}: {e.get('error')}"))
        return
    n = e.get("n")
    if not isinstance(n, int):
        return
    if op == "acquire" and ev == "invoke":
        holds[c, n] = Hold(c, n, str(e.get("kind", "lock")), t, e.get("hold"))
        history.holds.append(holds[c, n])
        return
    hold = holds.get((c, n))
    if hold is None:
        return
    if op == "acquire":
        if ev == "ok":
            hold.ok, hold.token, hold.node = t, e.get("token"), e.get("node")
        elif ev == "fail":
            hold.failed, hold.error = t, e.get("error")
    elif op == "release":
        if ev == "invoke":
            hold.release_invoke = t
        else:
            hold.release_end = t
            if ev == "fail":
                hold.release_error = e.get("error")
    elif op == "write":
        w, store = int(e["w"]), str(e.get("store", "set"))
        if ev == "invoke":
            write = Write(c, n, w, int(e["token"]), t, store, e.get("element"))
            writes[c, w, store] = write
            history.writes.append(write)
        elif (c, w, store) in writes:
            write = writes[c, w, store]
            write.end, write.accepted, write.error = t, ev == "ok", e.get("error")
    elif ev == "queued" and hold.queued is None:
        hold.queued = t
    elif ev == "held":
        if hold.first_held is None:
            hold.first_held = t
        hold.last_held = t if hold.last_held is None else max(hold.last_held, t)
    elif ev == "lost" and hold.lost is None:
        hold.lost, hold.lost_reason = t, e.get("reason")
    elif ev == "told" and hold.told is None:
        hold.told = t
        hold.lost_reason = hold.lost_reason or e.get("reason")
