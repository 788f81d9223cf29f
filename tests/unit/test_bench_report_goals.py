# ruff: noqa: RUF001, RUF002, RUF003  (the multiplication sign is meant)
"""The benchmark report's goals and what it says about their misses, on synthetic results.

The many-locks CPU goals are issue 28's (100 µs of client CPU per request for threads,
70 µs for asyncio), also read as a share of kazoo's CPU in the same run (issue 38). The
ensemble hand-off is judged against its protocol floor, commit + notification + read,
at ≤ 1.15× (issue 38). A speed-up goal whose cycle would be below our own wire floor is
named as such.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks import report, report_ensemble

FAIR_FLOOR = report.FLOOR_OF["zklocks"]


def many_row(cpu_per_request: float) -> dict[str, Any]:
    return {
        "rounds": [
            {
                "rate": 1000.0,
                "cpu_per_request": cpu_per_request,
                "cpu_per_cycle": 3 * cpu_per_request,
                "requests_per_cycle": 3.0,
            }
        ]
    }


def many_results(**rows: float) -> dict[str, Any]:
    return {
        "meta": {"params": {"many_concurrency": 200, "mix_procs": 8}},
        "many": {name.replace("_", " "): many_row(cpu) for name, cpu in rows.items()},
    }


def test_many_locks_cpu_goals_per_style() -> None:
    results = many_results(zklocks_threads=8e-5, zklocks_asyncio=8e-5, kazoo_threads=8e-5)
    goals = {
        target.name: (target.goal, target.met)
        for target in report.targets(results)
        if target.name.endswith("client CPU per request")
    }
    assert goals == {  # 80 µs meets the threads goal and misses the asyncio one
        "Many locks, one process (threads): client CPU per request": (100, True),
        "Many locks, one process (asyncio): client CPU per request": (70, False),
    }


def test_many_locks_table_shows_cpu_per_request_relative_to_kazoo() -> None:
    results = many_results(zklocks_threads=2e-4, zklocks_asyncio=1.5e-4, kazoo_threads=5e-4)
    table = report._section_many(results)
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in table.splitlines()}
    header = rows["variant"]
    column = header.index("CPU/request vs kazoo threads")
    assert rows["zklocks threads"][column] == "0.40"
    assert rows["zklocks asyncio"][column] == "0.30"
    assert rows["kazoo threads"][column] == "1"


def test_cpu_bounds_restate_the_goal_as_a_share_of_kazoo() -> None:
    # 200 µs and 150 µs against kazoo's 500: both miss in µs; threads 0.40 of kazoo's
    # (goal 100/332 = 0.30), asyncio 0.30 (goal 70/332 = 0.21)
    results = many_results(zklocks_threads=2e-4, zklocks_asyncio=1.5e-4, kazoo_threads=5e-4)
    notes = report._notes(results, report.targets(results)).splitlines()
    threads = next(n for n in notes if "(threads): client CPU per request" in n)
    asyncio = next(n for n in notes if "(asyncio): client CPU per request" in n)
    assert "so ours is 0.40 of kazoo's" in threads
    assert "100/332 = 0.30 of kazoo's (33% over in those terms)" in threads
    assert "so ours is 0.30 of kazoo's" in asyncio
    assert "70/332 = 0.21 of kazoo's (42% over in those terms)" in asyncio


def test_threads_bound_names_the_context_switches_per_request() -> None:
    results = many_results(zklocks_threads=2e-4, zklocks_asyncio=1.5e-4, kazoo_threads=5e-4)
    switched = {"zklocks threads": 5.2, "zklocks asyncio": 0.09, "kazoo threads": 7.0}
    for variant, per_request in switched.items():
        results["many"][variant]["rounds"][0]["switches_per_request"] = per_request
    table = report._section_many(results)
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in table.splitlines()}
    column = rows["variant"].index("context switches/request")
    assert [rows[v][column] for v in switched] == ["5.20", "0.09", "7.00"]
    notes = report._notes(results, report.targets(results)).splitlines()
    threads = next(n for n in notes if "(threads): client CPU per request" in n)
    assert "5.20 context switches per request (the asyncio row: 0.09)" in threads


def test_cpu_share_is_met_on_a_slow_host_where_the_microseconds_miss() -> None:
    # a host where kazoo costs 1,000 µs: our 250 µs misses 100 µs but is 0.25 < 0.30
    results = many_results(zklocks_threads=2.5e-4, zklocks_asyncio=2e-4, kazoo_threads=1e-3)
    notes = report._notes(results, report.targets(results))
    assert "100/332 = 0.30 of kazoo's (met in those terms)" in notes


# -- the uncontended speed-up goals against the wire floor ------------------------------------


def uncontended(median_s: float) -> dict[str, Any]:
    return {
        "rounds": [{"median": median_s, "requests": 3.0, "cpu": 1e-4}],
        "samples": [median_s],
        "round_trips": {"round_trips": 2.0, "ops": {}},
    }


def profile(ours: float, floor: float, kazoo: float) -> dict[str, Any]:
    libs = ("zklocks", "zklocks-unfair", "kazoo")
    return {
        "medians": {
            **{name: floor for name in report.FLOOR_OF.values()},
            "zklocks": ours,
            "zklocks-unfair": ours,
            "kazoo": kazoo,
        },
        "thread_cpu": {lib: {"main": 3e-4, "other": 1e-4} for lib in libs},
        "profiles": {
            lib: {
                "cycles": 100,
                "buckets": {"zklocks": 1.0, "transport": 1.0, "other": 0.0, "blocked": 1.0},
                "top": [],
            }
            for lib in libs
        },
    }


def uncontended_results(*, ours: float, curator: float, kazoo: float) -> dict[str, Any]:
    """Section 1 medians as given; the profile run: our cycle 1,300 µs over a 924 µs floor."""
    return {
        "meta": {"params": {"mix_procs": 8}},
        "uncontended": {
            "zklocks": uncontended(ours),
            "zklocks-unfair": uncontended(ours),
            "curator": uncontended(curator),
            "kazoo": uncontended(kazoo),
        },
        "profile": profile(1.3e-3, 924e-6, 2.6e-3),
    }


def curator_note(results: dict[str, Any]) -> str:
    notes = report._notes(results, report.targets(results)).splitlines()
    return next(n for n in notes if n.startswith("- **Uncontended fair speed-up vs Curator**"))


def test_curator_goal_below_our_wire_floor_is_named() -> None:
    # the idle figures: Curator 1,091 µs ÷ 1.2 = 909 µs, under a 924 µs floor
    results = uncontended_results(ours=1.138e-3, curator=1.091e-3, kazoo=2.6e-3)
    note = curator_note(results)
    assert "the goal needs ≤ 0.909 ms" in note
    assert (
        "The goal's cycle, 909 µs, is below the wire floor of our own request pattern, 924 µs "
        "in the profile run (section 6), by 14.8 µs: no client sending these 3 requests in 2 "
        "round trips can meet it on this server (both libraries pay the same two fsynced writes)."
    ) in note


def test_curator_goal_above_the_floor_gives_the_budget_instead() -> None:
    # Curator 1,500 µs ÷ 1.2 = 1,250 µs: 326 µs above the 924 µs floor
    results = uncontended_results(ours=1.6e-3, curator=1.5e-3, kazoo=2.6e-3)
    note = curator_note(results)
    assert "below the wire floor" not in note
    assert "so the goal is 326 µs above it" in note


def test_kazoo_goal_below_the_floor_is_named_too() -> None:
    # kazoo 1,800 µs ÷ 2.2 = 818 µs < 924 µs: the fair speed-up vs kazoo cannot be met
    results = uncontended_results(ours=1.2e-3, curator=1.0e-3, kazoo=1.8e-3)
    notes = report._notes(results, report.targets(results))
    fair = next(n for n in notes.splitlines() if n.startswith("- **Uncontended fair speed-up**"))
    assert "The goal's cycle, 818 µs, is below the wire floor of our own request pattern" in fair
    # fair=False: 1,800 ÷ 2.5 = 720 µs, under its own pattern's floor (create | delete)
    unfair = next(n for n in notes.splitlines() if n.startswith("- **`fair=False` speed-up**"))
    assert "The goal's cycle, 720 µs, is below" in unfair
    assert "no client sending these 2 requests in 2 round trips" in unfair


def test_kazoo_goal_above_the_floor_says_nothing_of_it() -> None:
    # kazoo 2,600 µs: fair needs 1,182 µs and fair=False 1,040 µs, both above 924 µs; both
    # goals are missed (2.17×), so both bullets are there, without the sentence
    results = uncontended_results(ours=1.2e-3, curator=1.0e-3, kazoo=2.6e-3)
    notes = report._notes(results, report.targets(results)).splitlines()
    fair = next(n for n in notes if n.startswith("- **Uncontended fair speed-up**"))
    unfair = next(n for n in notes if n.startswith("- **`fair=False` speed-up**"))
    assert "below the wire floor" not in fair
    assert "below the wire floor" not in unfair


# -- the ensemble hand-off against commit + notification + read ------------------------------


def hot(handoff_s: float) -> dict[str, Any]:
    return {"rounds": [{"handoff_median": handoff_s, "handoff_p99": 2 * handoff_s, "rate": 1.0}]}


def ensemble_results(ours_1ms: float, ours_5ms: float, curator: float) -> dict[str, Any]:
    """Floors: 1 ms, 4.59 ms commit + notification and a 1.52 ms read (the issue's)."""

    def at(notified: float, read: float, ours: float) -> dict[str, Any]:
        return {
            "floor": {"handoff": notified, "rtt": read, "handoff_p99": 5e-3, "delete": 3e-3},
            "hot": {"zklocks": hot(ours), "curator": hot(curator)},
        }

    return {
        "meta": {"nproc": 2, "params": {}},
        "ensemble": {
            "hot_procs": 8,
            "members": 3,
            "links": 15,
            "rtts": {"1": at(4.59e-3, 1.52e-3, ours_1ms), "5": at(20e-3, 6e-3, ours_5ms)},
        },
    }


def handoff_targets(results: dict[str, Any]) -> dict[str, tuple[float, float, bool | None]]:
    return {
        t.name: (round(t.value, 3), t.goal, t.met)
        for t in report.targets(results)
        if "hand-off median" in t.name
    }


def test_handoff_floor_is_commit_plus_notification_plus_read() -> None:
    results = ensemble_results(7.43e-3, 29.0e-3, 8e-3)
    assert report_ensemble.floor_parts(results["ensemble"]["rtts"]["1"]) == (
        4.59e-3,
        1.52e-3,
        4.59e-3 + 1.52e-3,
    )
    # the 7.43 ms over 6.11 ms (it was 1.62× over the 4.59 ms floor alone)
    assert handoff_targets(results)[
        "Ensemble, 1 ms RTT: hot-lock hand-off median over the floor (commit + notification + read)"
    ] == (1.216, 1.15, False)


def test_handoff_goal_is_1_15_times_the_floor() -> None:
    # 1 ms: 7.02 / 6.11 = 1.149 meets; 5 ms: 29.95 / 26 = 1.152 misses
    results = ensemble_results(7.02e-3, 29.95e-3, 8e-3)
    met = {name.split(":")[0]: target[2] for name, target in handoff_targets(results).items()}
    assert met == {"Ensemble, 1 ms RTT": True, "Ensemble, 5 ms RTT": False}


def test_handoff_bound_in_ms_round_trips_and_against_curator() -> None:
    results = ensemble_results(7.43e-3, 29.0e-3, 8.55e-3)
    note = next(
        n for n in report_ensemble.notes(results, {*handoff_targets(results)}) if "1 ms" in n
    )
    assert "the floor (commit + notification + read) is 6.11 ms" in note
    assert "the delete's commit and the notification 4.59 ms, plus one confirming read" in note
    assert "our hand-off is 7.43 ms, 1.32 ms above the floor, about 0.9 client round trips" in note
    assert "Curator's hand-off is 8.55 ms, 1.40× the same floor (2.44 ms, 1.6 round trips" in note
    assert "8 client processes, the members' 3 JVMs and the proxy process on 2 cores" in note


def test_section_7_shows_both_parts_the_sum_and_the_ratio_over_it() -> None:
    results = ensemble_results(7.43e-3, 29.0e-3, 8.55e-3)
    text = report_ensemble.section(results, plotted=False)
    assert "| 1 ms | 4.59 | 5.00 | 1.52 | 6.11 | 3.00 |" in text
    assert "| 1 ms | zklocks fair | 1.00 | 7.43 | 14.86 | 1.22× |" in text
    floor_line = report_ensemble.handoff_series(results)["floor"]
    assert [(rtt, round(ms, 2), round(p99, 2)) for rtt, ms, p99 in floor_line] == [
        (1.0, 6.11, 6.52),
        (5.0, 26.0, 11.0),
    ]
    assert not math.isnan(floor_line[0][1])
