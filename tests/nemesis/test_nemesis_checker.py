"""The nemesis checker on histories written by hand: what it must flag, and what it must
not (each bound's soundness case), plus ``python -m nemesis check`` on a recorded run.

No ZooKeeper here; the runs on a real ensemble are in test_nemesis.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nemesis.__main__ import main
from nemesis.checker import Model, check, model_for
from nemesis.faults import Live
from nemesis.history import Event, History, parse

T0 = 1000.0
MUTEX = Model("mutex")


def acquisition(
    c: int,
    n: int,
    *,
    invoke: float,
    ok: float | None = None,
    fail: float | None = None,
    held: tuple[float, ...] = (),
    lost: float | None = None,
    told: float | None = None,
    release: float | None = None,
    kind: str = "lock",
    token: int | None = None,
) -> list[Event]:
    """One acquisition's events (times in seconds after T0)."""
    events: list[Event] = [
        {"c": c, "ev": "invoke", "op": "acquire", "n": n, "kind": kind, "t": T0 + invoke}
    ]
    if ok is not None:
        tok = token if token is not None else int(ok * 1000)
        events.append({"c": c, "ev": "ok", "op": "acquire", "n": n, "t": T0 + ok, "token": tok})
    if fail is not None:
        events.append({"c": c, "ev": "fail", "op": "acquire", "n": n, "t": T0 + fail})
    events += [{"c": c, "ev": "held", "n": n, "t": T0 + t} for t in held]
    if lost is not None:
        events.append({"c": c, "ev": "lost", "n": n, "t": T0 + lost, "reason": "no answer"})
    if told is not None:
        events.append({"c": c, "ev": "told", "n": n, "t": T0 + told, "reason": "no answer"})
    if release is not None:
        events.append({"c": c, "ev": "invoke", "op": "release", "n": n, "t": T0 + release})
        events.append({"c": c, "ev": "ok", "op": "release", "n": n, "t": T0 + release + 0.01})
    return events


def history(*acquisitions: list[Event], extra: tuple[Event, ...] = ()) -> History:
    start: Event = {"c": "runner", "ev": "start", "t": T0, "params": {"session_timeout": 4.0}}
    events = [start, *(e for a in acquisitions for e in a), *extra]
    return parse(sorted(events, key=lambda e: float(e["t"])))


def checks(h: History, model: Model = MUTEX) -> dict[str, int]:
    return dict(check(h, model).counts)


# ------------------------------------------------------------------ exclusion


def test_holders_one_after_the_other_are_clean() -> None:
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 1.0), release=1.0, token=10),
        acquisition(1, 1, invoke=0.5, ok=1.05, held=(1.05, 2.0), release=2.0, token=11),
    )
    assert checks(h) == {}


def test_two_leases_saying_held_at_once_are_a_violation_with_their_overlap() -> None:
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 3.0), release=3.0, token=10),
        acquisition(1, 1, invoke=0.5, ok=2.0, held=(2.0, 2.5), release=2.6, token=11),
    )
    verdict = check(h, MUTEX)
    assert dict(verdict.counts) == {"exclusion": 1}
    violation = verdict.smallest()
    assert violation is not None and violation.overlap is not None
    assert violation.overlap == (T0 + 2.0, T0 + 2.5)
    assert (violation.start, violation.end) == (T0 + 0.1, T0 + 2.5)
    assert [x.client for x in violation.holds] == [0, 1]


def test_a_holder_counts_until_its_last_held_look_not_its_lost_callback() -> None:
    # c0 was paused past its session: it looked last at 1.0 (held), the lost-callback and
    # the release came only after it resumed at 9.0. c1 was granted at 6.0 meanwhile.
    # The callback's time is late, not a claim: no violation.
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 1.0), lost=9, told=9, release=9.1, token=5),
        acquisition(1, 1, invoke=0.5, ok=6.0, held=(6.0, 7.0), release=7.0, token=99),
    )
    assert checks(h) == {}


def test_a_grant_counts_from_its_ok_not_its_invoke() -> None:
    # c1 asked while c0 held; its grant came after c0's last held look.
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 2.0), release=2.0, token=10),
        acquisition(1, 1, invoke=0.2, ok=2.1, held=(2.1, 3.0), release=3.0, token=11),
    )
    assert checks(h) == {}


def test_failed_acquires_and_leases_that_never_said_held_claim_nothing() -> None:
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 3.0), release=3.0, token=10),
        acquisition(1, 1, invoke=0.2, fail=2.5),
        acquisition(2, 1, invoke=0.3, ok=1.0, lost=1.0, release=1.1, token=12),
    )
    assert checks(h) == {}


def test_spans_that_only_touch_are_not_an_overlap() -> None:
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 1.0), release=1.0, token=10),
        acquisition(1, 1, invoke=0.5, ok=1.0, held=(1.0, 2.0), release=2.0, token=11),
    )
    assert checks(h) == {}


def test_readers_share_and_a_writer_excludes_everyone() -> None:
    rw = Model("rwlock")
    readers = (
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 2.0), kind="read", token=10),
        acquisition(1, 1, invoke=0, ok=0.2, held=(0.2, 2.0), kind="read", token=11),
    )
    assert checks(history(*readers), rw) == {}
    writer = acquisition(2, 1, invoke=0, ok=1.0, held=(1.0, 1.5), kind="write", token=12)
    assert checks(history(*readers, writer), rw) == {"exclusion": 2}
    writers = (
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 2.0), kind="write", token=10),
        acquisition(1, 1, invoke=0, ok=1.0, held=(1.0, 1.5), kind="write", token=11),
    )
    assert checks(history(*writers), rw) == {"exclusion": 1}


def test_a_semaphore_allows_its_permits_and_no_more() -> None:
    two = Model("semaphore", 2)
    holders = [
        acquisition(c, 1, invoke=0, ok=0.1 * (c + 1), held=(0.1 * (c + 1), 2.0), token=10 + c)
        for c in range(3)
    ]
    assert checks(history(*holders[:2]), two) == {}
    verdict = check(history(*holders), two)
    assert dict(verdict.counts) == {"exclusion": 1}
    assert len(verdict.violations[0].holds) == 3


# ------------------------------------------------------------------ token order


def test_a_later_acquisition_with_a_lower_token_is_a_violation() -> None:
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 1.0), release=1.0, token=20),
        acquisition(1, 1, invoke=1.5, ok=1.6, held=(1.6, 2.0), release=2.0, token=15),
    )
    assert checks(h) == {"token-order": 2}  # both (a) and (b) see it


def test_concurrent_asks_may_be_granted_in_either_token_order_on_a_semaphore() -> None:
    # c1 asked before c0's grant: creation order is unknown, and on a semaphore two
    # holders need not exclude each other.
    h = history(
        acquisition(0, 1, invoke=0, ok=1.0, held=(1.0, 2.0), token=20),
        acquisition(1, 1, invoke=0.5, ok=1.5, held=(1.5, 2.5), token=15),
    )
    assert checks(h, Model("semaphore", 2)) == {}


def test_a_holder_after_an_excluding_one_has_the_higher_token() -> None:
    # (b): c1 asked before c0's grant, but its lease said held only after c0's grant;
    # had its node been older it would have blocked c0.
    h = history(
        acquisition(0, 1, invoke=0.5, ok=1.0, held=(1.0, 2.0), release=2.0, token=20),
        acquisition(1, 1, invoke=0.0, ok=2.5, held=(2.5, 3.0), release=3.0, token=15),
    )
    assert checks(h) == {"token-order": 1}
    assert checks(h, Model("semaphore", 2)) == {}
    reads = Model("rwlock")
    for a in h.holds:
        a.kind = "read"
    assert checks(h, reads) == {}


# ------------------------------------------------------------------ fencing


def write(
    c: int,
    n: int,
    w: int,
    token: int,
    invoke: float,
    end: float | None,
    ok: bool,
    *,
    store: str = "zk",
    error: str = "stale: highest 99",
) -> list[Event]:
    base = {"c": c, "op": "write", "n": n, "w": w, "store": store}
    element = f"{token}:c{c}:{w}"
    events = [{**base, "ev": "invoke", "t": T0 + invoke, "token": token, "element": element}]
    if end is not None:
        outcome = {"ev": "ok"} if ok else {"ev": "fail", "error": error}
        events.append({**base, **outcome, "t": T0 + end})
    return events


def holders(count: int) -> list[list[Event]]:
    """Acquisition 1 of clients 0 .. count - 1 (writes are recorded under one)."""
    return [acquisition(c, 1, invoke=0, ok=0.1 * c + 0.1, token=c + 1) for c in range(count)]


def final(store: str, *elements: str, t: float = 100.0) -> Event:
    return {"c": "runner", "ev": "final", "t": T0 + t, "store": store, "elements": list(elements)}


def test_an_accepted_write_with_a_token_already_beaten_is_a_stale_write() -> None:
    holds = (
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1,), token=10),
        acquisition(1, 1, invoke=0, ok=5.0, held=(5.0,), token=20),
    )
    newer = write(1, 1, 1, 20, 5.1, 5.2, ok=True)
    assert checks(history(*holds, extra=(*newer, *write(0, 1, 1, 10, 6.0, 6.1, ok=False)))) == {}
    verdict = check(history(*holds, extra=(*newer, *write(0, 1, 1, 10, 6.0, 6.1, ok=True))), MUTEX)
    assert dict(verdict.counts) == {"fencing": 1}
    assert [w.token for w in verdict.violations[0].writes] == [20, 10]
    # overlapping writes: the register may have taken the older one first
    assert checks(history(*holds, extra=(*newer, *write(0, 1, 1, 10, 5.15, 5.3, ok=True)))) == {}


def test_the_stale_check_is_per_store_and_counts_an_element_that_landed_unanswered() -> None:
    newer = write(1, 1, 1, 20, 5.1, 5.2, ok=True, store="pg")
    # the newer token went to pg only: redis may take the older one after it
    older_redis = write(0, 1, 1, 10, 6.0, 6.1, ok=True, store="redis")
    assert checks(history(*holders(5), extra=(*newer, *older_redis))) == {}
    # an older write in pg with no answer: nothing, unless its element is in the set
    unanswered = write(0, 1, 1, 10, 6.0, None, ok=False, store="pg")
    assert checks(history(*holders(5), extra=(*newer, *unanswered))) == {}
    landed = (*newer, *unanswered, final("pg", "20:c1:1", "10:c0:1"))
    assert checks(history(*holders(5), extra=landed)) == {"fencing": 1}


def test_an_accepted_element_missing_from_the_final_set_is_lost() -> None:
    a = write(0, 1, 1, 10, 1.0, 1.2, ok=True)
    b = write(1, 1, 1, 20, 5.0, 5.2, ok=True)
    assert checks(history(*holders(5), extra=(*a, *b, final("zk", "10:c0:1", "20:c1:1")))) == {}
    verdict = check(history(*holders(5), extra=(*a, *b, final("zk", "20:c1:1"))), MUTEX)
    assert dict(verdict.counts) == {"set-lost": 1}
    assert [w.element for w in verdict.violations[0].writes] == ["10:c0:1"]
    # refused, unanswered and unknown writes claim nothing: never lost
    refused = write(2, 1, 1, 5, 6.0, 6.1, ok=False)
    unknown = write(3, 1, 1, 30, 7.0, 7.1, ok=False, error="unknown: ConnectionLoss")
    unanswered = write(4, 1, 1, 40, 8.0, None, ok=False)
    rest = (*refused, *unknown, *unanswered)
    assert (
        checks(history(*holders(5), extra=(*a, *b, *rest, final("zk", "10:c0:1", "20:c1:1")))) == {}
    )
    # no final set read: nothing judged (the runner makes that a failed run)
    assert checks(history(*holders(5), extra=(*a, *b))) == {}


def test_duplicated_unknown_and_refused_elements_in_a_set_are_violations() -> None:
    a = write(0, 1, 1, 10, 1.0, 1.2, ok=True)
    refused = write(1, 1, 1, 20, 5.0, 5.2, ok=False, error="conflict: BadVersion")
    unknown = write(2, 1, 1, 30, 6.0, 6.2, ok=False, error="unknown: ConnectionLoss")
    events = (*a, *refused, *unknown)
    assert checks(history(*holders(5), extra=(*events, final("zk", "10:c0:1", "30:c2:1")))) == {}
    assert checks(history(*holders(5), extra=(*events, final("zk", "10:c0:1", "10:c0:1")))) == {
        "set-duplicate": 1
    }
    assert checks(history(*holders(5), extra=(*events, final("zk", "10:c0:1", "20:c1:1")))) == {
        "set-corrupt": 1
    }
    assert checks(history(*holders(5), extra=(*events, final("zk", "10:c0:1", "nobody")))) == {
        "set-corrupt": 1
    }


# ------------------------------------------------------------------ the rest


def test_the_smallest_failing_window_is_the_shortest_violation() -> None:
    h = history(
        acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 3.0), release=3.0, token=10),
        acquisition(1, 1, invoke=0.5, ok=2.0, held=(2.0, 2.5), release=2.6, token=11),
        acquisition(2, 1, invoke=5.0, ok=5.1, held=(5.1, 5.6), release=5.6, token=30),
        acquisition(3, 1, invoke=5.2, ok=5.3, held=(5.3, 5.4), release=5.4, token=31),
    )
    smallest = check(h, MUTEX).smallest()
    assert smallest is not None
    assert {x.client for x in smallest.holds} == {2, 3}


def test_models_per_workload() -> None:
    assert model_for("lock") == model_for("guarded-set") == Model("mutex")
    assert model_for("semaphore", 3) == Model("semaphore", 3)
    assert model_for("rwlock") == Model("rwlock")


def test_live_holders_follow_the_events() -> None:
    live = Live()
    live.observe({"c": 0, "ev": "client-start", "t": 0.0, "pid": 42, "home": 2})
    live.observe({"c": 0, "ev": "invoke", "op": "acquire", "n": 1, "t": 1.0, "hold": 8.0})
    assert live.holders == {}
    live.observe({"c": 0, "ev": "ok", "op": "acquire", "n": 1, "t": 2.0})
    assert live.wait_for(lambda: live.holders.get(0), timeout=0) is not None
    assert (live.holders[0].ok, live.holders[0].planned, live.homes[0]) == (2.0, 8.0, 2)
    live.observe({"c": 0, "ev": "invoke", "op": "release", "n": 1, "t": 3.0})
    assert live.holders == {}


def _record(directory: Path, *acquisitions: list[Event]) -> None:
    start: Event = {
        "c": "runner",
        "ev": "start",
        "t": T0,
        "params": {"workload": "lock", "session_timeout": 4.0, "seed": 7, "out": "x"},
    }
    client: Event = {"c": 0, "ev": "client-start", "t": T0, "pid": 1, "home": 1}
    fault: list[Any] = [
        {"c": "nemesis", "ev": "fault", "t": T0 + 0.2, "id": 1, "kind": "kill-leader",
         "target": "m1", "detail": "down"},
        {"c": "nemesis", "ev": "healed", "t": T0 + 0.9, "id": 1},
    ]  # fmt: skip
    events = [start, client, *fault, *(e for a in acquisitions for e in a)]
    lines = "".join(json.dumps(e) + "\n" for e in events) + '{"torn'
    (directory / "history.jsonl").write_text(lines)


def test_check_command_rejudges_a_recorded_run(tmp_path: Path) -> None:
    clean, bad = tmp_path / "clean", tmp_path / "bad"
    clean.mkdir()
    bad.mkdir()
    first = acquisition(0, 1, invoke=0, ok=0.1, held=(0.1, 3.0), release=3.0, token=10)
    _record(clean, first)
    _record(bad, first, acquisition(1, 1, invoke=0.5, ok=2.0, held=(2.0, 2.5), token=11))
    assert main(["check", str(clean)]) == 0
    assert not (clean / "window.png").exists()
    assert main(["check", str(bad)]) == 1
    summary = json.loads((bad / "summary.json").read_text())
    assert summary["verdict"] == "violation"
    assert summary["violations"] == {"exclusion": 1}
    assert summary["smallest"]["holds"] == ["c0#1 lock", "c1#1 lock"]
    report = (bad / "report.md").read_text()
    assert "## The smallest failing window" in report and "kill-leader" in report
    for png in ("timeline.png", "window.png"):
        assert (bad / png).read_bytes()[:4] == b"\x89PNG"
