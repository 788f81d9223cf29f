"""``zklocks run`` for cron jobs and for a lease lost near the command's exit: ``-q``,
``-E N`` (flock(1)'s conflict exit code), and which exit status and messages a loss
gives depending on when it happened. The real executable against a real ZooKeeper."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import uuid

import pytest
from kazoo.client import KazooClient
from test_cli_run import children, finish, read_line, zklocks

from helpers import wait_for_children, without_version_warning
from zklocks.server import ZooKeeperServer


@pytest.fixture
def path() -> str:
    return f"/cli-run-cron/{uuid.uuid4().hex[:10]}"


@pytest.fixture
def holder(zk_server: ZooKeeperServer, path: str) -> subprocess.Popen[str]:
    """Another run holding ``path`` until its stdin closes."""
    process = zklocks(
        zk_server.hosts,
        "run",
        path,
        "--identifier",
        "nightly-rollup",
        "--",
        "sh",
        "-c",
        "echo held; cat >/dev/null",
        stdin=subprocess.PIPE,
    )
    assert read_line(process) == "held"
    return process


def test_quiet_says_nothing_when_not_acquired_and_still_exits_75(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str, holder: subprocess.Popen[str]
) -> None:
    # (the test servers' release draws the library's known-issues warning: not -q's line)
    status, out, err = finish(zklocks(zk_server.hosts, "run", path, "-n", "-q", "--", "true"))
    assert (status, out, without_version_warning(err)) == (75, "", "")
    status, _, err = finish(
        zklocks(zk_server.hosts, "run", path, "--timeout", "0.2", "--quiet", "--", "true")
    )
    assert (status, without_version_warning(err)) == (75, "")
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "-n", "--", "true"))
    assert status == 75 and "nightly-rollup" in err  # without -q it is said, as before
    assert finish(holder)[0] == 0
    assert children(kazoo, path) == []


def test_conflict_exit_code_replaces_75_and_not_the_commands_own(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str, holder: subprocess.Popen[str]
) -> None:
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "-n", "-E", "3", "--", "true"))
    assert status == 3
    assert "not acquired (--non-blocking); held by nightly-rollup" in err
    status, _, _ = finish(
        zklocks(zk_server.hosts, "run", path, "--timeout", "0.2", "-q", "-E", "0", "--", "true")
    )
    assert status == 0
    assert finish(holder)[0] == 0
    # acquired: the command's own status, whatever -E says
    status, _, _ = finish(
        zklocks(zk_server.hosts, "run", path, "-E", "3", "--", "sh", "-c", "exit 5")
    )
    assert status == 5
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "-E", "256", "--", "true"))
    assert status == 2 and "256" in err
    assert children(kazoo, path) == []


def test_a_loss_while_the_command_runs_is_76_and_names_its_status_once_known(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'echo "$ZKLOCKS_NODE"; trap "exit 9" TERM; while :; do sleep 0.05; done'
    process = zklocks(zk_server.hosts, "run", path, "--", "sh", "-c", script)
    kazoo.delete(read_line(process))  # the lock is someone else's now
    status, _, err = finish(process)
    assert status == 76
    assert "while the command ran" in err and "stopping it with SIGTERM" in err
    assert "the command exited with status 9; exiting 76" in err
    assert children(kazoo, path) == []


def test_a_command_that_exited_while_we_were_paused_past_the_session_is_not_stopped(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    """The adopter's case: zklocks paused (SIGSTOP) past its session; meanwhile the lock
    went to someone else and the job, refused by its fence, exited 3. On SIGCONT the loss
    came first, so 76, but said once, with the job's status: no "stopping it with SIGTERM"
    of a command that had exited, and no "freed when our session ends" after "expired"."""
    script = 'echo "$$"; read line; exit 3'
    process = zklocks(
        zk_server.hosts,
        "run",
        path,
        "--session-timeout",
        "1",
        "--",
        "sh",
        "-c",
        script,
        stdin=subprocess.PIPE,
    )
    command = os.pidfd_open(int(read_line(process)))  # readable once the command exits
    os.kill(process.pid, signal.SIGSTOP)
    try:
        wait_for_children(kazoo, path, 0)  # the server expired the session: node gone
        assert process.stdin is not None
        process.stdin.write("go\n")  # the command reads it and exits 3, we still paused
        process.stdin.flush()
        exited, _, _ = select.select([command], [], [], 15)
        assert exited, "the command never exited"
    finally:
        os.kill(process.pid, signal.SIGCONT)
        os.close(command)
    status, _, err = finish(process)
    assert status == 76, err
    assert "while the command ran" in err and "it exited with status 3 meanwhile" in err
    assert "SIGTERM" not in err
    assert "freed when our session ends" not in err
    assert err.count("lost the lock") == 1
