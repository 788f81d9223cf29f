"""The commands agree with each other: what a user learnt on one works on the next.

``elect`` takes ``run``'s ``-c`` and ``-n``; ``leader --json`` and ``status --json`` write
times the same way. On a real ZooKeeper, through the installed ``zklocks`` command.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest
from test_cli_run import finish, read_line, zklocks

from zklocks import Client
from zklocks.server import ZooKeeperServer

# UTC to the millisecond, as ZooKeeper keeps node times
JSON_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")


@pytest.fixture
def path() -> str:
    return f"/cli-parity/{uuid.uuid4().hex[:10]}"


def test_elect_runs_shell_text_with_dash_c(zk_server: ZooKeeperServer, path: str) -> None:
    status, out, err = finish(
        zklocks(zk_server.hosts, "elect", path, "-c", 'echo "leading at $ZKLOCKS_PATH"')
    )
    assert (status, out) == (0, f"leading at {path}\n"), err


def test_elect_dash_c_and_a_command_together_is_a_usage_error(
    zk_server: ZooKeeperServer, path: str
) -> None:
    status, _, err = finish(zklocks(zk_server.hosts, "elect", path, "-c", "true", "--", "true"))
    assert status == 2 and "either -c TEXT or '-- COMMAND'" in err


def test_elect_dash_n_gives_up_at_once_when_another_leads(
    zk_server: ZooKeeperServer, path: str
) -> None:
    with Client(zk_server.hosts) as client:
        client.election(path, identifier="node-a").campaign()
        status, out, err = finish(zklocks(zk_server.hosts, "elect", path, "-n", "--", "true"))
        assert status == 75, (out, err)
        assert "node-a" in err  # says who leads
    status, out, err = finish(zklocks(zk_server.hosts, "elect", path, "-n", "-c", "echo led"))
    assert (status, out) == (0, "led\n"), err


def test_elect_dash_n_with_a_timeout_is_a_usage_error(
    zk_server: ZooKeeperServer, path: str
) -> None:
    status, _, err = finish(
        zklocks(zk_server.hosts, "elect", path, "-n", "--timeout", "5", "--", "true")
    )
    assert status == 2 and "exclude each other" in err


def test_leader_and_status_json_write_times_alike(zk_server: ZooKeeperServer, path: str) -> None:
    election, lock = f"{path}/election", f"{path}/lock"
    holder = zklocks(zk_server.hosts, "run", lock, "--", "sh", "-c", "echo held; read _",
                     stdin=subprocess.PIPE)  # fmt: skip
    assert read_line(holder) == "held"
    with Client(zk_server.hosts) as client:
        client.election(election, identifier="node-a").campaign()
        _, leader_out, leader_err = finish(zklocks(zk_server.hosts, "leader", election, "--json"))
        _, status_out, status_err = finish(zklocks(zk_server.hosts, "status", lock, "--json"))
    finish(holder)
    led, held = json.loads(leader_out), json.loads(status_out)
    times = {
        "leader at": led["at"],
        "leader candidate_since": led["leader"]["candidate_since"],
        "status at": held["at"],
        "status joined": held["holders"][0]["joined"],
    }
    assert {name: t for name, t in times.items() if not JSON_TIME.match(t)} == {}, (
        leader_err,
        status_err,
    )


def _lines_without_numbers(text: str) -> list[str]:
    """stderr lines with times, tokens, session ids and node names made alike."""
    return [
        re.sub(r"[0-9a-f]{32}|0x[0-9a-f]+|\d+(\.\d+)?", "N", line) for line in text.splitlines()
    ]


@pytest.mark.parametrize("command", ["run", "elect"])
def test_dash_v_means_one_thing_before_or_after_the_command(
    zk_server: ZooKeeperServer, path: str, command: str
) -> None:
    """``zklocks -v run`` and ``zklocks run -v`` print the same: the command's own notes and
    the library's lock events (before, the first printed only the library's events and
    the second only the command's notes)."""
    status, _, before = finish(zklocks(zk_server.hosts, "-v", command, path, "--", "true"))
    assert status == 0, before
    status, _, after = finish(zklocks(zk_server.hosts, command, "-v", path, "--", "true"))
    assert status == 0, after
    assert _lines_without_numbers(before) == _lines_without_numbers(after)
    assert "granted" in before and ("acquired" in before or "elected" in before), before
