"""CI's smoke of ``make bench``: the benchmark still runs end to end, writes its table and
plots, and what it *counts* is sane. Benchmarks are not tests: nothing here looks at how
fast anything was (no timing assertion, ever); only at counts that do not depend on load.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ZK_LIBS = ("zklocks", "zklocks-unfair", "kazoo")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    out = tmp_path_factory.mktemp("bench")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # The Curator row needs Curator's jars and a JDK; on a fresh machine this installs them
    # (apt) before the run, so the run's own time limit is the benchmark's alone. The run
    # calls the same script again (then a no-op), as `make bench` does.
    subprocess.run([str(ROOT / "scripts" / "ensure-curator.sh")], check=True, timeout=600)
    run = subprocess.run(  # "all": the ensemble scenario too, at one round-trip time
        [sys.executable, "-m", "benchmarks.run", "--smoke", "--only", "all", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=340,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"
    raw = json.loads((out / "raw.json").read_text())
    return out, raw, run.stdout


def _ok(record: dict[str, Any], what: str) -> dict[str, Any]:
    assert "error" not in record, f"{what} failed: {record['error']}"
    return record


pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # apt may run first: see smoke()


def test_writes_the_table_and_prints_the_headline(smoke: tuple[Path, dict[str, Any], str]) -> None:
    out, raw, stdout = smoke
    text = (out / "latest.md").read_text()
    for heading in (
        "## Targets",
        "## 1. Uncontended",
        "## 2. One hot lock",
        "## 3. Read/write mix",
        "waiters queued on one lock",
        "## 4b. The herd effect",
        "## 5. Many locks",
        "## 6. Where the time goes",
        "## 7. A 3-member ensemble, every link delayed",
    ):
        assert heading in text
    assert "| target | measured | goal | verdict |" in stdout
    assert f"{raw['meta']['nproc']} cores" in text and "fsync **on**" in text
    if importlib.util.find_spec("matplotlib") is not None:
        pngs = (
            "uncontended.png",
            "hot_lock.png",
            "herd.png",
            "breakdown.png",
            "ensemble_handoff.png",
        )
        for png in pngs:
            assert (out / png).stat().st_size > 1000, png


def test_counts_requests_per_uncontended_cycle(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, raw, _ = smoke
    for lib in ZK_LIBS:
        record = _ok(raw["uncontended"][lib], f"uncontended {lib}")
        requests = record["rounds"][0]["requests"]
        assert 1.5 <= requests <= 8, (lib, requests)  # counted, whole requests per cycle
        ops = record["round_trips"]["ops"]  # the proxy names each request
        # zklocks releases with one multi (delete + the lock directory's clean-release
        # mark, for lock-delay: docs/locks.md); the peers with a delete
        release = "multi" if lib == "zklocks" else "delete"
        assert ops.get(release) == 1, (lib, ops)
        assert lib != "zklocks" or "delete" not in ops, ops
    kazoo = raw["uncontended"]["kazoo"]["rounds"][0]["requests"]
    assert kazoo == pytest.approx(4, abs=0.5)  # create, getChildren x2, delete
    for lib in ("tooz", "redis"):  # a peer may be missing, but then it says so
        record = raw["uncontended"][lib]
        assert record.get("rounds") or record["error"].startswith("missing")


def test_curator_row_counts_the_same_three_requests(
    smoke: tuple[Path, dict[str, Any], str],
) -> None:
    """The Java reference ran (the smoke installs Curator and a JDK when missing, and
    compiles the worker) and was measured like the others: by the server's counters."""
    _, raw, _ = smoke
    assert raw["meta"]["curator"]["curator"].startswith("5.")
    record = _ok(raw["uncontended"]["curator"], "uncontended curator")
    assert record["rounds"][0]["requests"] == pytest.approx(3, abs=0.5)  # create, list, delete
    ops = record["round_trips"]["ops"]
    assert ops.get("delete") == 1 and sum(ops.values()) == pytest.approx(3), ops
    for by_lib in raw["hot"].values():
        figures = _ok(by_lib["curator"], "hot curator")["rounds"][0]
        assert all(count > 0 for count in figures["per_process"])  # every JVM acquired


def test_contention_and_queue_figures_are_sane(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, raw, _ = smoke
    for scenario in ("rw", "semaphore"):
        for lib in ("zklocks", "kazoo"):
            figures = _ok(raw[scenario][lib], f"{scenario} {lib}")["rounds"][0]
            assert figures["requests"] >= 1 and not math.isnan(figures["requests"])
    for by_lib in raw["hot"].values():
        for lib in ("zklocks", "kazoo"):
            figures = _ok(by_lib[lib], f"hot {lib}")["rounds"][0]
            assert all(count > 0 for count in figures["per_process"])  # nobody starved
    for lib in ("zklocks", "kazoo"):
        drained = _ok(raw["drain"][lib], f"drain {lib}")["rounds"][0]
        assert drained["wakeups_per_handoff"] == pytest.approx(1.0)  # no herd in a queue


def test_herd_counts_wakeups(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, raw, _ = smoke
    herd = raw["herd"]
    (waiters,) = herd["zklocks"]["points"]
    ours = _ok(herd["zklocks"]["points"][waiters], "herd zklocks")
    assert ours["counting"] and ours["wakeups"] == 1
    naive = _ok(herd["one-node"]["points"][waiters], "herd one-node")
    assert naive["wakeups"] == int(waiters)  # everyone woke: the herd the seeds describe


def test_profile_and_many_locks(smoke: tuple[Path, dict[str, Any], str]) -> None:
    _, raw, _ = smoke
    profile = raw["profile"]
    assert {"zklocks", "kazoo"} <= set(profile["profiles"])
    assert profile["thread_cpu"]["zklocks"]["main"] >= 0
    for variant in ("zklocks threads", "kazoo threads"):
        figures = _ok(raw["many"][variant], f"many {variant}")["rounds"][0]
        assert figures["requests_per_cycle"] >= 1


def test_ensemble_runs_every_library_over_delayed_links(
    smoke: tuple[Path, dict[str, Any], str],
) -> None:
    """Scenario 7: a 3-member ensemble, every link behind a proxy delaying both ways, the
    libraries spread over the members, and the raw-wire floor on the same links."""
    _, raw, _ = smoke
    ensemble = _ok(raw["ensemble"], "ensemble")
    assert ensemble["links"] == 3 + 3 * 2 * 2  # a client link per member; quorum + election
    (at,) = ensemble["rtts"].values()  # --smoke: one round-trip time
    rtt = at["rtt"]
    floor = at["floor"]
    # Each direction waits at least half its delay (the proxy may aim early by no more),
    # so no read through a client link comes back in under half the round trip.
    assert min(floor["samples"]["rtt"]) >= rtt / 2
    assert len(floor["samples"]["handoff"]) == raw["meta"]["params"]["ens_floor_handoffs"]
    expected = {"zklocks": 3, "curator": 3, "kazoo": 4}  # counted on all three members
    for lib, requests in expected.items():
        rounds = _ok(at["uncontended"][lib], f"ensemble uncontended {lib}")["rounds"]
        assert rounds[0]["requests"] == pytest.approx(requests, abs=0.5), lib
        figures = _ok(at["hot"][lib], f"ensemble hot {lib}")["rounds"][0]
        assert len(figures["per_process"]) == ensemble["hot_procs"]
        assert all(count > 0 for count in figures["per_process"]), lib  # on every member
    for lib in ("zklocks", "kazoo"):
        drained = _ok(at["drain"][lib], f"ensemble drain {lib}")["rounds"][0]
        assert drained["wakeups_per_handoff"] == pytest.approx(1.0)
