"""contrib/: the Prometheus alert rules and the Grafana dashboard name only metrics we
export, and the rules pass promtool (``promtool check rules`` and their unit tests,
``promtool test rules``).

The exported names are asked of the code, not listed here: the library's from
``zklocks.metrics.enable()`` on a registry of the test's own, ``zklocks serve``'s from
its collector over a Board with one lock on it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

import zklocks.metrics
from zklocks._cli.serve_metrics import GAUGES, BoardCollector
from zklocks._cli.serve_state import Board, LockView
from zklocks._core import events

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
RULES = CONTRIB / "prometheus" / "zklocks-alerts.yml"
RULE_TESTS = CONTRIB / "prometheus" / "zklocks-alerts.test.yml"
DASHBOARD = CONTRIB / "grafana" / "zklocks.json"

# -- the names we export -------------------------------------------------------------------

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def _series_names(families: Iterator[Metric]) -> set[str]:
    """Every series name a family can have in the exposition (a counter ``x`` is
    ``x_total``, a histogram has ``_bucket``, ``_count`` and ``_sum``)."""
    return {
        family.name + suffix for family in families for suffix in _SUFFIXES.get(family.type, ("",))
    }


@pytest.fixture(scope="module")
def exported() -> set[str]:
    before = events.sink
    registry = CollectorRegistry()
    zklocks.metrics.enable(registry)
    try:
        library = _series_names(registry.collect())
    finally:
        zklocks.metrics.disable()
        events.sink = before
    joined = dt.datetime.now(tz=dt.UTC).isoformat()
    holder = {"kind": "election", "joined": joined, "token": 7, "identifier": "a"}
    state = {"holders": [holder], "waiters": [], "token": 7}
    board = Board({"/e": LockView("/e", "election", state)}, dt.datetime.now(tz=dt.UTC))
    member = [("127.0.0.1:2181", "3.8.0", "ZOOKEEPER-4785")]
    serve = _series_names(BoardCollector(lambda: board, lambda: True, lambda: member).collect())
    assert set(GAUGES) <= serve  # the collector makes every family it declares
    return library | serve


# -- the names an expression uses ---------------------------------------------------------

_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_CLAUSE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names or template variables."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings (label values)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\$\{?\w+\}?", "", text)  # Grafana and Prometheus template variables
    text = _CLAUSE.sub("", text)
    names = set()
    for found in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?", text):
        name, call = found.group(1), found.group(2)
        if call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names


def test_the_name_reader_finds_names_and_only_names() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (kind, le) (rate(zklocks_acquire_seconds_bucket"
        '{result="acquired", path=~"/a.*"}[$__rate_interval]))) > 1e3 and on (path) '
        "zklocks_lock_kind == bool 1 unless zklocks_nope offset 5m"
    )
    assert metric_names(expr) == {
        "zklocks_acquire_seconds_bucket",
        "zklocks_lock_kind",
        "zklocks_nope",
    }


# -- the files -----------------------------------------------------------------------------


def _rule_expressions() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())
    return [
        (rule.get("alert") or rule.get("record"), rule["expr"])
        for group in rules["groups"]
        for rule in group["rules"]
    ]


def _dashboard_expressions() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = []
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))  # inside a collapsed row
        found.extend((panel["title"], target["expr"]) for target in panel.get("targets", []))
    return found


def test_every_dashboard_expression_names_only_metrics_we_export(exported: set[str]) -> None:
    expressions = _dashboard_expressions()
    assert len(expressions) >= 10
    for title, expr in expressions:
        names = metric_names(expr)
        assert names, f"{title}: {expr} names no metric"
        assert names <= exported, f"{title}: {sorted(names - exported)} are not exported"


def test_the_dashboard_shows_both_sources(exported: set[str]) -> None:
    used = set().union(*(metric_names(expr) for _, expr in _dashboard_expressions()))
    for gauge in GAUGES:
        assert gauge in used, f"no panel shows {gauge}"
    assert {"zklocks_acquire_seconds_bucket", "zklocks_leases_lost_total"} <= used


def test_every_alert_names_only_metrics_we_export(exported: set[str]) -> None:
    rules = _rule_expressions()
    assert {name for name, _ in rules} >= {
        "ZklocksLockHeldTooLong",
        "ZklocksLeaseLossStorm",
        "ZklocksAcquireSlow",
        "ZklocksNoLeader",
    }
    for name, expr in rules:
        names = metric_names(expr)
        assert names and names <= exported, f"{name}: {sorted(names - exported)}"


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, (
        "promtool is missing: scripts/ensure-system-deps.sh prometheus installs it "
        "(Debian's `prometheus` package; `make test` runs that)"
    )
    return found


def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_the_rules_pass_their_promtool_unit_tests() -> None:
    done = subprocess.run(
        [_promtool(), "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
