"""What a run leaves in ``--out``: ``report.md``, ``timeline.png``, ``window.png`` (the
smallest failing window, when there is one), ``summary.json``; the runner adds
``history.jsonl`` and the clients' and members' logs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from nemesis.checker import (
    Model,
    Verdict,
    Violation,
    abnormal_losses,
    lock_delay_cases,
    model_for,
)
from nemesis.history import History, Hold

KIND_COLORS = {"lock": "#1f77b4", "read": "#2ca02c", "write": "#d62728", "permit": "#9467bd"}
FAULT_COLORS = {
    "stall-holders-follower": "#ff7f0e",
    "stall-member": "#ffbb78",
    "cut-member": "#8c564b",
    "pause-member": "#7f7f7f",
    "kill-leader": "#000000",
    "pause-holder": "#e377c2",
    "pause-client": "#f7b6d2",
}
CHECKS = {
    "exclusion": "leases that say held are held: linearizable against the lock model",
    "token-order": "fencing tokens only grow",
    "fencing": "no store took a stale holder's write (guarded-set)",
    "set-lost": "no accepted element is missing from a store's final set",
    "set-duplicate": "no element is twice in a store's set",
    "set-corrupt": "every element of a set was written, and not refused",
    "lock-delay": "after an abnormal loss, the queued successor waited the lock-delay",
}


def write(
    out: Path, history: History, verdict: Verdict, model: Model, *, error: str | None = None
) -> str:
    """Write the report files; return the short summary for stdout."""
    stats = _stats(history)
    if verdict.violations:
        # how long the run took to catch it: from the first fault's chance to the first
        # moment the history proves a violation
        begin = history.faults_begin or history.t0
        stats["caught_after"] = max(round(min(v.end for v in verdict.violations) - begin, 1), 0.0)
    smallest = verdict.smallest()
    title = _title(history, verdict, error)
    draw(history, verdict, out / "timeline.png", title=title)
    window_png = out / "window.png"
    window_png.unlink(missing_ok=True)
    if smallest is not None:
        pad = max(1.0, float(history.params.get("session_timeout", 1.0)))
        draw(
            history,
            verdict,
            window_png,
            title=f"smallest failing window: {smallest.check}",
            span=(smallest.start - pad, smallest.end + pad),
        )
    (out / "report.md").write_text(
        _markdown(history, verdict, model, stats, smallest, error), encoding="utf-8"
    )
    summary = {
        "verdict": "error" if error else "clean" if verdict.ok else "violation",
        "error": error,
        "violations": dict(verdict.counts),
        "smallest": None if smallest is None else _violation_json(history, smallest),
        "stats": stats,
        "params": history.params,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return _summary_text(history, verdict, stats, smallest, error, out)


# ------------------------------------------------------------------ numbers


def _stats(history: History) -> dict[str, Any]:
    holds = history.holds
    granted = [h for h in holds if h.ok is not None]
    lost = [h for h in granted if h.lost is not None or h.told is not None]
    reasons = Counter(h.lost_reason or "?" for h in lost)
    # a lease lost, then someone else granted before its holder's release came back: a
    # lock taken over from a holder cut off from it, which had said lost first
    taken_over = 0
    for h in lost:
        said_lost = min(t for t in (h.lost, h.told) if t is not None)
        end = h.release_end or history.last_time
        if any(
            o is not h and o.ok is not None and said_lost <= o.ok <= end and o.client != h.client
            for o in granted
        ):
            taken_over += 1
    faults = Counter(f.kind for f in history.faults)
    writes = history.writes
    params = history.params
    model = model_for(str(params.get("workload", "lock")), int(params.get("permits", 2)))
    return {
        "seconds": round(history.last_time - history.t0, 1),
        "acquires": len(holds),
        "granted": len(granted),
        "acquire_failed": sum(1 for h in holds if h.failed is not None),
        "held_said": sum(1 for h in granted if h.claimed is not None),
        "released": sum(1 for h in holds if h.release_end is not None),
        "release_failed": sum(1 for h in holds if h.release_error is not None),
        "leases_lost": len(lost),
        "lost_reasons": dict(reasons),
        "taken_over_after_lost": taken_over,
        "sessions_lost": sum(len(times) for times in history.session_losses.values()),
        "abnormal_losses": len(abnormal_losses(history)),
        "lock_delay_cases": len(lock_delay_cases(history, model)),
        "writes": len(writes),
        "writes_accepted": sum(1 for w in writes if w.accepted),
        "writes_refused_stale": sum(1 for w in writes if (w.error or "").startswith("stale")),
        "writes_refused_conflict": sum(1 for w in writes if (w.error or "").startswith("conflict")),
        "writes_unknown": sum(1 for w in writes if not w.accepted and not w.refused),
        "final_sets": {store: len(final) for store, final in history.finals.items()},
        "faults": dict(faults),
        "faults_total": len(history.faults),
        "stalls_with_holder": sum(
            1
            for f in history.faults
            if f.kind == "stall-holders-follower" and "holds on it" in f.detail
        ),
        "notes": len(history.notes),
        "client_errors": len(history.errors),
    }


def _rel(history: History, t: float | None) -> str:
    return "" if t is None else f"{t - history.t0:.3f}"


def _title(history: History, verdict: Verdict, error: str | None) -> str:
    p = history.params
    what = "ERROR" if error else "clean" if verdict.ok else "VIOLATION"
    plant = f", plant {p['plant']}" if p.get("plant") else ""
    return (
        f"{what}: {p.get('workload')} on {p.get('members')} members, {p.get('timing')} "
        f"timing, seed {p.get('seed')}{plant}"
    )


def _violation_json(history: History, v: Violation) -> dict[str, Any]:
    return {
        "check": v.check,
        "message": v.message,
        "start": round(v.start - history.t0, 3),
        "end": round(v.end - history.t0, 3),
        "length": round(v.length, 3),
        "holds": [h.label for h in v.holds],
        "writes": [w.label for w in v.writes],
    }


# ------------------------------------------------------------------ text


def _summary_text(
    history: History,
    verdict: Verdict,
    stats: dict[str, Any],
    smallest: Violation | None,
    error: str | None,
    out: Path,
) -> str:
    lines = [
        _title(history, verdict, error),
        f"  {stats['granted']} grants of {stats['acquires']} acquires, "
        f"{stats['leases_lost']} leases lost ({stats['taken_over_after_lost']} taken over), "
        f"{stats['faults_total']} faults ({stats['stalls_with_holder']} follower stalls "
        "under a holder)",
    ]
    if stats["writes"]:
        lines.append(
            f"  {stats['writes_accepted']} writes accepted, "
            f"{stats['writes_refused_stale']} refused as stale, "
            f"{stats['writes_refused_conflict']} as conflicts, "
            f"{stats['writes_unknown']} unknown; final sets {stats['final_sets']}"
        )
    for name, count in sorted(verdict.counts.items()):
        lines.append(f"  {name}: {count} violation(s)")
    if "caught_after" in stats:
        lines.append(f"  first violation {stats['caught_after']} s after the faults began")
    if smallest is not None:
        lines.append(
            f"  smallest failing window: {_rel(history, smallest.start)}..."
            f"{_rel(history, smallest.end)} s: {smallest.message}"
        )
    if error:
        lines.append(f"  error: {error}")
    lines.append(f"  report: {out / 'report.md'}")
    return "\n".join(lines)


def _markdown(
    history: History,
    verdict: Verdict,
    model: Model,
    stats: dict[str, Any],
    smallest: Violation | None,
    error: str | None,
) -> str:
    p = history.params
    md = [f"# Nemesis run: {_title(history, verdict, error)}", ""]
    md += [
        "Repeat it (same seed, same schedule; what the real system does may differ):",
        "",
        f"    {p.get('command', '')}",
        "",
        f"Recheck the recorded history: `python -m nemesis check {p.get('out', '<dir>')}`",
        "",
        "| parameter | value |",
        "|---|---|",
    ]
    for key in ("workload", "members", "clients", "minutes", "timing", "seed", "plant"):
        md.append(f"| {key} | {p.get(key)} |")
    md.append(
        f"| members' timing | tickTime {p.get('tick_ms')} ms, syncLimit {p.get('sync_limit')}, "
        f"sessions {p.get('session_timeout')} s |"
    )
    md.append(
        f"| lock model | {model.name}"
        + (f", {model.permits} permits |" if model.name == "semaphore" else " |")
    )
    md += ["", "## Verdict", "", "| check | what it proves | violations |", "|---|---|---|"]
    for name, what in CHECKS.items():
        md.append(f"| {name} | {what} | {verdict.counts.get(name, 0)} |")
    if error:
        md += ["", f"**The run failed**: {error}"]
    md += [
        "",
        "Each check and the time bound it uses are explained in `nemesis/checker.py`: a",
        "holder counts from its acquire's *ok* (the latest its grant can have happened) to",
        "the last time its lease said held (the earliest it may have ended), never to the",
        "lost-callback's time (late for a paused process).",
        "",
        "![timeline](timeline.png)",
    ]
    if smallest is not None:
        md += _window_markdown(history, smallest)
    if len(verdict.violations) > 1:
        md += ["", "## Violations", ""]
        for v in sorted(verdict.violations, key=lambda v: v.start)[:30]:
            md.append(f"* `{v.check}` at {_rel(history, v.start)} s: {v.message}")
        hidden = sum(verdict.counts.values()) - min(30, len(verdict.violations))
        if hidden > 0:
            md.append(f"* ... and {hidden} more")
    md += ["", "## The run in numbers", "", "| | |", "|---|---|"]
    for key, value in stats.items():
        md.append(f"| {key.replace('_', ' ')} | {value} |")
    md += ["", "## Faults", "", "| # | kind | target | from (s) | to (s) | detail |"]
    md.append("|---|---|---|---|---|---|")
    for f in history.faults:
        md.append(
            f"| {f.id} | {f.kind} | {f.target} | {_rel(history, f.start)} | "
            f"{_rel(history, f.end)} | {f.detail} |"
        )
    if history.notes or history.errors:
        md += ["", "## Notes", ""]
        for t, text in sorted(history.notes + history.errors):
            md.append(f"* {_rel(history, t)} s: {text}")
    return "\n".join(md) + "\n"


def _window_markdown(history: History, v: Violation) -> list[str]:
    md = [
        "",
        "## The smallest failing window",
        "",
        f"`{v.check}`, from {_rel(history, v.start)} s to {_rel(history, v.end)} s "
        f"({v.length:.3f} s): {v.message}",
        "",
        "![window](window.png)",
        "",
        "Records of the clients involved in the window (seconds since the start; `held`",
        "records are thinned to one per 0.1 s by the clients):",
        "",
        "| t (s) | who | what |",
        "|---|---|---|",
    ]
    rows: list[tuple[float, str, str]] = []
    for h in v.holds:
        rows += _hold_rows(h)
    for w in v.writes:
        what = f"{w.store} write {w.w}"
        rows.append((w.invoke, f"c{w.client}", f"{what} invoke, token {w.token}, {w.element}"))
        if w.end is not None:
            outcome = "accepted" if w.accepted else f"refused ({w.error})"
            rows.append((w.end, f"c{w.client}", f"{what} {outcome}"))
    session = float(history.params.get("session_timeout", 1.0))
    for f in history.faults:
        end = f.end if f.end is not None else history.last_time
        if f.start <= v.end and end >= v.start - 2 * session:
            rows.append((f.start, "nemesis", f"{f.kind} {f.target} begins ({f.detail})"))
            rows.append((end, "nemesis", f"{f.kind} {f.target} undone"))
    for t, who, what in sorted(rows):
        md.append(f"| {_rel(history, t)} | {who} | {what} |")
    return md


def _hold_rows(h: Hold) -> list[tuple[float, str, str]]:
    who = f"c{h.client}"
    rows = [(h.invoke, who, f"acquire #{h.n} {h.kind} invoke")]
    if h.ok is not None:
        rows.append((h.ok, who, f"acquire #{h.n} ok, token {h.token}"))
    if h.failed is not None:
        rows.append((h.failed, who, f"acquire #{h.n} fail: {h.error}"))
    if h.first_held is not None:
        rows.append((h.first_held, who, f"#{h.n} lease says held (first)"))
    if h.last_held is not None and h.last_held != h.first_held:
        rows.append((h.last_held, who, f"#{h.n} lease says held (last)"))
    if h.lost is not None:
        rows.append((h.lost, who, f"#{h.n} lease says lost: {h.lost_reason}"))
    if h.told is not None:
        rows.append((h.told, who, f"#{h.n} lost-callback ran"))
    if h.release_invoke is not None:
        rows.append((h.release_invoke, who, f"release #{h.n} invoke"))
    if h.release_end is not None:
        outcome = f"fail: {h.release_error}" if h.release_error else "ok"
        rows.append((h.release_end, who, f"release #{h.n} {outcome}"))
    return rows


# ------------------------------------------------------------------ pictures


def draw(
    history: History,
    verdict: Verdict,
    path: Path,
    *,
    title: str,
    span: tuple[float, float] | None = None,
) -> None:
    """Holders per client (the lock's timeline) above the faults, on one time axis."""
    t0 = history.t0
    clients = sorted(set(history.clients) | {h.client for h in history.holds})
    targets = sorted(
        {f.target for f in history.faults}, key=lambda s: (s[0] != "m", int(s[1:] or 0))
    )
    seconds = (span[1] - span[0]) if span else history.last_time - t0
    width = min(60.0, max(12.0, seconds / 8))
    fig, (ax, axf) = plt.subplots(
        2,
        1,
        sharex=True,
        figsize=(width, 1.2 + 0.45 * (len(clients) + len(targets))),
        gridspec_kw={"height_ratios": [max(1, len(clients)), max(1, len(targets))]},
    )
    _draw_holds(ax, history, clients)
    _draw_faults(axf, history, targets)
    smallest = verdict.smallest()
    for v in verdict.violations:
        for axis in (ax, axf):
            axis.axvspan(v.start - t0, v.end - t0, color="red", alpha=0.08, lw=0)
    if smallest is not None:
        for axis in (ax, axf):
            axis.axvspan(smallest.start - t0, smallest.end - t0, color="red", alpha=0.25, lw=0)
        if smallest.overlap is not None:
            ax.axvspan(
                smallest.overlap[0] - t0, smallest.overlap[1] - t0, color="red", alpha=0.4, lw=0
            )
    if span is not None:
        ax.set_xlim(span[0] - t0, span[1] - t0)
    ax.set_title(title, fontsize=10, loc="left")
    axf.set_xlabel("seconds since the run began")
    handles: list[Artist] = [
        Rectangle((0, 0), 1, 1, color=color, label=kind)
        for kind, color in KIND_COLORS.items()
        if any(h.kind == kind for h in history.holds)
    ]
    handles.append(Line2D([], [], color="red", marker="x", ls="", label="lease says lost"))
    handles.append(Line2D([], [], color="black", marker="|", ls="", label="lost-callback"))
    if history.writes:
        handles.append(Line2D([], [], color="green", marker="|", ls="", label="write ok"))
        handles.append(Line2D([], [], color="red", marker="o", ls="", label="write refused"))
    ax.legend(handles=handles, loc="upper right", fontsize=7, ncol=len(handles))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _client_label(history: History, c: int) -> str:
    home = history.clients.get(c, {}).get("home")
    return f"c{c} → {'all' if home is None else f'm{home}'}"


def _draw_holds(ax: Axes, history: History, clients: list[int]) -> None:
    t0 = history.t0
    rows = {c: i for i, c in enumerate(clients)}
    for h in history.holds:
        y = rows[h.client]
        end = h.ok if h.ok is not None else h.failed
        if end is not None:
            ax.plot([h.invoke - t0, end - t0], [y, y], color="#c7c7c7", lw=1, zorder=1)
        claimed = h.claimed
        if claimed is not None:
            ax.broken_barh(
                [(claimed[0] - t0, max(claimed[1] - claimed[0], 0.01))],
                (y - 0.3, 0.6),
                color=KIND_COLORS.get(h.kind, "#1f77b4"),
                zorder=2,
            )
        if h.lost is not None:
            ax.plot(h.lost - t0, y, "x", color="red", ms=6, zorder=3)
        if h.told is not None:
            ax.plot(h.told - t0, y + 0.35, "|", color="black", ms=8, zorder=3)
    for w in history.writes:
        if w.end is None:
            continue
        y = rows[w.client]
        if w.accepted:
            ax.plot(w.end - t0, y - 0.4, "|", color="green", ms=4, zorder=3)
        else:
            ax.plot(w.end - t0, y - 0.4, "o", color="red", ms=3, zorder=3)
    ax.set_yticks(range(len(clients)), [_client_label(history, c) for c in clients])
    ax.set_ylim(-0.8, len(clients) - 0.2)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def _draw_faults(ax: Axes, history: History, targets: list[str]) -> None:
    t0 = history.t0
    rows = {target: i for i, target in enumerate(targets)}
    for f in history.faults:
        end = f.end if f.end is not None else history.last_time
        y = rows[f.target]
        ax.broken_barh(
            [(f.start - t0, max(end - f.start, 0.05))],
            (y - 0.35, 0.7),
            color=FAULT_COLORS.get(f.kind, "#17becf"),
        )
        ax.text(f.start - t0, y, f" {f.kind}", va="center", fontsize=6, clip_on=True)
    ax.set_yticks(range(len(targets)), targets)
    ax.set_ylim(-0.8, max(len(targets), 1) - 0.2)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
