"""Judge a history: only what the recorded times prove, never what they suggest.

Each check names the bound it uses and why that bound is the sound one (a violation it
reports is certain, given one clock for every process; it can miss a violation that
happened between two records, never invent one).

**exclusion**: linearizability against the lock model, with leases. The model is a
mutex (one holder), a semaphore (``permits`` holders) or a readers-writer lock (readers
together, a writer alone). A holder enters at its acquire's linearization point, in
``[invoke, ok]``, and leaves at its release's, in ``[release invoke, release end]``, or
when its lease may have ended: a session can expire (and the node go) at any instant
after the last time the lease *said held*. So every acquisition occupies the model at
least during ``[ok, min(release invoke, last held)]``: its grant linearized no later
than its ok (the sound start is the *ok*, not the invoke), and it may have left as soon
as its release was invoked or its lease stopped saying held. These minimal spans are
also enough: placing each grant at its ok and each leave at that end is a valid
linearization whenever the spans never exceed the model's capacity, so a sweep over
them decides linearizability exactly (no search). "Last held" is the time a client read
*before* an observation of ``lease.lost`` returned False (lost is sticky: the lease said
held at that time). The lost-callback's time is *not* a sound end: a client paused past
its session runs the callback only after it resumes, long after another holder took
over (that is the case fencing exists for), so it is reported, not judged. Releases
are always invoked after the last held observation, so the span is ``[ok, last held]``.
Acquisitions that failed claim nothing and are left out (the flow deletes the node on
every way out; leaving them out only makes the model more permissive).

**token order**: fencing tokens only grow. (a) Any two acquisitions X, Y of one lock
path with ``X.ok < Y.invoke`` have ``X.token < Y.token``: X's node was created before
its ok, Y's after its invoke, and the token is the node's creation zxid. (b) For two
acquisitions that exclude each other (any two of a mutex; a writer and anyone on a
read/write lock): ``X.ok < Y.first held`` implies ``X.token < Y.token``. Were Y's node
older, it would have existed from its creation until Y's lease said held, so at X's
grant too, ahead of X in the queue: X could not have been granted. With exclusion
holding, (b) says the tokens grow along the holders in the order they held.

**fencing** (guarded-set): no element from a stale holder, per store. Two writes X, Y
of one store with ``Y.end < X.invoke`` and ``Y.token > X.token``, Y accepted and X
accepted or landed: the store had taken Y's newer token before X's read-modify-write
began, so it had to refuse X. Y counts only when its client saw it accepted (then it
was applied before its end); X also when its element is in the store's final set (it
was applied after its invoke, whatever its client saw).

**set** (guarded-set), against each store's final set, read once every client stopped:
``set-lost``, an element whose write the client saw accepted is missing (a later
read-modify-write wrote back a set read before it); ``set-duplicate``, an element is in
the set twice; ``set-corrupt``, an element in the set that no write of that store
carried, or whose write the store refused (``stale``/``conflict``: nothing applied). A
write with no answer or an unknown outcome may or may not have landed: it is never
counted lost.

**lock-delay** (runs with ``--lock-delay D``, the mutex workloads): after a holder's
node went *abnormally*, a contender that was already queued behind it is granted no
earlier than ``D`` after that. The library's promise (docs/locks.md, "Lock-delay") is
narrower than "no grant within D of a loss": a newcomer whose own first listing came
after the loss waits D from that listing, unless a holder took the loss over meanwhile,
which the history cannot always tell; so newcomers are not judged here (the simulator
judges them), and the rule is applied only where the history proves each premise. X's
loss is abnormal when X's client heard its session expire (``session-lost``) after X's
ok and before X's release was invoked: the server deleted X's node, X did not. That
deletion came after X's last held (the lease's own promise, the bound the exclusion
check uses). Y was queued behind X when Y's token is above X's and Y recorded ``queued``
(its acquire's first listing had come back, the count's baseline) no later than X's last
held: Y listed before the loss, saw it in a later listing, and owes the delay from then
(unless its own session expired while it waited: the acquire then starts over with a new
node, whose first listing is not the one recorded, so such a Y is not judged). So a Y
granted after X's last held with ``Y.ok < X.last held + D`` broke the rule; the true
loss and Y's sight of it were both later, so the bound can miss a violation, never
invent one. Read/write and semaphore runs are not judged: a holder beside us released
cleanly can make up for a loss (a documented limit of the count), which the history
cannot rule out.

The smallest failing window is the shortest span of the history that holds a
violation's evidence: from the earliest record it uses to the latest.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from nemesis.history import History, Hold, Write

MAX_REPORTED = 200  # violations kept per check (the count goes on)


@dataclass(frozen=True)
class Model:
    """Who may hold together: ``mutex``, ``semaphore`` (``permits``) or ``rwlock``."""

    name: str
    permits: int = 1

    def excludes(self, a: Hold, b: Hold) -> bool:
        """Can these two never hold together (whatever else holds)?"""
        if self.name == "rwlock":
            return "write" in (a.kind, b.kind)
        if self.name == "semaphore":
            return self.permits < 2
        return True

    def over_capacity(self, newcomer: Hold, holders: Sequence[Hold]) -> list[Hold] | None:
        """Semaphore: ``permits`` of ``holders`` that, with ``newcomer``, are one too many."""
        if len(holders) + 1 <= self.permits:
            return None
        latest = sorted(holders, key=lambda h: -_end(h))
        return [*latest[: self.permits], newcomer]


def model_for(workload: str, permits: int = 2) -> Model:
    if workload == "semaphore":
        return Model("semaphore", permits)
    if workload == "rwlock":
        return Model("rwlock")
    return Model("mutex")  # lock, guarded-set


@dataclass(frozen=True)
class Violation:
    check: str  # exclusion, token-order, fencing
    message: str
    holds: tuple[Hold, ...] = ()
    writes: tuple[Write, ...] = ()
    start: float = 0.0  # the smallest window of the history that shows it
    end: float = 0.0
    overlap: tuple[float, float] | None = None  # exclusion: when they said held together

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass
class Verdict:
    violations: list[Violation] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)  # violations found, per check

    @property
    def ok(self) -> bool:
        return not self.counts

    def smallest(self) -> Violation | None:
        return min(self.violations, key=lambda v: (v.length, v.start), default=None)

    def add(self, violation: Violation) -> None:
        self.counts[violation.check] += 1
        if self.counts[violation.check] <= MAX_REPORTED:
            self.violations.append(violation)


def check(history: History, model: Model) -> Verdict:
    verdict = Verdict()
    t0 = history.t0
    for violation in (
        *check_exclusion(history.holds, model, t0),
        *check_token_order(history.holds, model, t0),
        *check_fencing(history.writes, t0, history.finals),
        *check_set(history.writes, history.finals, t0),
        *check_lock_delay(history, model),
    ):
        verdict.add(violation)
    return verdict


def _end(hold: Hold) -> float:
    claimed = hold.claimed
    assert claimed is not None
    return claimed[1]


def _rel(history_t0: float, t: float) -> str:
    return f"+{t - history_t0:.3f} s"


# ------------------------------------------------------------------ exclusion


def check_exclusion(holds: Iterable[Hold], model: Model, t0: float = 0.0) -> list[Violation]:
    spans = [(h.claimed, h) for h in holds if h.claimed is not None]
    # A span of no length claims an instant, and two records at one instant prove no
    # overlap: only spans that meet over a stretch of time count. Ends sort before
    # starts at equal times for the same reason.
    points: list[tuple[float, int, int]] = []
    live: list[Hold] = []
    for span, hold in spans:
        if span[1] > span[0]:
            live.append(hold)
            points += [(span[0], 1, len(live) - 1), (span[1], 0, len(live) - 1)]
    points.sort()
    active: dict[int, Hold] = {}
    found: list[Violation] = []
    for _, is_start, i in points:
        if not is_start:
            del active[i]
            continue
        newcomer = live[i]
        if model.name == "semaphore":
            clash = model.over_capacity(newcomer, list(active.values()))
            if clash is not None:
                found.append(_exclusion(clash, model, t0))
        else:
            found += [
                _exclusion([holder, newcomer], model, t0)
                for holder in active.values()
                if model.excludes(holder, newcomer)
            ]
        active[i] = newcomer
    return found


def _exclusion(clash: list[Hold], model: Model, t0: float) -> Violation:
    spans = [h.claimed for h in clash]
    assert all(s is not None for s in spans)
    starts = [s[0] for s in spans if s is not None]
    ends = [s[1] for s in spans if s is not None]
    overlap = (max(starts), min(ends))
    what = {
        "mutex": "one holder",
        "rwlock": "a writer holds alone",
        "semaphore": f"{model.permits} permits",
    }[model.name]
    said = "; ".join(
        f"{h.label} (token {h.token}) granted at {_rel(t0, h.ok or 0)}, "
        f"lease said held until {_rel(t0, _end(h))}"
        for h in clash
    )
    message = (
        f"{len(clash)} leases said held together for {overlap[1] - overlap[0]:.3f} s "
        f"(from {_rel(t0, overlap[0])}), but {what}: {said}"
    )
    return Violation(
        "exclusion",
        message,
        holds=tuple(clash),
        start=min(starts),
        end=overlap[1],
        overlap=overlap,
    )


# ------------------------------------------------------------------ token order


def check_token_order(holds: Iterable[Hold], model: Model, t0: float = 0.0) -> list[Violation]:
    granted = sorted(
        (h for h in holds if h.ok is not None and h.token is not None),
        key=lambda h: h.ok or 0.0,
    )
    found: list[Violation] = []
    # (a) X.ok < Y.invoke  =>  X.token < Y.token, for any two acquisitions of the path.
    by_ok = _PrefixMax(granted)
    for y in granted:
        x = by_ok.highest_before(y.invoke)
        if x is not None and x is not y and (x.token or 0) >= (y.token or 0):
            found.append(
                Violation(
                    "token-order",
                    f"{y.label} asked at {_rel(t0, y.invoke)}, after {x.label} was granted "
                    f"(at {_rel(t0, x.ok or 0)}), yet its token {y.token} is not above "
                    f"{x.token}",
                    holds=(x, y),
                    start=x.ok or 0.0,
                    end=y.ok or 0.0,
                )
            )
    # (b) excluding X, Y: X.ok < Y.first held  =>  X.token < Y.token.
    if model.name == "semaphore" and model.permits > 1:
        return found
    writers = _PrefixMax([h for h in granted if h.kind == "write"])
    for y in granted:
        if y.first_held is None:
            continue
        index = by_ok if model.name == "mutex" or y.kind == "write" else writers
        x = index.highest_before(y.first_held, excluding=y)
        if x is not None and (x.token or 0) >= (y.token or 0):
            found.append(
                Violation(
                    "token-order",
                    f"{x.label} was granted at {_rel(t0, x.ok or 0)}, before {y.label}'s "
                    f"lease said held (at {_rel(t0, y.first_held)}), yet its token "
                    f"{x.token} is not below {y.token}: Y's older node would have "
                    "blocked X's grant",
                    holds=(x, y),
                    start=min(x.ok or 0.0, y.ok or 0.0),
                    end=y.first_held,
                )
            )
    return found


class _PrefixMax:
    """Acquisitions sorted by ok: the one with the highest token among those granted
    before a time (and, for ``excluding``, the runner-up when the best is that one)."""

    def __init__(self, granted: list[Hold]) -> None:
        self._oks = [h.ok or 0.0 for h in granted]
        self._best: list[Hold] = []
        self._second: list[Hold | None] = []
        best: Hold | None = None
        second: Hold | None = None
        for h in granted:
            if best is None or (h.token or 0) > (best.token or 0):
                best, second = h, best
            elif second is None or (h.token or 0) > (second.token or 0):
                second = h
            self._best.append(best)
            self._second.append(second)

    def highest_before(self, t: float, excluding: Hold | None = None) -> Hold | None:
        i = bisect.bisect_left(self._oks, t)  # strictly before t
        if i == 0:
            return None
        best = self._best[i - 1]
        return self._second[i - 1] if best is excluding else best


# ------------------------------------------------------------------ fencing


def _by_store(writes: Iterable[Write]) -> dict[str, list[Write]]:
    stores: dict[str, list[Write]] = {}
    for w in writes:
        stores.setdefault(w.store, []).append(w)
    return stores


def check_fencing(
    writes: Iterable[Write], t0: float = 0.0, finals: dict[str, list[str]] | None = None
) -> list[Violation]:
    found: list[Violation] = []
    for store, of_store in sorted(_by_store(writes).items()):
        landed = set((finals or {}).get(store, ()))
        found += _stale_writes(of_store, landed, t0)
    return found


def _stale_writes(writes: list[Write], landed: set[str], t0: float) -> list[Violation]:
    accepted = sorted(
        (w for w in writes if w.accepted and w.end is not None), key=lambda w: w.end or 0.0
    )
    ends = [w.end or 0.0 for w in accepted]
    best: list[Write] = []
    for w in accepted:
        best.append(w if not best or w.token > best[-1].token else best[-1])
    found: list[Violation] = []
    for x in writes:
        took = "accepted" if x.accepted else "landed" if x.element in landed else None
        if took is None:
            continue
        i = bisect.bisect_left(ends, x.invoke)
        if i == 0:
            continue
        y = best[i - 1]
        if y.token > x.token:
            found.append(
                Violation(
                    "fencing",
                    f"{x.label} with token {x.token} was {took} (asked at "
                    f"{_rel(t0, x.invoke)}) after {y.label} with the newer token "
                    f"{y.token} had been (at {_rel(t0, y.end or 0)}): a stale holder's write",
                    writes=(y, x),
                    start=y.invoke,
                    end=x.end or x.invoke,
                )
            )
    return found


def check_set(
    writes: Iterable[Write], finals: dict[str, list[str]], t0: float = 0.0
) -> list[Violation]:
    """Lost, duplicated and corrupt elements of each store's final set."""
    found: list[Violation] = []
    by_store = _by_store(writes)
    for store, final in sorted(finals.items()):
        of_store = by_store.get(store, [])
        carried = {w.element: w for w in of_store if w.element is not None}
        counts = Counter(final)
        for x in of_store:
            if x.accepted and x.element not in counts:
                found.append(
                    Violation(
                        "set-lost",
                        f"{x.label} added {x.element} and was accepted (at "
                        f"{_rel(t0, x.end or 0)}), yet {store}'s final set lacks it",
                        writes=(x,),
                        start=x.invoke,
                        end=x.end or x.invoke,
                    )
                )
        for element, count in sorted(counts.items()):
            w = carried.get(element)
            if count > 1:
                what, message = "set-duplicate", f"{element} is {count} times in {store}'s set"
            elif w is None:
                what = "set-corrupt"
                message = f"{store}'s set has {element!r}, which no write carried"
            elif w.refused:
                what, message = (
                    "set-corrupt",
                    f"{store}'s set has {element}, whose write {w.label} was refused ({w.error})",
                )
            else:
                continue
            at = w.invoke if w is not None else t0
            found.append(
                Violation(
                    what,
                    message,
                    writes=(w,) if w is not None else (),
                    start=at,
                    end=(w.end or at) if w is not None else at,
                )
            )
    return found


# ------------------------------------------------------------------ lock-delay


def abnormal_losses(history: History) -> list[Hold]:
    """Holds whose node the server deleted: the client heard its session expire after the
    grant and before the release was invoked."""
    lost: list[Hold] = []
    for x in history.holds:
        if x.ok is None or x.last_held is None:
            continue
        before = x.release_invoke if x.release_invoke is not None else float("inf")
        if any(x.ok < e < before for e in history.session_losses.get(x.client, ())):
            lost.append(x)
    return lost


def lock_delay_cases(history: History, model: Model) -> list[tuple[Hold, Hold]]:
    """Every (X lost abnormally, Y queued behind it before the loss, granted after) pair
    the rule applies to; none unless the run had a lock-delay and a mutex model."""
    delay = history.params.get("lock_delay")
    if not delay or model.name != "mutex":
        return []
    granted = [
        h
        for h in history.holds
        if h.ok is not None
        and h.queued is not None
        and not any(
            (h.queued or 0.0) <= e <= (h.ok or 0.0)
            for e in history.session_losses.get(h.client, ())
        )
    ]
    return [
        (x, y)
        for x in abnormal_losses(history)
        for y in granted
        if y.client != x.client
        and (y.token or 0) > (x.token or 0)
        and (y.queued or 0.0) <= (x.last_held or 0.0) < (y.ok or 0.0)
    ]


def check_lock_delay(history: History, model: Model) -> list[Violation]:
    delay = float(history.params.get("lock_delay") or 0.0)
    t0 = history.t0
    found: list[Violation] = []
    for x, y in lock_delay_cases(history, model):
        assert x.last_held is not None and y.ok is not None and y.queued is not None
        if y.ok < x.last_held + delay:
            found.append(
                Violation(
                    "lock-delay",
                    f"{y.label} (token {y.token}), queued at {_rel(t0, y.queued)}, was "
                    f"granted at {_rel(t0, y.ok)}, {y.ok - x.last_held:.3f} s after "
                    f"{x.label} (token {x.token}) last said held and then lost its "
                    f"session: the lock-delay is {delay:g} s",
                    holds=(x, y),
                    start=min(y.queued, x.ok or y.queued),
                    end=y.ok,
                )
            )
    return found
