# ruff: noqa: RUF001  (the multiplication sign and dashes in strings are meant)
"""PNG plots of a run (matplotlib, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.report_ensemble import handoff_series
from benchmarks.scenarios import HERD_DESIGNS, UNCONTENDED_LIBS
from benchmarks.stats import median

COLORS = {
    "zklocks": "#1f77b4",
    "zklocks-unfair": "#6baed6",
    "kazoo": "#d62728",
    "tooz": "#ff7f0e",
    "redis": "#7f7f7f",
    "curator": "#2ca02c",
    "one-node": "#9467bd",
    "child-list": "#8c564b",
}
NAMES = {
    "zklocks": "zklocks fair",
    "zklocks-unfair": "zklocks fair=False",
    "kazoo": "kazoo Lock",
    "tooz": "tooz (ZooKeeper)",
    "redis": "redis-py Lock",
    "curator": "Curator (Java)",
    "one-node": "naive: all watch one node",
    "child-list": "naive: all watch child list",
}


def _subtitle(results: dict[str, Any]) -> str:
    m = results["meta"]
    return (
        f"{m['nproc']} cores, ZooKeeper fsync {'on' if m['force_sync'] else 'off'}, {m['started']}"
    )


def draw(
    results: dict[str, Any], out: Path, breakdown: dict[str, dict[str, float]]
) -> dict[str, bool]:
    done = {}
    if "uncontended" in results:
        done["uncontended"] = _uncontended(results, out / "uncontended.png")
    if "hot" in results:
        done["hot"] = _hot(results, out / "hot_lock.png")
    if "herd" in results:
        done["herd"] = _herd(results, out / "herd.png")
    if breakdown:
        done["breakdown"] = _breakdown(results, breakdown, out / "breakdown.png")
    if "ensemble" in results:
        done["ensemble"] = _ensemble(results, out / "ensemble_handoff.png")
    plt.close("all")
    return done


def _uncontended(results: dict[str, Any], path: Path) -> bool:
    libs = [lib for lib in UNCONTENDED_LIBS if results["uncontended"].get(lib, {}).get("samples")]
    if not libs:
        return False
    fig, ax = plt.subplots(figsize=(8, 3.8))
    data = [[s * 1000 for s in results["uncontended"][lib]["samples"]] for lib in libs]
    parts = ax.boxplot(data, vert=False, whis=(1, 99), showfliers=False, patch_artist=True)
    for patch, lib in zip(parts["boxes"], libs, strict=True):
        patch.set_facecolor(COLORS[lib])
        patch.set_alpha(0.6)
    ax.set_yticks(range(1, len(libs) + 1), [NAMES[lib] for lib in libs])
    ax.set_xscale("log")
    ax.set_xlabel("acquire + release, ms (box: quartiles, whiskers: p1–p99)")
    ax.set_title("Uncontended lock cycle\n" + _subtitle(results), fontsize=10)
    prof = results.get("profile", {}).get("medians", {})
    floor = next((v for k, v in prof.items() if k.startswith("fair:")), None)
    if floor:
        ax.axvline(floor * 1000, color="k", ls=":", lw=1)
        ax.text(floor * 1000, len(libs) + 0.4, " wire floor (3 req, 2 RT)", fontsize=8, va="top")
    ax.grid(axis="x", alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _hot(results: dict[str, Any], path: Path) -> bool:
    hot = results["hot"]
    ns = sorted(int(n) for n in hot)
    libs = [
        lib
        for lib in ("zklocks", "kazoo", "curator", "redis")
        if any(hot[str(n)].get(lib, {}).get("rounds") for n in ns)
    ]
    if not libs:
        return False
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / len(libs)
    for j, lib in enumerate(libs):
        rates, reqs = [], []
        for n in ns:
            rounds = hot[str(n)].get(lib, {}).get("rounds", [])
            rates.append(median([r["rate"] for r in rounds]) if rounds else math.nan)
            reqs.append(median([r["requests"] for r in rounds]) if rounds else math.nan)
        xs = [i + (j - (len(libs) - 1) / 2) * width for i in range(len(ns))]
        ax.bar(xs, rates, width, color=COLORS[lib], label=NAMES[lib])
        ax2.bar(xs, reqs, width, color=COLORS[lib], label=NAMES[lib])
    for a in (ax, ax2):
        a.set_xticks(range(len(ns)), [f"{n} processes" for n in ns])
        a.grid(axis="y", alpha=0.3)
    ax.set_yscale("log")
    ax.set_ylabel("acquisitions / s (log)")
    ax.set_title("One hot lock: throughput", fontsize=10)
    ax2.set_ylabel("server requests / acquisition")
    ax2.set_title("One hot lock: cost", fontsize=10)
    ax.legend(fontsize=8)
    fig.suptitle(_subtitle(results), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _herd(results: dict[str, Any], path: Path) -> bool:
    herd = results["herd"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    drawn = False
    for design in HERD_DESIGNS:
        points = herd.get(design, {}).get("points", {})
        xs, wake, reqs = [], [], []
        for n in sorted(points, key=int):
            p = points[n]
            if "error" in p or p.get("wakeups") is None or math.isnan(p["wakeups"]):
                continue
            xs.append(int(n))
            wake.append(max(p["wakeups"], 0.5))
            reqs.append(max(p["requests"], 0.5))
        if not xs:
            continue
        drawn = True
        color = COLORS[design]
        style = {"zklocks": "-o", "kazoo": "-D"}.get(design, "--s")
        ours = design == "zklocks"
        options = {
            "color": color,
            "label": NAMES[design],
            "lw": 2.2 if ours else 1.3,
            "ms": 8 if ours else 5,
            "zorder": 3 if ours else 2,
        }
        if design == "one-node":  # same counts as child-list on the left: hollow and larger
            options.update(ms=9, markerfacecolor="none", markeredgewidth=1.5)
        ax.plot(xs, wake, style, **options)
        ax2.plot(xs, reqs, style, **options)
    if not drawn:
        plt.close(fig)
        return False
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("waiters queued")
        a.grid(alpha=0.3, which="both")
        for axis in (a.xaxis, a.yaxis):
            axis.set_major_formatter(plain)
            axis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
    ax.set_ylabel("waiters woken per release")
    ax.set_title("The herd effect: wake-ups per release", fontsize=10)
    ax2.set_ylabel("server requests per release")
    ax2.set_title("…and what they cost the server", fontsize=10)
    ax.legend(fontsize=8)
    fig.suptitle(_subtitle(results), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _breakdown(results: dict[str, Any], breakdown: dict[str, dict[str, float]], path: Path) -> bool:
    libs = list(breakdown)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    parts = [
        ("floor", "wire floor (ZooKeeper + fsync + loopback)", "#bbbbbb"),
        ("main_ours", "our code (caller thread CPU)", "#1f77b4"),
        ("main_transport", "transport (caller thread CPU)", "#ff7f0e"),
        ("main_other", "other Python (caller thread)", "#c7c7c7"),
        ("background", "background threads CPU", "#2ca02c"),
        ("unaccounted", "wake-ups / hand-offs / scheduling", "#d62728"),
    ]
    for i, lib in enumerate(libs):
        left = 0.0
        for key, label, color in parts:
            value = max(0.0, breakdown[lib][key]) * 1e6
            ax.barh(i, value, left=left, color=color, label=label if i == 0 else None)
            left += value
        ax.plot([breakdown[lib]["cycle"] * 1e6], [i], "k|", ms=18)
    ax.set_yticks(range(len(libs)), [NAMES[lib] for lib in libs])
    ax.set_xlabel("µs per acquire + release (| = measured cycle median)")
    ax.set_title("Where an uncontended cycle's time goes\n" + _subtitle(results), fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _ensemble(results: dict[str, Any], path: Path) -> bool:
    """Hot-lock hand-off against the links' round-trip time, each library and the floor."""
    series = handoff_series(results)
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, points in series.items():
        points.sort()
        rtts = [p[0] for p in points]
        color = COLORS.get(name, "k")
        label = NAMES.get(name, "floor: delete commit + notification + one read (raw wire)")
        style = "--" if name == "floor" else "-"
        ax.plot(rtts, [p[1] for p in points], style, marker="o", color=color, label=label)
        ax.plot(rtts, [p[2] for p in points], ":", color=color, alpha=0.5, lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda value, _pos: f"{value:g}")
    ax.set_xticks(sorted({p[0] for points in series.values() for p in points}))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("round-trip time of every link, ms (nominal)")
    ax.set_ylabel("hand-off, ms (solid: median, dotted: p99)")
    procs = results["ensemble"].get("hot_procs")
    ax.set_title(
        f"3-member ensemble, one hot lock, {procs} processes\n" + _subtitle(results), fontsize=10
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True
