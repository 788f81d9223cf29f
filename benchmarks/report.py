# ruff: noqa: RUF001  (the multiplication sign and dashes in strings are meant)
"""Turn a run's figures into ``latest.md`` (tables, targets, notes) and PNG plots."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from benchmarks import report_ensemble
from benchmarks.scenarios import HERD_DESIGNS, UNCONTENDED_LIBS, uncontended_summary
from benchmarks.stats import fmt, median, ms, paired_ratio, us

FLOOR_OF = {
    # zklocks' release is a multi (delete + setData on the directory: lock-delay's mark)
    "zklocks": "fair, marked: create+getChildren2 | multi(delete+setData) (3 req, 2 RT)",
    "zklocks-unfair": "unfair: create | delete (2 req, 2 RT)",
    "kazoo": "kazoo-like: exists | create | getChildren | delete (4 req, 4 RT)",
}
LABEL = {
    "zklocks": "zklocks fair",
    "zklocks-unfair": "zklocks `fair=False`",
    "kazoo": "kazoo `Lock`",
    "tooz": "tooz (ZooKeeper driver)",
    "redis": "redis-py `Lock`",
    "curator": "Curator `InterProcessMutex` (Java)",
}
KIND_LABEL = {
    ("kazoo", "rw"): "kazoo `ReadLock`/`WriteLock`",
    ("kazoo", "sem"): "kazoo `Semaphore`",
    ("zklocks", "rw"): "zklocks `read_write_lock`",
    ("zklocks", "sem"): "zklocks `semaphore`",
}

HERD_LABEL = {
    "zklocks": "zklocks fair lock",
    "kazoo": "kazoo Lock",
    "one-node": "naive: everyone watches one node (seed 000)",
    "child-list": "naive: everyone watches the child list (seed 002)",
}


def _num(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:.1f}"


def _x(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.2f}×"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _rounds(record: dict[str, Any] | None, key: str) -> list[float]:
    if not record:
        return []
    return [r[key] for r in record.get("rounds", []) if r.get(key) is not None]


def _med(record: dict[str, Any] | None, key: str) -> float:
    values = _rounds(record, key)
    return median(values) if values else math.nan


def _status(record: dict[str, Any] | None) -> str | None:
    if record is None:
        return "not run"
    if "error" in record:
        return f"**failed/missing**: {record['error']}"
    if not record.get("rounds") and "points" not in record:
        return "no data"
    return None


class Target:
    def __init__(self, name: str, value: float, goal: float, *, kind: str, unit: str = "") -> None:
        self.name, self.value, self.goal, self.kind, self.unit = name, value, goal, kind, unit

    @property
    def met(self) -> bool | None:
        if self.value is None or math.isnan(self.value):
            return None
        if self.kind == "min":
            return self.value >= self.goal
        if self.kind == "max":
            return self.value <= self.goal + 1e-9
        return abs(self.value - self.goal) < 0.05  # "eq"

    def shown(self, value: float) -> str:
        if self.unit == "×":
            return _x(value)
        if self.unit == "µs":
            return f"{value:.0f} µs"
        return fmt(value)

    def verdict(self) -> str:
        met = self.met
        if met is None:
            return "not measured"
        if met:
            return "met"
        if self.kind == "min" and self.goal:
            return f"missed by {(1 - self.value / self.goal) * 100:.0f}%"
        if self.kind == "max" and self.goal:
            return f"missed: {(self.value / self.goal - 1) * 100:.0f}% over"
        return f"missed: {self.shown(self.value)} instead of {self.shown(self.goal)}"

    def row(self) -> list[str]:
        sign = {"min": "≥ ", "max": "≤ ", "eq": "= "}[self.kind]
        return [self.name, self.shown(self.value), sign + self.shown(self.goal), self.verdict()]


# -- the figures each section needs ------------------------------------------------------


def _uncontended(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for lib, record in results.get("uncontended", {}).items():
        if isinstance(record, dict) and record.get("rounds"):
            out[lib] = {**uncontended_summary(record), "rt": record.get("round_trips", {})}
    return out


def _speedup(results: dict[str, Any], ours: str, theirs: str = "kazoo") -> float:
    u = results.get("uncontended", {})
    a = [r["median"] for r in u.get(ours, {}).get("rounds", [])]
    b = [r["median"] for r in u.get(theirs, {}).get("rounds", [])]
    if "error" in u.get(ours, {}) or "error" in u.get(theirs, {}):
        return math.nan
    return paired_ratio(a, b, faster_is_lower=True)


def _rate_ratio(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str = "rate") -> float:
    if not a or not b or "error" in a or "error" in b:
        return math.nan
    return paired_ratio(_rounds(a, key), _rounds(b, key), faster_is_lower=False)


# issue 14: half the client CPU per hot-lock acquisition measured before the sync path
# lost its thread hop (1,124 µs)
HOT_CPU_GOAL_US = 562
# Issue 28: a thread pays a wake-up per reply that an asyncio task does not.
MANY_CPU_GOAL_US = {"threads": 100, "asyncio": 70}
# kazoo's threads row when those goals were set; a slower host raises every row alike, so
# the goals also read as a share of kazoo's CPU per request in the same run
MANY_CPU_KAZOO_WHEN_SET_US = 332
# the one-node cycle: create | getChildren in one round trip (the listing refuses a path
# where fair contenders queue, issue 11), then delete
UNFAIR_REQUESTS = 3


def targets(results: dict[str, Any]) -> list[Target]:
    t: list[Target] = []
    u = _uncontended(results)
    if u:
        fair = u.get("zklocks", {})
        unfair = u.get("zklocks-unfair", {})
        t.append(
            Target(
                "Uncontended fair: server requests per cycle",
                fair.get("requests", math.nan),
                3,
                kind="max",
            )
        )
        t.append(
            Target(
                "Uncontended fair: round trips per cycle",
                round(fair.get("rt", {}).get("round_trips", math.nan))
                if fair.get("rt")
                else math.nan,
                2,
                kind="max",
            )
        )
        t.append(
            Target(
                "Uncontended fair: median speed-up vs kazoo",
                _speedup(results, "zklocks"),
                2.2,
                kind="min",
                unit="×",
            )
        )
        t.append(
            Target(
                "Uncontended fair: median speed-up vs Curator (Java)",
                _speedup(results, "zklocks", "curator"),
                1.2,
                kind="min",
                unit="×",
            )
        )
        t.append(
            Target(
                "Uncontended `fair=False`: server requests per cycle",
                unfair.get("requests", math.nan),
                UNFAIR_REQUESTS,
                kind="max",
            )
        )
        t.append(
            Target(
                "Uncontended `fair=False`: median speed-up vs kazoo",
                _speedup(results, "zklocks-unfair"),
                2.5,
                kind="min",
                unit="×",
            )
        )
    floor = breakdown(results).get("zklocks")
    if floor:
        t.append(
            Target(
                "Uncontended fair (sync): cycle over the wire floor (profile run)",
                floor["cycle"] / floor["floor"],
                1.25,
                kind="max",
                unit="×",
            )
        )
    hot8 = results.get("hot", {}).get("8")
    if hot8:
        ours = hot8.get("zklocks")
        t.append(
            Target(
                "Hot lock, 8 processes: acquisitions/s vs kazoo",
                _rate_ratio(ours, hot8.get("kazoo")),
                2.0,
                kind="min",
                unit="×",
            )
        )
        t.append(
            Target(
                "Hot lock, 8 processes: server requests per acquisition",
                _med(ours, "requests"),
                3.5,
                kind="max",
            )
        )
        t.append(
            Target(
                "Hot lock, 8 processes: client CPU per acquisition",
                _med(ours, "cpu_per_acq") * 1e6,
                HOT_CPU_GOAL_US,
                kind="max",
                unit="µs",
            )
        )
        t.append(
            Target(
                "Hot lock, 8 processes: per-process min/max (FIFO)",
                _med(ours, "fairness"),
                0.95,
                kind="min",
            )
        )
    drain = results.get("drain")
    if drain:
        t.append(
            Target(
                f"{_drain_n(results)} waiters: handoffs/s vs kazoo",
                _rate_ratio(drain.get("zklocks"), drain.get("kazoo"), "handoffs_per_s"),
                1.5,
                kind="min",
                unit="×",
            )
        )
    herd = results.get("herd", {}).get("zklocks", {}).get("points", {})
    if herd:
        worst = max(
            (p.get("wakeups", math.nan) for p in herd.values() if "error" not in p),
            default=math.nan,
        )
        t.append(Target("Wake-ups per release, worst queue length (zklocks)", worst, 1, kind="eq"))
    many = results.get("many")
    if many and "error" not in many:
        for style in ("threads", "asyncio"):
            ours = many.get(f"zklocks {style}")
            if not ours or "error" in ours:
                continue
            t.append(
                Target(
                    f"Many locks, one process ({style}): cycles/s vs kazoo threads",
                    _rate_ratio(ours, many.get("kazoo threads")),
                    4.0,
                    kind="min",
                    unit="×",
                )
            )
            t.append(
                Target(
                    f"Many locks, one process ({style}): client CPU per request",
                    _med(ours, "cpu_per_request") * 1e6,
                    MANY_CPU_GOAL_US[style],
                    kind="max",
                    unit="µs",
                )
            )
    sem = results.get("semaphore")
    if sem:
        n = results["meta"]["params"]["mix_procs"]
        t.append(
            Target(
                f"Semaphore (3 permits), {n} processes: acq/s vs kazoo",
                _rate_ratio(sem.get("zklocks"), sem.get("kazoo")),
                3.0,
                kind="min",
                unit="×",
            )
        )
    for goal in report_ensemble.goals(results):
        t.append(Target(goal.name, goal.value, goal.goal, kind=goal.kind, unit=goal.unit))
    return t


def _drain_n(results: dict[str, Any]) -> int:
    return int(results["meta"]["params"]["drain_waiters"])


# -- sections ---------------------------------------------------------------------------------


def _header(results: dict[str, Any]) -> str:
    m = results["meta"]
    v = m["versions"]
    load0, load1 = m["loadavg_start"][0], m.get("loadavg_end", [math.nan])[0]
    fsync = (
        "**on** (`forceSync=yes`: ZooKeeper fsyncs its log before answering a write)"
        if m["force_sync"]
        else "**off** (`forceSync=no`: not for quoting)"
    )
    lines = [
        "# zklocks benchmarks: latest run",
        "",
        f"- Run: {m['started']}, mode `{m['mode']}`, {m.get('seconds', 0):.0f} s; scenarios: "
        f"{', '.join(m['scenarios'])}.",
        f"- Machine: {m['nproc']} cores (nproc), {m['cpu'] or 'unknown CPU'}, {m['memory_gib']} "
        f"GiB, Linux {m['kernel']}; "
        f"load average {load0:.2f} at start, {load1:.2f} at end. The machine is shared with other "
        "work, "
        "so absolute numbers are noisy: compare the ratios, which come from rounds run back to "
        "back.",
        f"- ZooKeeper: {m.get('zookeeper', '?')}, standalone on loopback, fsync {fsync}, tickTime "
        "2000 ms, "
        "30 s sessions for every client"
        + (
            "; section 7 alone runs on a 3-member ensemble behind delayed links."
            if "ensemble" in results
            else "."
        ),
        f"- Clients: Python {m['python']}; zklocks {v['zklocks']} (transport "
        f"`{_transport(results)}`), kazoo {v['kazoo']}, "
        f"tooz {v['tooz']}, redis-py {v['redis']}, {_curator_version(m)}; redis-server "
        f"{m.get('redis_server', 'not running')} "
        "(no persistence: `--save '' --appendonly no`, so no fsync on the Redis row).",
        "- Method: libraries alternate round by round (A B, then B A); figures are medians over "
        "rounds; "
        "a ratio is the median of the per-round ratios (> 1: zklocks better). Server requests are "
        "the "
        "delta of ZooKeeper's `mntr` `zk_packets_received` (our own `mntr` reads subtracted), or "
        "Redis's "
        "`commandstats` (less the GET/DEL redis-py's release script runs inside the server). "
        "Round trips "
        "come from a proxy that delays every client write by a fixed time.",
    ]
    return "\n".join(lines)


def _curator_version(meta: dict[str, Any]) -> str:
    c = meta.get("curator")
    if not c:
        return "Curator not run"
    return (
        f"Apache Curator {c.get('curator', '?')} (Java {c.get('java', '?')}, ZooKeeper client "
        f"{c.get('zookeeper', '?')}, {c.get('jvm_warmup', '?')} warm-up cycles per JVM)"
    )


def _transport(results: dict[str, Any]) -> str:
    for lib in ("zklocks", "zklocks-unfair"):
        t = results.get("uncontended", {}).get(lib, {}).get("transport")
        if t:
            return str(t)
    return str(results.get("profile", {}).get("transport", "?"))


def _section_uncontended(results: dict[str, Any]) -> str:
    failed = _failed(results, "uncontended", "## 1. Uncontended acquire + release")
    if failed:
        return failed
    u = _uncontended(results)
    rows = []
    for lib in UNCONTENDED_LIBS:
        record = results["uncontended"].get(lib, {})
        status = _status(record)
        if status:
            rows.append([LABEL[lib], status, "", "", "", "", "", "", "", ""])
            continue
        s = u[lib]
        rt = s["rt"]
        ops = ", ".join(
            f"{name} {n:g}" for name, n in sorted(rt.get("ops", {}).items(), key=lambda kv: -kv[1])
        )
        spread = f"{ms(min(s['round_medians']))}–{ms(max(s['round_medians']))}"
        rows.append(
            [
                LABEL[lib],
                ms(s["median"]),
                ms(s["p99"]),
                spread,
                fmt(s["requests"]),
                ops or ("(RESP, not parsed)" if lib == "redis" else "–"),
                f"{rt['round_trips']:.2f}" if rt else "–",
                us(s["cpu"]),
                _x(_speedup(results, lib, "kazoo")) if lib != "kazoo" else "1",
                _x(_speedup(results, lib, "curator")) if lib != "curator" else "1",
            ]
        )
    table = _table(
        [
            "library",
            "median ms",
            "p99 ms",
            "round medians ms",
            "server requests/cycle",
            "requests seen (proxy)",
            "round trips",
            "client CPU/cycle µs",
            "speed-up vs kazoo",
            "speed-up vs Curator",
        ],
        rows,
    )
    delay = results["meta"]["params"]["rt_delay"] * 1000
    return (
        "## 1. Uncontended acquire + release\n\n"
        "One process, one lock, acquire then release as fast as it goes. Round trips: cycles "
        "through "
        f"a proxy adding {delay:.0f} ms to every client write; (delayed median − plain median) / "
        f"{delay:.0f} ms.\n\n" + table + _curator_note(results)
    )


def _curator_note(results: dict[str, Any]) -> str:
    c = results["meta"].get("curator")
    if not c:
        return ""
    return (
        f"\n\nCurator {c.get('curator', '?')} runs in a JVM of its own (Java "
        f"{c.get('java', '?')}, ZooKeeper client {c.get('zookeeper', '?')}), one per benchmark "
        "process, kept across rounds; it times its cycles itself (`System.nanoTime`), and its "
        f"client CPU is the whole JVM's (JIT and GC included). Before its first timed cycle "
        f"each JVM runs {c.get('jvm_warmup', '?')} unrecorded cycles so the JIT has compiled "
        "the lock path. *Speed-up vs X*: X's median ÷ this row's, per round (> 1: this row "
        "faster)."
    )


def _contention_rows(record_by_lib: dict[str, Any], libs: list[str], kind: str) -> list[list[str]]:
    rows = []
    ours = record_by_lib.get("zklocks")
    for lib in libs:
        record = record_by_lib.get(lib)
        status = _status(record)
        if status:
            rows.append(
                [KIND_LABEL.get((lib, kind), LABEL.get(lib, lib)), status]
                + [""] * {"mutex": 9, "rw": 7}.get(kind, 6)
            )
            continue
        per = (
            [min(r["per_process"]) for r in record["rounds"]],
            [max(r["per_process"]) for r in record["rounds"]],
        )
        row = [
            KIND_LABEL.get((lib, kind), LABEL.get(lib, lib)),
            fmt(_med(record, "rate")),
            f"{_med(record, 'fairness'):.2f} ({fmt(median(per[0]))}/{fmt(median(per[1]))})",
        ]
        if kind == "mutex":
            row += [
                ms(_med(record, "handoff_median")),
                ms(_med(record, "handoff_p99")),
                f"{_med(record, 'same_process') * 100:.0f}%",
            ]
        elif kind == "rw":
            row += [f"{_med(record, 'reads'):.0f} / {_med(record, 'writes'):.0f}"]
        row += [
            fmt(_med(record, "requests")),
            fmt(_med(record, "watches")) if lib != "redis" else "–",
            fmt(_med(record, "watch_fires")) if lib != "redis" else "–",
            us(_med(record, "cpu_per_acq")),
            "1" if lib == "zklocks" else _x(_rate_ratio(ours, record)),
        ]
        rows.append(row)
    return rows


def _census(record_by_lib: dict[str, Any], libs: list[str], kind: str = "mutex") -> str:
    lines = []
    for lib in libs:
        census = (record_by_lib.get(lib) or {}).get("census")
        if census:
            ops = ", ".join(f"{name} {n:.2f}" for name, n in census.items() if n >= 0.005)
            lines.append(f"{KIND_LABEL.get((lib, kind), LABEL.get(lib, lib))}: {ops}")
    if not lines:
        return ""
    return (
        "\n\nRequests per acquisition by type (one extra short run through the counting proxy):\n\n"
        + "\n".join(f"- {line}" for line in lines)
    )


def _failed(results: dict[str, Any], key: str, title: str) -> str | None:
    record = results.get(key)
    if isinstance(record, dict) and "error" in record and len(record) == 1:
        return f"{title}\n\n**failed**: {record['error']}"
    return None


def _section_hot(results: dict[str, Any]) -> str:
    failed = _failed(results, "hot", "## 2. One hot lock")
    if failed:
        return failed
    parts = [
        "## 2. One hot lock\n\n"
        "N processes, each with its own session, acquire and release one lock in a loop (no work "
        "while held) for a fixed time. *min/max*: the least and most acquisitions of any process "
        "(1.00 = perfectly even); *hand-off*: from the holder starting its release to the next "
        "holder returning from acquire; *same process*: how often the releasing process took the "
        "lock again next; *watches*: `zk_watch_count` sampled during the run; *notifications*: "
        "watch events the server sent, per acquisition; *ours/theirs*: zklocks rate ÷ this row's."
    ]
    header = [
        "library",
        "acq/s",
        "min/max (min/max count)",
        "hand-off median ms",
        "hand-off p99 ms",
        "same process",
        "server requests/acq",
        "watches",
        "notifications/acq",
        "client CPU/acq µs",
        "ours/theirs",
    ]
    for n, by_lib in results.get("hot", {}).items():
        libs = [lib for lib in ("zklocks", "kazoo", "curator", "redis") if lib in by_lib]
        parts.append(
            f"### {n} processes\n\n"
            + _table(header, _contention_rows(by_lib, libs, "mutex"))
            + _census(by_lib, libs)
        )
    return "\n\n".join(parts)


def _section_mix(results: dict[str, Any]) -> str:
    n = results["meta"]["params"]["mix_procs"]
    parts = [f"## 3. Read/write mix and semaphore, {n} processes"]
    for key in ("rw", "semaphore"):
        failed = _failed(results, key, f"### {key}")
        if failed:
            parts.append(failed)
    if "rw" in results and not _failed(results, "rw", ""):
        header = [
            "library",
            "acq/s",
            "min/max (min/max count)",
            "reads / writes",
            "server requests/acq",
            "watches",
            "notifications/acq",
            "client CPU/acq µs",
            "ours/theirs",
        ]
        parts.append(
            "### Read/write lock, 80% reads\n\nEach process picks read (80%) or write per cycle "
            "(seeded).\n\n"
            + _table(header, _contention_rows(results["rw"], ["zklocks", "kazoo"], "rw"))
            + _census(results["rw"], ["zklocks", "kazoo"], "rw")
        )
    if "semaphore" in results and not _failed(results, "semaphore", ""):
        header = [
            "library",
            "acq/s",
            "min/max (min/max count)",
            "server requests/acq",
            "watches",
            "notifications/acq",
            "client CPU/acq µs",
            "ours/theirs",
        ]
        parts.append(
            "### Semaphore, 3 permits\n\nzklocks `client.semaphore(path, permits=3)` against "
            "kazoo `Semaphore(max_leases=3)`.\n\n"
            + _table(header, _contention_rows(results["semaphore"], ["zklocks", "kazoo"], "sem"))
            + _census(results["semaphore"], ["zklocks", "kazoo"], "sem")
        )
    return "\n\n".join(parts)


def _section_drain(results: dict[str, Any]) -> str:
    n = _drain_n(results)
    failed = _failed(results, "drain", f"## 4. {n} waiters queued on one lock")
    if failed:
        return failed
    procs = results["meta"]["params"]["drain_procs"]
    rows = []
    drain = results["drain"]
    for lib in ("zklocks", "kazoo"):
        record = drain.get(lib)
        status = _status(record)
        if status:
            rows.append([LABEL[lib], status, "", "", "", "", "", "", ""])
            continue
        rows.append(
            [
                LABEL[lib],
                f"{_med(record, 'drain_seconds'):.2f}",
                fmt(_med(record, "handoffs_per_s")),
                fmt(_med(record, "requests_per_handoff")),
                fmt(_med(record, "wakeups_per_handoff")),
                fmt(_med(record, "watch_fires_per_release")),
                f"{_med(record, 'enqueue_seconds'):.1f}",
                f"{_med(record, 'rss_per_waiter') / 1024:.0f}",
                _x(_rate_ratio(drain.get("zklocks"), record, "handoffs_per_s"))
                if lib != "zklocks"
                else "1",
            ]
        )
    header = [
        "library",
        "drain s",
        "handoffs/s",
        "server requests/handoff",
        "waiter wake-ups/handoff",
        "notifications/release",
        "enqueue s",
        "RSS per waiting thread KiB",
        "ours/theirs",
    ]
    return (
        f"## 4. {n} waiters queued on one lock\n\n"
        f"One holder; {n} waiter threads over {procs} processes (one session each) queue behind "
        "it; "
        "then the holder releases and each waiter, once it holds, releases at once. Drain: from "
        "the "
        "first release to the last. Wake-ups are counted by the waiters themselves; notifications "
        "are "
        "the server's watch events (for zklocks this includes the releasing holder's own lease "
        "watch "
        "on its node).\n\n" + _table(header, rows)
    )


def _section_herd(results: dict[str, Any], plotted: bool) -> str:
    failed = _failed(results, "herd", "## 4b. The herd effect")
    if failed:
        return failed
    herd = results["herd"]
    ns = sorted({int(n) for d in herd.values() for n in d["points"]})
    rows = []
    for design in HERD_DESIGNS:
        points = herd.get(design, {}).get("points", {})
        cells = []
        for n in ns:
            p = points.get(str(n)) or points.get(n)  # type: ignore[call-overload]
            if p is None:
                cells.append("–")
            elif "error" in p:
                cells.append(f"failed: {p['error'][:60]}")
            else:
                cells.append(f"{_num(p['wakeups'])} ({_num(p['requests'])} req)")
        rows.append([HERD_LABEL[design], *cells])
    table = _table(["design \\ waiters", *[str(n) for n in ns]], rows)
    return (
        "## 4b. The herd effect: wake-ups per release\n\n"
        "W waiters queue on one lock; the holder releases a few times (the queue shrinks by at "
        "most "
        "10%) and each waiter counts the times it woke to look again. Cells: median waiter "
        "wake-ups per "
        "release (median server requests per release). The naive designs are the seeds', written "
        "with "
        "kazoo in the benchmark. Waiters share one session per process (as threads of one "
        "application "
        "do), so the server sends one notification per session and the client fans it out; with "
        "one "
        "session per waiter (the seeds' one process per client) the server would send all W.\n\n"
        + table
        + ("\n\n![wake-ups per release](herd.png)" if plotted else "")
    )


def _section_many(results: dict[str, Any]) -> str:
    failed = _failed(results, "many", "## 5. Many locks from one process")
    if failed:
        return failed
    many = results["many"]
    n = results["meta"]["params"]["many_concurrency"]
    rows = []
    for variant in ("zklocks threads", "kazoo threads", "zklocks asyncio"):
        record = many.get(variant)
        status = _status(record)
        if status:
            rows.append([variant, status, "", "", "", "", "", ""])
            continue
        kazoo = variant == "kazoo threads"
        rows.append(
            [
                variant,
                fmt(_med(record, "rate")),
                fmt(_med(record, "requests_per_cycle")),
                us(_med(record, "cpu_per_cycle")),
                us(_med(record, "cpu_per_request")),
                fmt(_med(record, "switches_per_request")),
                "1" if kazoo else f"{cpu_vs_kazoo(many, variant):.2f}",
                "1" if kazoo else _x(_rate_ratio(record, many.get("kazoo threads"))),
            ]
        )
    memory = results.get("memory", {})
    if "error" in memory and len(memory) == 1:
        mem = f"Memory per waiting asyncio task: {memory['error']}."
    elif memory:
        parts = []
        for count, m in memory.items():
            if "error" in m:
                rss = m.get("rss_per_waiter")
                parts.append(
                    f"{int(count):,} tasks asked: **failed**: {m['error']}"
                    + (f" ({rss / 1024:.1f} KiB RSS per task queued by then)" if rss else "")
                )
            else:
                parts.append(
                    f"{int(count):,} tasks asked: {m['rss_per_waiter'] / 1024:.1f} KiB RSS per "
                    "waiting task "
                    f"({m['queued']:,} queued in {m['enqueue_seconds']:.1f} s"
                    + (f"; waiters failed: {m['failures'][0]}" if m.get("failures") else "")
                    + ")"
                )
        mem = (
            "Memory per waiting asyncio task (one process, one session, one held lock; "
            "queues over 1,000 on a fresh ZooKeeper with a 2 GiB heap): " + "; ".join(parts) + "."
        )
    else:
        mem = ""
    drain = results.get("drain", {})
    threads = [
        f"{LABEL[lib]} {_med(drain.get(lib), 'rss_per_waiter') / 1024:.0f} KiB"
        for lib in ("zklocks", "kazoo")
        if drain.get(lib, {}).get("rounds")
    ]
    if threads:
        mem += " Per waiting thread (section 4): " + ", ".join(threads) + "."
    return (
        f"## 5. Many locks from one process\n\n{n} concurrent cycles, each on its own lock path, "
        "one "
        "session, for a fixed time. Client CPU is the whole process's (all threads) per cycle and "
        "per "
        "server request; *CPU/request vs kazoo threads* is this row's ÷ kazoo's in the same "
        f"run (the CPU goals, {MANY_CPU_GOAL_US['threads']} and {MANY_CPU_GOAL_US['asyncio']} "
        f"µs, were set where kazoo's row cost {MANY_CPU_KAZOO_WHEN_SET_US} µs: "
        f"{MANY_CPU_GOAL_US['threads'] / MANY_CPU_KAZOO_WHEN_SET_US:.2f} and "
        f"{MANY_CPU_GOAL_US['asyncio'] / MANY_CPU_KAZOO_WHEN_SET_US:.2f} of it); *context "
        "switches/request*: the process's, voluntary and not, from `getrusage`; *ours/theirs* "
        "is cycles/s against kazoo with threads.\n\n"
        + _table(
            [
                "variant",
                "cycles/s",
                "server requests/cycle",
                "client CPU/cycle µs",
                "client CPU/request µs",
                "context switches/request",
                "CPU/request vs kazoo threads",
                "ours/theirs",
            ],
            rows,
        )
        + ("\n\n" + mem if mem else "")
    )


def cpu_vs_kazoo(many: dict[str, Any], variant: str) -> float:
    """A many-locks row's client CPU per request ÷ kazoo threads' in the same run."""
    ours = many.get(variant)
    theirs = many.get("kazoo threads")
    if _status(ours) or _status(theirs):
        return math.nan
    return _med(ours, "cpu_per_request") / _med(theirs, "cpu_per_request")


def _switches_text(results: dict[str, Any]) -> str:
    """The thread switches a blocking call costs, against the asyncio row's."""
    many = results.get("many") or {}
    threads = _med(many.get("zklocks threads"), "switches_per_request")
    tasks = _med(many.get("zklocks asyncio"), "switches_per_request")
    if math.isnan(threads):
        return "a thread switch, then a wait for the GIL among the 200 threads"
    return (
        f"{fmt(threads)} context switches per request (the asyncio row: {fmt(tasks)}), each "
        "a futex wake, a thread switch and a wait for the GIL among the 200 threads"
    )


def _cpu_share_text(results: dict[str, Any], style: str) -> str:
    """The CPU goal restated as a share of kazoo's, which a slower host does not move."""
    many = results.get("many") or {}
    ratio = cpu_vs_kazoo(many, f"zklocks {style}")
    if math.isnan(ratio):
        return ""
    goal = MANY_CPU_GOAL_US[style] / MANY_CPU_KAZOO_WHEN_SET_US
    verdict = "met" if ratio <= goal else f"{(ratio / goal - 1) * 100:.0f}% over"
    return (
        f". Kazoo's threads row costs {us(_med(many['kazoo threads'], 'cpu_per_request'))} µs "
        f"per request in this run, so ours is {ratio:.2f} of kazoo's; the goal was set where "
        f"kazoo's cost {MANY_CPU_KAZOO_WHEN_SET_US} µs, so in the same terms it is "
        f"{MANY_CPU_GOAL_US[style]}/{MANY_CPU_KAZOO_WHEN_SET_US} = {goal:.2f} of kazoo's "
        f"({verdict} in those terms)"
    )


def breakdown(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per library: cycle, wire floor, and the client time split (seconds per cycle)."""
    prof = results.get("profile")
    if not prof or "error" in prof:
        return {}
    if not prof or "medians" not in prof:
        return {}
    out = {}
    for lib, floor_name in FLOOR_OF.items():
        if lib not in prof["medians"]:
            continue
        cycle = prof["medians"][lib]
        floor = prof["medians"][floor_name]
        cpu = prof["thread_cpu"][lib]
        buckets = prof["profiles"][lib]["buckets"]
        python = buckets["zklocks"] + buckets["transport"] + buckets["other"]
        share = {
            k: (buckets[k] / python if python else 0.0) for k in ("zklocks", "transport", "other")
        }
        main = cpu["main"]
        out[lib] = {
            "cycle": cycle,
            "floor": floor,
            "over_floor": cycle - floor,
            "main_ours": main * share["zklocks"],
            "main_transport": main * share["transport"],
            "main_other": main * share["other"],
            "main": main,
            "background": cpu["other"],
            "unaccounted": cycle - floor - main - cpu["other"],
            "profiled_blocked_share": buckets["blocked"] / max(1e-12, buckets["blocked"] + python),
        }
    return out


def _section_profile(results: dict[str, Any], plotted: bool) -> str:
    prof = results["profile"]
    if "error" in prof and len(prof) == 1:
        return f"## 6. Where the time goes\n\n**failed**: {prof['error']}"
    b = breakdown(results)
    rows = []
    for lib, d in b.items():
        rows.append(
            [
                LABEL[lib],
                us(d["cycle"]),
                us(d["floor"]),
                us(d["over_floor"]),
                us(d["main_ours"]),
                us(d["main_transport"]),
                us(d["background"]),
                us(d["unaccounted"]),
            ]
        )
    floors = _table(
        ["raw-socket pattern (the wire floor)", "median µs"],
        [[name, us(prof["medians"][name])] for name in FLOOR_OF.values()],
    )
    tops = []
    for lib in ("zklocks", "zklocks-unfair"):
        p = prof["profiles"].get(lib)
        if not p:
            continue
        lines = [f"{LABEL[lib]} ({p['cycles']} profiled cycles; self time per cycle, bucket):", ""]
        lines.append("| function | called mostly from | µs/cycle | calls/cycle | counted as |")
        lines.append("|---|---|---|---|---|")
        for tottime, calls, name, bucket, *caller in p["top"][:10]:
            source = f"`{caller[0]}`" if caller and caller[0] else ""
            lines.append(
                f"| `{name}` | {source} | {tottime / p['cycles'] * 1e6:.1f} | "
                f"{calls / p['cycles']:.1f} | {bucket} |"
            )
        tops.append("\n".join(lines))
    return (
        "## 6. Where the time goes (client overhead)\n\n"
        "The *wire floor* is the same requests and round trips sent by a raw socket client with "
        "next to "
        "no Python (`benchmarks/wire.py`): what ZooKeeper, fsync and loopback cost. Everything "
        "above it is "
        "the client. CPU is per thread from `/proc` over the unprofiled cycles: the calling "
        "thread is split "
        "into our code and the transport by a cProfile run (library and builtin calls, e.g. "
        "`sock.send`, "
        "count toward whoever called them); *background* is every other thread (the transport's "
        "I/O "
        "thread); *unaccounted* = cycle − floor − CPU: thread wake-ups, GIL hand-offs and "
        "scheduling on "
        "this 2-core machine (negative when threads overlap). All µs per cycle, medians of "
        f"{prof['samples'] and len(prof['samples'].get('zklocks', []))} cycles interleaved with "
        "the floors.\n\n"
        + _table(
            [
                "library",
                "cycle",
                "wire floor",
                "above floor",
                "our code (caller thread)",
                "transport (caller thread)",
                "background threads",
                "unaccounted",
            ],
            rows,
        )
        + "\n\n"
        + floors
        + ("\n\n![breakdown](breakdown.png)" if plotted else "")
        + "\n\n"
        + "\n\n".join(tops)
    )


def _budget_text(kazoo_cycle: float, d: dict[str, float], budget: float, goal: float) -> str:
    """How far the client part must shrink, judged on the profile run's interleaved cycles."""
    head = f"Against the profile run's own kazoo cycle ({us(kazoo_cycle)} µs), {goal}× leaves "
    if budget < 0:
        return (
            head + "less than nothing above the floor: no client could reach it over these "
            "round trips."
        )
    if d["over_floor"] <= budget:
        return (
            head + f"{us(budget)} µs above the floor and we use {us(d['over_floor'])}: in that "
            f"interleaved run we are at {kazoo_cycle / d['cycle']:.2f}×, so the miss above is "
            "within this machine's run-to-run noise."
        )
    return (
        head + f"{us(budget)} µs above the floor, {us(d['over_floor'] - budget)} µs less than "
        f"now (for scale: the transport's background thread spends {us(d['background'])} µs "
        "CPU per cycle)."
    )


def _below_floor(lib: str, need: float, d: dict[str, float]) -> str:
    """The plain sentence for a speed-up goal whose cycle would be under our own wire floor.

    ``need`` is the cycle the goal asks for (the peer's median ÷ the goal); ``d`` is the
    profile run's breakdown for ``lib``, whose floor sends our requests with next to no
    client at all. Empty when the goal is above that floor.
    """
    if not need < d["floor"]:
        return ""
    pattern = re.search(r"\((\d+) req, (\d+) RT\)", FLOOR_OF[lib])
    sends = f"these {pattern[1]} requests in {pattern[2]} round trips" if pattern else "them"
    return (
        f"The goal's cycle, {us(need)} µs, is below the wire floor of our own request pattern, "
        f"{us(d['floor'])} µs in the profile run (section 6), by {us(d['floor'] - need)} µs: "
        f"no client sending {sends} "
        "can meet it on this server (both libraries pay the same two fsynced writes). "
    )


def _vs_curator_note(
    results: dict[str, Any], t: Target, u: dict[str, Any], b: dict[str, Any]
) -> str:
    """The fair speed-up vs Curator: the cycle it needs, against our floor and our cycle.

    Curator's median is section 1's and the floor the profile run's, moments apart on a
    shared machine; the profile run's own cycle scaled by measured ÷ goal is the same
    question asked within one run, so the note gives both.
    """
    need = u["curator"]["median"] / t.goal
    d = b["zklocks"]
    scaled = d["cycle"] * t.value / t.goal
    text = (
        f"- **Uncontended fair speed-up vs Curator** {_x(t.value)} (goal {t.goal:g}×): "
        f"Curator's median is {ms(u['curator']['median'])} ms, so the goal needs ≤ "
        f"{ms(need)} ms; ours is {ms(u['zklocks']['median'])} ms. "
    )
    below = _below_floor("zklocks", need, d)
    if below:
        return text + below.rstrip()
    return text + (
        f"The wire floor of our requests (3 requests / 2 round trips) is {us(d['floor'])} µs "
        f"in the profile run, so the goal is {us(need - d['floor'])} µs above it. In that "
        f"run our cycle is {us(d['cycle'])} µs, {us(d['over_floor'])} "
        f"µs above the floor (section 6 splits that); {_x(t.value)} → {t.goal:g}× asks it to "
        f"shrink to {us(scaled)} µs, "
        + (
            f"{us(scaled - d['floor'])} µs above the floor."
            if scaled >= d["floor"]
            else f"{us(d['floor'] - scaled)} µs below the floor: within that run, no client could."
        )
        + _top_cost(results, "zklocks")
    )


def _top_cost(results: dict[str, Any], lib: str) -> str:
    """The calling thread's largest item that is not waiting, from the profile."""
    p = results.get("profile", {}).get("profiles", {}).get(lib)
    if not p:
        return ""
    for tottime, calls, name, bucket, *caller in p["top"]:
        if bucket == "blocked":
            continue
        source = f", called from `{caller[0]}`" if caller and caller[0] else ""
        return (
            f" The calling thread's largest item besides waiting is `{name}`{source}: "
            f"{tottime / p['cycles'] * 1e6:.0f} µs per cycle of wall time over "
            f"{calls / p['cycles']:.0f} calls (cProfile, so it includes any wait for the GIL "
            "after the call)."
        )
    return ""


def _notes(results: dict[str, Any], target_list: list[Target]) -> str:
    """What bounds each missed target, from this run's own figures."""
    notes = []
    u = _uncontended(results)
    b = breakdown(results)
    by_name = {t.name: t for t in target_list}
    fair = by_name.get("Uncontended fair: median speed-up vs kazoo")
    if fair and fair.met is False and "zklocks" in b and "kazoo" in b and "kazoo" in u:
        d = b["zklocks"]
        need = u["kazoo"]["median"] / fair.goal
        budget = b["kazoo"]["cycle"] / fair.goal - d["floor"]
        notes.append(
            f"- **Uncontended fair speed-up** {_x(fair.value)} (goal {fair.goal:g}×): kazoo's "
            f"median is "
            f"{ms(u['kazoo']['median'])} ms, so the goal needs ≤ {ms(need)} ms; ours is "
            f"{ms(u['zklocks']['median'])} ms. "
            "In the profile run the wire floor for 3 requests / 2 round trips is "
            f"{us(d['floor'])} µs and our cycle "
            f"{us(d['cycle'])} µs: {us(d['over_floor'])} µs is client — caller thread "
            f"{us(d['main'])} µs CPU "
            f"(our code {us(d['main_ours'])}, transport {us(d['main_transport'])}), background "
            "threads "
            f"{us(d['background'])} µs, and {us(d['unaccounted'])} µs of wake-ups/hand-offs "
            "between threads. "
            + _below_floor("zklocks", need, d)
            + _budget_text(b["kazoo"]["cycle"], d, budget, fair.goal)
            + _top_cost(results, "zklocks")
        )
    vs_curator = by_name.get("Uncontended fair: median speed-up vs Curator (Java)")
    if (
        vs_curator
        and vs_curator.met is False
        and "zklocks" in b
        and {"zklocks", "curator"} <= set(u)
    ):
        notes.append(_vs_curator_note(results, vs_curator, u, b))
    reqs = by_name.get("Uncontended fair: server requests per cycle")
    if reqs and reqs.met is False:
        ops = u.get("zklocks", {}).get("rt", {}).get("ops", {})
        notes.append(
            f"- **Uncontended fair requests**: {fmt(reqs.value)} per cycle instead of 3; the "
            "proxy saw "
            + ", ".join(f"{k} {v:g}" for k, v in ops.items())
            + ". Every request above 3 is one more request the server must serve, though not "
            "a round trip if it is pipelined (see the round-trip column)."
        )
    unfair = by_name.get("Uncontended `fair=False`: median speed-up vs kazoo")
    if unfair and unfair.met is False and "zklocks-unfair" in b:
        d = b["zklocks-unfair"]
        budget = b["kazoo"]["cycle"] / 2.5 - d["floor"] if "kazoo" in b else math.nan
        notes.append(
            f"- **`fair=False` speed-up** {_x(unfair.value)} (goal 2.5×): wire floor for create | "
            "delete "
            f"{us(d['floor'])} µs, our cycle {us(d['cycle'])} µs; client above the floor "
            f"{us(d['over_floor'])} µs "
            f"(caller thread {us(d['main'])} µs, background {us(d['background'])} µs, unaccounted "
            f"{us(d['unaccounted'])} µs). "
            + (
                _below_floor("zklocks-unfair", u["kazoo"]["median"] / 2.5, d)
                if "kazoo" in u
                else ""
            )
            + (_budget_text(b["kazoo"]["cycle"], d, budget, 2.5) if "kazoo" in b else "")
            + _top_cost(results, "zklocks-unfair")
        )
    ureqs = by_name.get("Uncontended `fair=False`: server requests per cycle")
    if ureqs and ureqs.met is False:
        ops = u.get("zklocks-unfair", {}).get("rt", {}).get("ops", {})
        notes.append(
            f"- **`fair=False` requests**: {fmt(ureqs.value)} per cycle instead of "
            f"{UNFAIR_REQUESTS}; the proxy "
            "saw " + ", ".join(f"{k} {v:g}" for k, v in ops.items()) + "."
        )
    hot = results.get("hot", {}).get("8", {})
    census = (hot.get("zklocks") or {}).get("census")
    t = by_name.get("Hot lock, 8 processes: server requests per acquisition")
    if t and t.met is False and census:
        notes.append(
            f"- **Hot lock requests**: {fmt(t.value)} per acquisition (goal ≤ 3.5). The census "
            "run names them: "
            + ", ".join(f"{k} {v:.2f}" for k, v in census.items())
            + ". getData = the wait (a watch on the predecessor); after the wake-up, exists "
            "= the proof that our own node is still there (we were second in line), or a "
            "second getChildren = a fresh listing (others were ahead when we listed): see "
            "docs/locks.md, 'What each one is for'."
        )
    mix_n = results["meta"]["params"]["mix_procs"]
    watch_rows = [
        (f"hot lock, {n} processes", int(n), by_lib)
        for n, by_lib in results.get("hot", {}).items()
        if isinstance(by_lib, dict) and n.isdigit()
    ] + [
        (f"{name}, {mix_n} processes", mix_n, results.get(key, {}))
        for key, name in (("rw", "read/write"), ("semaphore", "semaphore"))
    ]
    leaky = [
        (label, _med(by_lib.get("zklocks"), "watches"), _med(by_lib.get("kazoo"), "watches"))
        for label, n, by_lib in watch_rows
        if isinstance(by_lib.get("zklocks"), dict)
        and by_lib["zklocks"].get("rounds")
        and _med(by_lib.get("zklocks"), "watches") > 4 * n + 10
    ]
    if leaky:
        notes.append(
            "- **Watches pile up on the server** (not a target, a finding): "
            + "; ".join(
                f"{label}: {ours:.0f} watches registered mid-run (kazoo {theirs:.0f})"
                for label, ours, theirs in leaky
            )
            + ". An exists-watch set on a node that is already gone stays registered (ZooKeeper "
            "then watches for its creation, which never comes for a sequential name) until the "
            "session ends."
        )
    drain_t = (
        by_name.get(f"{_drain_n(results)} waiters: handoffs/s vs kazoo")
        if "drain" in results and "meta" in results
        else None
    )
    drain = results.get("drain", {})
    if (
        drain_t
        and drain_t.met is False
        and drain.get("zklocks", {}).get("rounds")
        and drain.get("kazoo", {}).get("rounds")
    ):
        notes.append(
            f"- **{_drain_n(results)} waiters**: {_x(drain_t.value)} kazoo's handoffs/s (goal "
            "1.5×). Per hand-off we cost "
            f"{fmt(_med(drain['zklocks'], 'requests_per_handoff'))} server requests and "
            f"{fmt(_med(drain['zklocks'], 'watch_fires_per_release'))} notifications against "
            "kazoo's "
            f"{fmt(_med(drain['kazoo'], 'requests_per_handoff'))} and "
            f"{fmt(_med(drain['kazoo'], 'watch_fires_per_release'))}; "
            "a hand-off is sequential (delete → notification → next holder's reaction → its "
            "delete), so every "
            "request and client wake-up on that path adds to each of the waiters' turns."
        )
    hot_bound = "see the hand-off latency column"
    if hot.get("zklocks", {}).get("rounds") and hot.get("kazoo", {}).get("rounds"):
        hot_bound = (
            f"a hand-off is sequential: the holder's delete (one fsync), the watch notification, "
            f"the next holder's client waking and returning. Hand-off median: ours "
            f"{ms(_med(hot['zklocks'], 'handoff_median'))} ms, kazoo "
            f"{ms(_med(hot['kazoo'], 'handoff_median'))} ms; client CPU per acquisition ours "
            f"{us(_med(hot['zklocks'], 'cpu_per_acq'))} µs, kazoo "
            f"{us(_med(hot['kazoo'], 'cpu_per_acq'))} µs, on 2 cores shared by 8 client "
            "processes and the server, so client CPU is on the hand-off path"
        )
    sem = results.get("semaphore", {})
    sem_bound = "see the requests per acquisition column"
    if sem.get("zklocks", {}).get("rounds") and sem.get("kazoo", {}).get("rounds"):
        sem_bound = (
            f"we cost {fmt(_med(sem['zklocks'], 'requests'))} server requests and "
            f"{fmt(_med(sem['zklocks'], 'watch_fires'))} notifications per acquisition (kazoo "
            f"{fmt(_med(sem['kazoo'], 'requests'))} and {fmt(_med(sem['kazoo'], 'watch_fires'))}); "
            "the census above shows which"
        )
    for name, bound in (
        ("Hot lock, 8 processes: acquisitions/s vs kazoo", hot_bound),
        (f"Semaphore (3 permits), {mix_n} processes: acq/s vs kazoo", sem_bound),
        (
            "Many locks, one process (threads): cycles/s vs kazoo threads",
            "one process is bound by its client CPU: at the measured CPU per cycle, one core "
            "allows at most 1 s ÷ (CPU per cycle) cycles/s, and the server's fsyncs take the "
            "other core",
        ),
        (
            "Many locks, one process (asyncio): cycles/s vs kazoo threads",
            "as for threads: client CPU per cycle (column) bounds one process",
        ),
        (
            "Many locks, one process (threads): client CPU per request",
            "callers write their own requests, and a waiting caller reads its own reply "
            "while no other thread reads (no hand-off to the loop per call), but with 200 "
            "threads most calls still wait on a latch that another thread answers: "
            + _switches_text(results)
            + "; the asyncio row, with no thread to wake, shows what the shared Python costs"
            + _cpu_share_text(results, "threads"),
        ),
        (
            "Many locks, one process (asyncio): client CPU per request",
            "section 6 splits where the Python goes" + _cpu_share_text(results, "asyncio"),
        ),
    ):
        t = by_name.get(name)
        if t and t.met is False:
            notes.append(
                f"- **{name}**: {t.shown(t.value)} against {t.shown(t.goal)} ({t.verdict()}); "
                f"{bound}."
            )
    notes += report_ensemble.notes(results, {t.name for t in target_list if t.met is False})
    return "\n".join(notes) if notes else "- Every measured target was met in this run."


def headline(results: dict[str, Any], target_list: list[Target]) -> str:
    m = results["meta"]
    head = (
        f"Run {m['started']} ({m['mode']}), {m['nproc']} cores, ZooKeeper fsync "
        f"{'on' if m['force_sync'] else 'OFF'}; ratios are ours vs kazoo in the same run.\n\n"
    )
    return head + _table(["target", "measured", "goal", "verdict"], [t.row() for t in target_list])


def write(results: dict[str, Any], out: Path, *, plots: bool = True) -> tuple[str, str]:
    plotted: dict[str, bool] = {}
    if plots:
        try:
            from benchmarks import plots as plotting

            plotted = plotting.draw(results, out, breakdown(results))
        except Exception as exc:  # a missing matplotlib must not lose the tables
            plotted = {"error": True}
            print(f"plots skipped: {exc}")
    target_list = targets(results)
    top = headline(results, target_list)
    sections = [
        _header(results),
        "## Targets\n\n" + top,
        "### What bounds the misses\n\n" + _notes(results, target_list),
    ]
    if "uncontended" in results:
        sections.append(
            _section_uncontended(results)
            + ("\n\n![uncontended](uncontended.png)" if plotted.get("uncontended") else "")
        )
    if "hot" in results:
        sections.append(
            _section_hot(results) + ("\n\n![hot lock](hot_lock.png)" if plotted.get("hot") else "")
        )
    if "rw" in results or "semaphore" in results:
        sections.append(_section_mix(results))
    if "drain" in results:
        sections.append(_section_drain(results))
    if "herd" in results:
        sections.append(_section_herd(results, bool(plotted.get("herd"))))
    if "many" in results or "memory" in results:
        sections.append(_section_many(results))
    if "profile" in results:
        sections.append(_section_profile(results, bool(plotted.get("breakdown"))))
    if "ensemble" in results:
        sections.append(report_ensemble.section(results, bool(plotted.get("ensemble"))))
    text = "\n\n".join(sections) + "\n"
    (out / "latest.md").write_text(text)
    return text, top


_MARK = re.compile(r"(<!-- headline:start -->\n).*?(\n<!-- headline:end -->)", re.DOTALL)


def update_readme(path: Path, top: str) -> None:
    """Replace the headline block of ``benchmarks/README.md`` with this run's."""
    if not path.exists():
        return
    text = path.read_text()
    if _MARK.search(text):
        path.write_text(_MARK.sub(lambda m: m.group(1) + top + m.group(2), text))
