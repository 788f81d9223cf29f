"""``zklocks status`` and ``zklocks ls``: the real executable, real contenders, real ZooKeeper.

The contenders are ``zklocks run`` processes; the terminal test runs ``status --watch``
in a pseudo-terminal and checks that it redraws when the queue changes.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

import zklocks
from helpers import ctrl_c_restored, wait_for_children
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))
HOLD = "echo held; cat >/dev/null"  # holds until its stdin closes


@pytest.fixture
def path() -> str:
    return f"/cli-status/{uuid.uuid4().hex[:10]}"


@pytest.fixture
def contenders(zk_server: ZooKeeperServer) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts ``zklocks run PATH ... -- sh -c HOLD`` processes; lets them all go at the end."""
    started: list[subprocess.Popen[str]] = []

    def start(path: str, *options: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [ZKLOCKS, "run", path, *options, "--", "sh", "-c", HOLD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ZKLOCKS_HOSTS": zk_server.hosts},
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.communicate(timeout=30)


def read_line(process: subprocess.Popen[str], timeout: float = 15.0) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return process.stdout.readline().rstrip("\n")


def status_json(hosts: str, *args: str) -> Any:
    result = subprocess.run(
        [ZKLOCKS, *args, "--json", "--hosts", hosts], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_status_json_shows_the_holder_and_two_waiters_in_line(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    path: str,
    contenders: Callable[..., subprocess.Popen[str]],
) -> None:
    holder = contenders(path, "--identifier", "holder")
    assert read_line(holder) == "held"
    first = contenders(path, "--identifier", "first-waiter")
    wait_for_children(kazoo, path, 2)
    second = contenders(path, "--identifier", "second-waiter")
    names = wait_for_children(kazoo, path, 3)

    state = status_json(zk_server.hosts, "status", path)

    assert state["path"] == path
    assert [h["identifier"] for h in state["holders"]] == ["holder"]
    assert [w["identifier"] for w in state["waiters"]] == ["first-waiter", "second-waiter"]
    everyone = state["holders"] + state["waiters"]
    assert [e["pid"] for e in everyone] == [holder.pid, first.pid, second.pid]
    assert [e["position"] for e in everyone] == [1, 2, 3]
    assert {e["node"].rsplit("/", 1)[1] for e in everyone} == set(names)
    assert all(e["kind"] == "lock" and e["host"] for e in everyone)
    # the current fencing token is the holder node's creation zxid
    holder_node = state["holders"][0]["node"]
    assert state["token"] == kazoo.exists(holder_node).czxid == state["holders"][0]["token"]
    # the watch chain: each waiter watches only the node just before it
    assert state["holders"][0]["waits_for"] == []
    assert state["waiters"][0]["waits_for"] == [holder_node]
    assert state["waiters"][1]["waits_for"] == [state["waiters"][0]["node"]]
    # how long each has waited: the second joined last
    assert state["waiters"][0]["age_s"] >= state["waiters"][1]["age_s"] >= 0


def test_status_of_a_free_lock_and_bad_path(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    kazoo.create(path, makepath=True)  # a lock directory nobody holds or waits for
    state = status_json(zk_server.hosts, "status", path)
    assert (state["holders"], state["waiters"], state["token"]) == ([], [], None)
    result = subprocess.run(
        [ZKLOCKS, "status", "no-slash", "--hosts", zk_server.hosts], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "must be absolute" in result.stderr


def test_status_of_a_missing_path_or_an_election_exits_66_and_names_kinds_as_ls_does(
    zk_server: ZooKeeperServer, path: str
) -> None:
    def status(target: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ZKLOCKS, "status", target, *args, "--hosts", zk_server.hosts],
            capture_output=True,
            text=True,
            timeout=30,
        )

    for args in ((), ("--json",)):
        result = status(f"{path}/typo", *args)
        assert result.returncode == 66, result.stderr
        assert f"no such lock: {path}/typo does not exist" in result.stderr
        assert result.stdout == ""
    with zklocks.Client(zk_server.hosts) as client:
        with client.election(f"{path}/election", identifier="boss").campaign():
            result = status(f"{path}/election")
            assert result.returncode == 66, result.stderr
            assert f"not a lock: {path}/election is an election" in result.stderr
        with client.semaphore(f"{path}/api", permits=3).acquire():
            (holder,) = status_json(zk_server.hosts, "status", f"{path}/api")["holders"]
            listed = status_json(zk_server.hosts, "ls", path)
            table = status(f"{path}/api").stdout.splitlines()
    assert holder["kind"] == "semaphore"
    assert [entry["kind"] for entry in listed] == ["semaphore(3)"]
    assert re.search(r"^1\s+holding\s+semaphore\s", table[2]), table


def test_status_table(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    path: str,
    contenders: Callable[..., subprocess.Popen[str]],
) -> None:
    holder = contenders(path, "--identifier", "nightly-backup")
    assert read_line(holder) == "held"
    contenders(path, "--identifier", "report")
    wait_for_children(kazoo, path, 2)
    result = subprocess.run(
        [ZKLOCKS, "status", path, "--hosts", zk_server.hosts], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}  1 holding, 1 waiting  fencing token ")
    assert re.search(r"^1\s+holding\s+lock\s+nightly-backup\s", lines[2]), lines
    assert re.search(r"^2\s+waiting\s+lock\s+report\s.*#1\s*$", lines[3]), lines


def test_ls_lists_every_lock_under_a_root(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    path: str,
    contenders: Callable[..., subprocess.Popen[str]],
) -> None:
    orders, reports = f"{path}/orders", f"{path}/deep/reports"
    holder = contenders(orders)
    assert read_line(holder) == "held"
    contenders(orders)
    reader = contenders(reports, "--read")
    assert read_line(reader) == "held"
    wait_for_children(kazoo, orders, 2)
    listed = status_json(zk_server.hosts, "ls", path)
    assert listed == [
        {
            "path": f"{path}/deep/reports",
            "kind": "read/write",
            "holders": 1,
            "waiters": 0,
            "tokens": listed[0]["tokens"],
        },
        {
            "path": orders,
            "kind": "lock",
            "holders": 1,
            "waiters": 1,
            "tokens": [status_json(zk_server.hosts, "status", orders)["token"]],
        },
    ]
    assert len(listed[0]["tokens"]) == 1


def test_status_watch_json_prints_a_document_per_change(
    zk_server: ZooKeeperServer, path: str, contenders: Callable[..., subprocess.Popen[str]]
) -> None:
    watch = subprocess.Popen(
        [ZKLOCKS, "status", path, "--watch", "--json", "--hosts", zk_server.hosts],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert json.loads(read_line(watch))["holders"] == []
        holder = contenders(path, "--identifier", "watched")
        assert read_line(holder) == "held"
        # the next document is the holder's: creating the lock path changed no queue
        state = json.loads(read_line(watch))
        assert [h["identifier"] for h in state["holders"]] == ["watched"]
        holder.communicate(timeout=30)  # release
        assert json.loads(read_line(watch))["holders"] == []
    finally:
        watch.terminate()
        watch.communicate(timeout=15)


# -- in a terminal ---------------------------------------------------------------------------


class Terminal:
    """A process on a pseudo-terminal of a fixed size; its screen output, raw."""

    def __init__(self, args: list[str], columns: int = 120, rows: int = 40) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns)}
        env.pop("NO_COLOR", None)
        with ctrl_c_restored():  # close() sends Ctrl-C: not ignored, whatever this run ignores
            self.process = subprocess.Popen(
                args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
            )
        os.close(slave)
        self.master = master
        self.output = b""

    def wait_for(self, pattern: str, timeout: float = 30.0) -> str:
        """Read until the text (ANSI codes removed) after what was seen so far matches."""
        deadline = time.monotonic() + timeout
        start = len(self.text())
        while not re.search(pattern, self.text()[start:]):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{pattern!r} not on screen; got: {self.text()[-2000:]}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the process closed the terminal
                    chunk = b""
                assert chunk, f"{pattern!r} never came; got: {self.text()[-2000:]}"
                self.output += chunk
        return self.text()

    def text(self) -> str:
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.output.decode(errors="replace"))

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            while select.select([self.master], [], [], 5)[0]:
                chunk = os.read(self.master, 65536)
                if not chunk:
                    break
                self.output += chunk
        except OSError:
            pass
        os.close(self.master)
        return self.process.wait(timeout=15)


def test_status_watch_redraws_in_a_terminal_on_every_change(
    zk_server: ZooKeeperServer, path: str, contenders: Callable[..., subprocess.Popen[str]]
) -> None:
    terminal = Terminal([ZKLOCKS, "status", path, "--watch", "--hosts", zk_server.hosts])
    try:
        terminal.wait_for("nobody holds or waits")
        holder = contenders(path, "--identifier", "first-holder")
        terminal.wait_for(r"1 holding, 0 waiting[\s\S]*holding\s+lock\s+first-holder")
        contenders(path, "--identifier", "next-in-line")
        screen = terminal.wait_for(r"1 holding, 1 waiting[\s\S]*waiting\s+lock\s+next-in-line")
        assert "#1" in screen  # the waiter watches the holder
        holder.communicate(timeout=30)  # the first holder lets go: the waiter takes over
        terminal.wait_for(r"1 holding, 0 waiting[\s\S]*holding\s+lock\s+next-in-line")
        # a live redraw, not a scroll of new tables: the cursor moves up over the old one
        assert re.search(rb"\x1b\[\d*A", terminal.output)
    finally:
        status = terminal.close()
    assert status == 0  # Ctrl-C is the way out of --watch
    assert b"\x1b[?25h" in terminal.output  # and the cursor is shown again
