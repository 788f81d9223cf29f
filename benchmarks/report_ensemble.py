# ruff: noqa: RUF001  (the multiplication sign and dashes in strings are meant)
"""Section 7 of ``latest.md``: the delayed ensemble, its floor, and the issue's goals there.

Kept apart from ``report.py`` (the standalone scenarios). ``goals`` returns plain tuples
that ``report.targets`` turns into rows of the targets table, so the two modules do not
import each other.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from benchmarks.stats import fmt, median, paired_ratio

LIBS = ("zklocks", "curator", "kazoo")
DRAIN_LIBS = ("zklocks", "kazoo")
NAME = {"zklocks": "zklocks fair", "curator": "Curator (Java)", "kazoo": "kazoo `Lock`"}


class Goal(NamedTuple):
    name: str
    value: float
    goal: float
    kind: str  # "min" or "max", as report.Target
    unit: str


def _rounds(record: dict[str, Any] | None, key: str) -> list[float]:
    if not record or "error" in record:
        return []
    return [r[key] for r in record.get("rounds", []) if r.get(key) is not None]


def _med(record: dict[str, Any] | None, key: str) -> float:
    values = _rounds(record, key)
    return median(values) if values else math.nan


def _ratio(ours: dict[str, Any] | None, theirs: dict[str, Any] | None, key: str) -> float:
    """Paired per-round ratio, > 1 when zklocks is better (a rate: ours/theirs)."""
    lower_is_better = key in ("median", "handoff_median")
    return paired_ratio(_rounds(ours, key), _rounds(theirs, key), faster_is_lower=lower_is_better)


# Issue 38: a hand-off may cost at most 1.15 times its floor (commit + notification + read).
HANDOFF_GOAL = 1.15
FLOOR_NAME = "the floor (commit + notification + read)"


def floor_parts(at: dict[str, Any]) -> tuple[float, float, float]:
    """(commit + notification, confirming read, their sum) at one RTT, in seconds.

    A hand-off's protocol floor is the holder's delete commit plus the notification's
    half round trip (``handoff``), then the new holder's one confirming read (``rtt``, a
    read served by the watcher's member): docs/locks.md says why that read stays.
    """
    floor = at.get("floor", {})
    notified = float(floor.get("handoff", math.nan))
    read = float(floor.get("rtt", math.nan))
    return notified, read, notified + read


def _floor(at: dict[str, Any]) -> float:
    return floor_parts(at)[2]


def _ms(seconds: float) -> str:
    return fmt(seconds * 1e3)


def _x(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.2f}×"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _error(record: dict[str, Any] | None) -> str | None:
    if record is None:
        return "not run"
    if "error" in record:
        return f"**failed/missing**: {record['error']}"
    return None if record.get("rounds") else "no data"


def goals(results: dict[str, Any]) -> list[Goal]:
    """Issues 28 and 38's goals for the ensemble, at the round-trip times this run measured."""
    ensemble = results.get("ensemble")
    if not ensemble or "error" in ensemble:
        return []
    rtts = ensemble.get("rtts", {})
    out: list[Goal] = []
    for key in ("1", "5"):
        at = rtts.get(key)
        if at and "hot" in at:
            out.append(
                Goal(
                    f"Ensemble, {key} ms RTT: hot-lock hand-off median over {FLOOR_NAME}",
                    _med(at["hot"].get("zklocks"), "handoff_median") / _floor(at),
                    HANDOFF_GOAL,
                    "max",
                    "×",
                )
            )
    at = rtts.get("1")
    if at and "hot" in at:
        hot = at["hot"]
        n = ensemble.get("hot_procs")
        out.append(
            Goal(
                f"Ensemble, 1 ms RTT: hot lock ({n} processes) acquisitions/s vs Curator",
                _ratio(hot.get("zklocks"), hot.get("curator"), "rate"),
                1.5,
                "min",
                "×",
            )
        )
        out.append(
            Goal(
                "Ensemble, 1 ms RTT: hot lock, server requests per acquisition",
                _med(hot.get("zklocks"), "requests"),
                3.5,
                "max",
                "",
            )
        )
    if at and "drain" in at:
        drain = at["drain"]
        out.append(
            Goal(
                f"Ensemble, 1 ms RTT: {ensemble.get('drain_waiters')} waiters, handoffs/s vs kazoo",
                _ratio(drain.get("zklocks"), drain.get("kazoo"), "handoffs_per_s"),
                1.5,
                "min",
                "×",
            )
        )
    return out


def notes(results: dict[str, Any], missed: set[str]) -> list[str]:
    """What bounds each missed ensemble goal, in the run's own figures."""
    out: list[str] = []
    ensemble = results.get("ensemble") or {}
    for goal in goals(results):
        if goal.name not in missed:
            continue
        key = goal.name.split(",")[1].split()[0]  # "Ensemble, 1 ms RTT: ..." -> "1"
        at = ensemble["rtts"][key]
        hot = at.get("hot", {})
        floor = _floor(at)
        ours = _med(hot.get("zklocks"), "handoff_median")
        if "over the floor" in goal.name:
            why = _over_floor(results, at, ours, _med(hot.get("curator"), "handoff_median"))
        elif "vs Curator" in goal.name:
            theirs = _med(hot.get("curator"), "handoff_median")
            why = (
                f"a hot lock's rate is bound by its hand-off: zklocks {_ms(ours)} ms, "
                f"Curator {_ms(theirs)} ms, floor {_ms(floor)} ms"
            )
        elif "requests" in goal.name:
            why = (
                "counted over all three members; the census of which requests they are is "
                "section 2's (the contended path is issue 28, part 2)"
            )
        else:
            drain = at.get("drain", {})
            why = (
                "requests per hand-off: zklocks "
                f"{fmt(_med(drain.get('zklocks'), 'requests_per_handoff'))}, kazoo "
                f"{fmt(_med(drain.get('kazoo'), 'requests_per_handoff'))}; each hand-off "
                f"costs at least the floor, {_ms(floor)} ms"
            )
        out.append(f"- **{goal.name}**: {_x(goal.value) if goal.unit else fmt(goal.value)}; {why}.")
    return out


def _over_floor(results: dict[str, Any], at: dict[str, Any], ours: float, curator: float) -> str:
    """How far a hand-off is above its floor, in ms and in client round trips, beside Curator's."""
    notified, read, floor = floor_parts(at)
    ensemble = results.get("ensemble") or {}
    cores = results.get("meta", {}).get("nproc", "the")
    if math.isnan(curator):
        theirs = "no Curator hand-off was measured at this RTT"
    else:
        theirs = (
            f"Curator's hand-off is {_ms(curator)} ms, {_x(curator / floor)} the same floor "
            f"({_ms(curator - floor)} ms, {(curator - floor) / read:.1f} round trips above it); "
            f"both pay the same load ({ensemble.get('hot_procs')} client processes, the "
            f"members' {ensemble.get('members', 3)} JVMs and the proxy process on {cores} cores)"
        )
    return (
        f"{FLOOR_NAME} is {_ms(floor)} ms: the delete's commit and the notification "
        f"{_ms(notified)} ms, plus one confirming read through a client link {_ms(read)} ms "
        f"(docs/locks.md says why it stays); our hand-off is {_ms(ours)} ms, "
        f"{_ms(ours - floor)} ms above the floor, about {(ours - floor) / read:.1f} client "
        f"round trips, where {HANDOFF_GOAL:g}× leaves {_ms(floor * (HANDOFF_GOAL - 1))} ms; "
        f"{theirs}"
    )


def section(results: dict[str, Any], plotted: bool) -> str:
    title = "## 7. A 3-member ensemble, every link delayed"
    ensemble = results.get("ensemble")
    if not ensemble:
        return f"{title}\n\nNot run."
    if "error" in ensemble:
        return f"{title}\n\n**Failed**: {ensemble['error']}"
    rtts: dict[str, Any] = ensemble["rtts"]
    n = ensemble.get("hot_procs")
    parts = [
        title + "\n\n"
        f"Three members (`ZooKeeperEnsemble`, fsync as above) with every client↔member and "
        f"member↔member link ({ensemble.get('links')} in all) through a proxy that delays "
        "each direction by half the round-trip time (RTT) named, in a process of its own. "
        "Workers are dealt round-robin over the members, so most talk to a follower and "
        "every write crosses two member links each way. *Read*: what a read through a "
        "client link really took (the nominal RTT plus the proxy hop and the member). "
        "**Floor**: raw-socket clients, on the same links in the same run: a holder on one "
        "member deletes its node while a watcher on another (every pair of members in "
        "turn) waits for the notification; from sending the delete to reading the "
        "notification is one delete commit plus the notification's half round trip; the new "
        "holder then sends one confirming read (docs/locks.md says why it stays), so the "
        "floor is that time plus the *read*: the least any hand-off can take. *Delete*: "
        "that delete's own round trip."
    ]
    rows = []
    for key, at in rtts.items():
        floor = at.get("floor", {})
        notified, read, total = floor_parts(at)
        rows.append(
            [
                f"{key} ms",
                _ms(notified),
                _ms(floor.get("handoff_p99", math.nan)),
                _ms(read),
                _ms(total),
                _ms(floor.get("delete", math.nan)),
            ]
        )
    header = [
        "RTT",
        "commit + notification median ms",
        "commit + notification p99 ms",
        "read ms",
        "floor ms (commit + notification + read)",
        "delete ms",
    ]
    parts.append("### Links and the floor\n\n" + _table(header, rows))
    parts.append(_uncontended(rtts))
    parts.append(_hot(rtts, n))
    parts.append(_drain(rtts, ensemble.get("drain_waiters")))
    if plotted:
        parts.append("![hand-off against RTT](ensemble_handoff.png)")
    return "\n\n".join(parts)


def _uncontended(rtts: dict[str, Any]) -> str:
    rows = []
    for key, at in rtts.items():
        u = at.get("uncontended", {})
        row = [f"{key} ms"]
        for lib in LIBS:
            row.append(_error(u.get(lib)) or _ms(_med(u.get(lib), "median")))
        row += [
            fmt(_med(u.get("zklocks"), "requests")),
            _x(_ratio(u.get("zklocks"), u.get("kazoo"), "median")),
            _x(_ratio(u.get("zklocks"), u.get("curator"), "median")),
        ]
        rows.append(row)
    header = [
        "RTT",
        *(f"{NAME[lib]} ms" for lib in LIBS),
        "zklocks requests/cycle",
        "speed-up vs kazoo",
        "speed-up vs Curator",
    ]
    return (
        "### Uncontended acquire + release\n\n"
        "One process; each round on the next member. The median of the rounds' medians; "
        "speed-ups are paired per round.\n\n" + _table(header, rows)
    )


def _hot(rtts: dict[str, Any], n: int | None) -> str:
    header = [
        "RTT",
        "library",
        "acq/s",
        "hand-off median ms",
        "hand-off p99 ms",
        "median over floor",
        "server requests/acq",
        "client CPU/acq µs",
        "ours/theirs",
    ]
    rows = []
    for key, at in rtts.items():
        hot = at.get("hot", {})
        for lib in LIBS:
            record = hot.get(lib)
            error = _error(record)
            if error:
                rows.append([f"{key} ms", NAME[lib], error, "", "", "", "", "", ""])
                continue
            handoff = _med(record, "handoff_median")
            rows.append(
                [
                    f"{key} ms",
                    NAME[lib],
                    fmt(_med(record, "rate")),
                    _ms(handoff),
                    _ms(_med(record, "handoff_p99")),
                    _x(handoff / _floor(at)),
                    fmt(_med(record, "requests")),
                    fmt(_med(record, "cpu_per_acq") * 1e6, 0),
                    "1" if lib == "zklocks" else _x(_ratio(hot.get("zklocks"), record, "rate")),
                ]
            )
    return (
        f"### One hot lock, {n} processes\n\n"
        "As section 2 (each process its own session), the processes spread over the "
        "members. *Median over floor*: the hand-off median ÷ the floor (commit + "
        "notification + read) at that RTT.\n\n" + _table(header, rows)
    )


def _drain(rtts: dict[str, Any], waiters: int | None) -> str:
    header = [
        "RTT",
        *(f"{NAME[lib]} handoffs/s" for lib in DRAIN_LIBS),
        "ours/kazoo",
        *(f"{NAME[lib]} requests/handoff" for lib in DRAIN_LIBS),
    ]
    rows = []
    for key, at in rtts.items():
        drain = at.get("drain", {})
        row = [f"{key} ms"]
        for lib in DRAIN_LIBS:
            row.append(_error(drain.get(lib)) or fmt(_med(drain.get(lib), "handoffs_per_s")))
        row.append(_x(_ratio(drain.get("zklocks"), drain.get("kazoo"), "handoffs_per_s")))
        row += [fmt(_med(drain.get(lib), "requests_per_handoff")) for lib in DRAIN_LIBS]
        rows.append(row)
    return (
        f"### {waiters} waiters drained\n\n"
        "As section 4, the holder and the waiters' processes spread over the members. "
        "No Curator row: its worker offers no thread per waiter.\n\n" + _table(header, rows)
    )


def handoff_series(results: dict[str, Any]) -> dict[str, list[tuple[float, float, float]]]:
    """(RTT ms, hand-off median ms, p99 ms) per library and for the floor, for the plot.

    The floor's line is commit + notification + read; its p99 adds the read's median to
    the commit + notification's p99 (the read has no p99 of its own).
    """
    ensemble = results.get("ensemble") or {}
    series: dict[str, list[tuple[float, float, float]]] = {}
    for key, at in ensemble.get("rtts", {}).items():
        rtt = float(key)
        floor = at.get("floor", {})
        if floor:
            _, read, total = floor_parts(at)
            p99 = floor["handoff_p99"] + read
            series.setdefault("floor", []).append((rtt, total * 1e3, p99 * 1e3))
        for lib in LIBS:
            record = at.get("hot", {}).get(lib)
            value = _med(record, "handoff_median")
            if not math.isnan(value):
                p99 = _med(record, "handoff_p99")
                series.setdefault(lib, []).append((rtt, value * 1e3, p99 * 1e3))
    return series
