"""``zklocks demo --pace``: each narrated step stays on screen long enough to be read.

Unpaced, the four scenarios are over in about 2 s: too fast to watch. On a terminal the
demo holds each step for a visible pace; piped (CI, a log file) or --plain it does not.
"""

from __future__ import annotations

import itertools
import re
import subprocess

from test_cli_run import ZKLOCKS

from zklocks._cli.demo import TERMINAL_PACE, resolve_pace
from zklocks.server import ZooKeeperServer

NARRATED = re.compile(r"^\s*(\d+\.\d\d)s  (.*)$")  # PlainScreen's "  0.52s  text"


def test_a_terminal_gets_a_visible_pace_and_a_pipe_none() -> None:
    assert TERMINAL_PACE >= 0.3
    assert resolve_pace(None, live=True) == TERMINAL_PACE
    assert resolve_pace(None, live=False) == 0.0
    assert resolve_pace(2.0, live=False) == 2.0
    assert resolve_pace(0.0, live=True) == 0.0


def play_fair(hosts: str, *pace: str) -> list[tuple[float, str]]:
    done = subprocess.run(
        [ZKLOCKS, "demo", "--hosts", hosts, "--scenario", "fair", "--plain", *pace],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    steps = [(float(m[1]), m[2]) for m in map(NARRATED.match, done.stdout.splitlines()) if m]
    assert len(steps) >= 5, done.stdout
    return steps


def test_each_step_stays_on_screen_for_the_pace(zk_server: ZooKeeperServer) -> None:
    pace = 0.3
    # the scenario's own steps; a worker's "woke up" report is printed as it happens
    steps = [
        t for t, text in play_fair(zk_server.hosts, "--pace", str(pace)) if "woke up" not in text
    ]
    gaps = [later - earlier for earlier, later in itertools.pairwise(steps)]
    assert min(gaps) >= pace - 0.01, gaps


def test_piped_the_demo_is_not_paced(zk_server: ZooKeeperServer) -> None:
    steps = play_fair(zk_server.hosts)
    assert steps[-1][0] < len(steps) * TERMINAL_PACE  # faster than any paced run
