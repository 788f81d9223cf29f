"""The nemesis runner on real ensembles (``python -m nemesis run``, as a user runs it).

A clean run must find nothing; every planted bug must be found (exit 1) within a
2-minute run, by the check meant to find it. The lease plants need
``zklocks._transport.lease_rule.plant``: if it is missing these tests fail, they are
never skipped. Each run must leave no client process behind. The long runs are
``make nemesis``, not here.

The guarded-set workload runs twice on one seed, 45 s of faults each: guarded (the
ZooKeeper transaction, PostgresFence, RedisFence; a PostgreSQL cluster and a
redis-server of the run's own) it must lose, duplicate or take from a stale holder no
element, and its guards must have refused a stale holder at least once (the case was
met); with the ``unguarded`` plant, the same read-modify-writes must lose elements.

CI cost: the clean lock runs (sample timing, with a 2 s lock-delay, and stock timing) are
60 s of faults each plus start and stop, the two guarded-set
runs 45 s each plus start and stop (about 80 s each on a loaded 2-core machine); the
plant runs end at their first violation (``--stop-on-violation``), typically within 10
to 60 s each.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nemesis import plants

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _clients_of(runner: int) -> list[int]:
    """Live client processes started by the runner ``runner`` (their spec names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "nemesis.client" in args and any(f'"parent": {runner},' in a for a in args):
            found.append(int(entry.name))
    return found


def _assert_stores_stopped(out: Path) -> None:
    """The guarded-set workload's PostgreSQL and redis-server are gone with the run."""
    for line in (out / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("ev") != "stores":
            continue
        assert not Path(f"/proc/{event['redis_pid']}").exists(), "redis-server outlived the run"
        for port in (event["pg_port"], event["redis_port"]):
            with socket.socket() as sock, contextlib.suppress(ConnectionRefusedError):
                sock.connect(("127.0.0.1", port))
                pytest.fail(f"something still serves on port {port} after the run")


def nemesis(out: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run ``python -m nemesis run`` to the end; its exit status, summary and stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "nemesis", "run", "--members", "3", "--out", str(out)]
    process = subprocess.Popen(
        [*command, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        stdout, _ = process.communicate(timeout=270)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert _clients_of(process.pid) == [], "client processes outlived the run"
    _assert_stores_stopped(out)
    summary = json.loads((out / "summary.json").read_text())
    return process.returncode, summary, stdout


@pytest.mark.parametrize("timing", ["sample", "stock"])
def test_a_clean_run_finds_no_violation(tmp_path: Path, timing: str) -> None:
    """``stock``: members as ZooKeeper ships them (``srvr`` alone, default session bounds),
    the clients not told tickTime (they learn a bound from the session bounds).
    ``sample`` runs with a lock-delay (issue 35), and the lock-delay rule must have been
    applied: a holder's session expired with a successor queued behind it."""
    delay = ("--lock-delay", "2") if timing == "sample" else ()
    status, summary, stdout = nemesis(
        tmp_path, "--minutes", "1", "--workload", "lock", "--seed", "21", "--timing", timing,
        *delay,
    )  # fmt: skip
    assert status == 0, stdout
    assert summary["verdict"] == "clean" and summary["violations"] == {}
    stats = summary["stats"]
    # it did something worth judging: grants, and the lease rule's case (a follower
    # stalled under a holder, whose lease said lost)
    assert stats["granted"] >= 10, stats
    assert stats["stalls_with_holder"] >= 1, stats
    assert stats["leases_lost"] >= 1, stats
    assert stats["client_errors"] == 0, stats
    if delay:
        assert stats["abnormal_losses"] >= 1 and stats["lock_delay_cases"] >= 1, stats
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Verdict" in (tmp_path / "report.md").read_text()
    assert not (tmp_path / "window.png").exists()


@pytest.mark.parametrize(
    ("plant", "workload", "caught_by"),
    [
        ("early-grant", "rwlock", "exclusion"),
        ("lag-rule", "lock", "exclusion"),
        ("trust-ping", "lock", "exclusion"),
        ("no-lock-delay", "lock", "lock-delay"),
    ],
)
def test_a_planted_bug_is_caught_within_two_minutes(
    tmp_path: Path, plant: str, workload: str, caught_by: str
) -> None:
    """``no-lock-delay`` asks for a delay of twice the session timeout (8 s), which a
    successor granted on the expiry of its holder's session does not wait out."""
    if plant in plants.LEASE_PLANTS:
        assert plants.lease_plant_available(), (
            f"{plants.LEASE_RULE_MODULE}.plant is missing: the {plant!r} plant cannot be run"
        )
    status, summary, stdout = nemesis(
        tmp_path,
        *("--minutes", "2", "--workload", workload, "--seed", "5", "--plant", plant),
        *(("--lock-delay", "8") if plant == "no-lock-delay" else ()),
        "--stop-on-violation",
    )
    assert status == 1, stdout
    assert summary["verdict"] == "violation"
    assert summary["violations"].get(caught_by, 0) >= 1, summary["violations"]
    assert summary["stats"]["caught_after"] <= 120, summary["stats"]
    smallest = summary["smallest"]
    assert smallest is not None and smallest["length"] >= 0
    assert (tmp_path / "window.png").read_bytes()[:4] == b"\x89PNG"
    assert "smallest failing window" in stdout


SET_SEED = "5"  # the guarded and the unguarded run: one seed, one fault schedule


def test_the_guarded_set_loses_no_element(tmp_path: Path) -> None:
    status, summary, stdout = nemesis(
        tmp_path, "--minutes", "0.75", "--workload", "guarded-set", "--seed", SET_SEED
    )
    assert status == 0, stdout
    assert summary["verdict"] == "clean" and summary["violations"] == {}, stdout
    stats = summary["stats"]
    # every store was read at the end and holds what was added to it
    assert set(stats["final_sets"]) == {"zk", "pg", "redis"}, stats
    assert min(stats["final_sets"].values()) >= 20, stats
    # the case the guards are for was met: a holder paused past its session was refused
    assert stats["faults"].get("pause-holder", 0) >= 1, stats
    assert stats["writes_refused_stale"] >= 1, stats
    assert stats["client_errors"] == 0, stats
    assert any('"ev":"stores"' in line for line in (tmp_path / "history.jsonl").open())


def test_the_unguarded_set_loses_elements_on_the_same_seed(tmp_path: Path) -> None:
    status, summary, stdout = nemesis(
        tmp_path,
        *("--minutes", "0.75", "--workload", "guarded-set", "--seed", SET_SEED),
        *("--plant", "unguarded"),
    )
    assert status == 1, stdout
    assert summary["violations"].get("set-lost", 0) >= 1, summary["violations"]
    assert summary["stats"]["writes_refused_stale"] == 0, summary["stats"]
