"""``zklocks elect`` and ``zklocks leader`` as a user runs them, on a real ZooKeeper."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient
from test_cli_run import children, finish, read_line, wait_for_children, zklocks

from zklocks import Client
from zklocks.server import ZooKeeperServer


@pytest.fixture
def path() -> str:
    return f"/cli-elect/{uuid.uuid4().hex[:10]}"


class Lines:
    """A process's stdout lines through a reader thread (lines may arrive together)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [self.lines.put(x) for x in stdout], daemon=True).start()

    def next_leader(self) -> Any:
        return json.loads(self.lines.get(timeout=15))["leader"]


def test_elect_runs_while_leader_and_leader_follows_the_succession(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    hosts = zk_server.hosts
    watcher = zklocks(hosts, "leader", path, "--watch", "--json")
    watched = Lines(watcher)
    assert watched.next_leader() is None
    script = 'echo "$ZKLOCKS_TOKEN $ZKLOCKS_NODE"; read _; exit 3'
    first = zklocks(
        hosts, "elect", path, "--identifier", "first", "--", "sh", "-c", script,
        stdin=subprocess.PIPE,
    )  # fmt: skip
    token, node = read_line(first).split()
    assert node.startswith(f"{path}/elect-")
    stat = kazoo.exists(node)
    assert stat is not None and stat.czxid == int(token)
    shown = watched.next_leader()
    assert shown["identifier"] == "first" and shown["token"] == int(token)
    status, out, err = finish(zklocks(hosts, "leader", path, "--json"))
    assert status == 0, err
    assert json.loads(out)["leader"]["node"] == node
    status, out, _ = finish(zklocks(hosts, "leader", path))
    assert status == 0 and out.startswith("first (pid ")
    status, out, _ = finish(zklocks(hosts, "ls", path, "--json"))
    assert status == 0 and [entry["kind"] for entry in json.loads(out)] == ["election"]

    second = zklocks(
        hosts, "elect", path, "--identifier", "second", "--",
        "sh", "-c", "echo $ZKLOCKS_TOKEN; read _; exit 0",
        stdin=subprocess.PIPE,
    )  # fmt: skip
    wait_for_children(kazoo, path, 2)
    status, _, err = finish(first)  # closes its stdin: the command exits 3, we resign
    assert status == 3, err
    assert watched.next_leader()["identifier"] == "second"
    status, out, err = finish(second)
    assert status == 0, err
    assert int(out) > int(token)
    assert watched.next_leader() is None
    watcher.send_signal(signal.SIGTERM)
    assert watcher.wait(15) == 0
    assert children(kazoo, path) == []


def test_elect_gives_up_after_its_timeout_with_75(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    leader = zklocks(
        zk_server.hosts, "elect", path, "--identifier", "boss", "--",
        "sh", "-c", "echo up; read _; exit 0",
        stdin=subprocess.PIPE,
    )  # fmt: skip
    assert read_line(leader) == "up"
    status, _, err = finish(
        zklocks(zk_server.hosts, "elect", path, "--timeout", "0.3", "--", "true")
    )
    assert status == 75
    assert "boss" in err
    status, _, _ = finish(leader)
    assert status == 0
    assert children(kazoo, path) == []
    status, _, err = finish(zklocks(zk_server.hosts, "elect", path))
    assert status == 2 and "missing the command" in err


def test_paused_leader_stops_its_command_and_exits_76(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    """SIGSTOP `zklocks elect` past its session timeout: on SIGCONT it learns the term
    is lost and stops the command, exactly as `run` does."""
    script = 'echo "$ZKLOCKS_NODE"; trap "echo got TERM; exit 9" TERM; while :; do sleep 0.05; done'
    process = zklocks(
        zk_server.hosts, "elect", path, "--session-timeout", "1", "--", "sh", "-c", script
    )
    read_line(process)
    os.kill(process.pid, signal.SIGSTOP)
    try:
        wait_for_children(kazoo, path, 0)  # the server expired the session: node gone
    finally:
        os.kill(process.pid, signal.SIGCONT)
    status, out, err = finish(process)
    assert status == 76
    assert "got TERM" in out
    assert f"lost leadership of {path}" in err and "the lock" not in err


def test_leader_of_a_missing_path_or_a_lock_exits_66(zk_server: ZooKeeperServer, path: str) -> None:
    status, out, err = finish(zklocks(zk_server.hosts, "leader", f"{path}/typo"))
    assert (status, out) == (66, ""), err
    assert f"not an election: {path}/typo does not exist" in err
    with Client(zk_server.hosts) as client, client.lock(f"{path}/orders"):
        status, out, err = finish(zklocks(zk_server.hosts, "leader", f"{path}/orders", "--json"))
    assert (status, out) == (66, ""), err
    assert f"not an election: {path}/orders holds a lock" in err
