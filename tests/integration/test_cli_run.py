"""``zklocks run`` as a user runs it: the real executable against a real ZooKeeper.

Every test checks with an independent kazoo client that no node of ours is left
behind. Waits are on events (output lines, kazoo child watches) with deadlines.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from helpers import ctrl_c_restored, ignoring
from helpers import wait_for_children as wait_for_children  # test_cli_elect, _admin
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))


@pytest.fixture
def path() -> str:
    return f"/cli-run/{uuid.uuid4().hex[:10]}"


def zklocks(hosts: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    """``zklocks *args`` started as from a terminal (SIGINT not ignored, whatever this run
    was started with: the tests send it Ctrl-C)."""
    env = {**os.environ, "ZKLOCKS_HOSTS": hosts}
    with ctrl_c_restored():
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            [ZKLOCKS, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            **kwargs,
        )


def read_line(process: subprocess.Popen[str], timeout: float = 15.0) -> str:
    """The next stdout line, failing at the deadline instead of hanging."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return process.stdout.readline().rstrip("\n")


def children(kazoo: KazooClient, path: str) -> list[str]:
    if kazoo.exists(path) is None:
        return []
    return list(kazoo.get_children(path))


def finish(process: subprocess.Popen[str], timeout: float = 30.0) -> tuple[int, str, str]:
    """Close its stdin (a holder waiting on `read` lets go), wait, and collect."""
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


# -- exit statuses and the environment -----------------------------------------------------


def test_runs_the_command_with_token_and_node_and_exits_with_its_status(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'echo "$ZKLOCKS_TOKEN $ZKLOCKS_NODE $ZKLOCKS_PATH $1"; read _; exit 7'
    process = zklocks(
        zk_server.hosts,
        "run",
        path,
        "--",
        "sh",
        "-c",
        script,
        "sh",
        "arg 1",
        stdin=subprocess.PIPE,
    )
    token, node, lock_path, arg = read_line(process).split(" ", 3)
    assert (lock_path, arg) == (path, "arg 1")
    assert node.startswith(f"{path}/lock-")
    stat = kazoo.exists(node)
    assert stat is not None and stat.czxid == int(token)  # the fencing token: creation zxid
    assert stat.ephemeralOwner != 0
    status, _, err = finish(process)
    assert status == 7, err
    assert children(kazoo, path) == []


def test_exit_zero_and_tokens_rise_across_holders(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    tokens = []
    for _ in range(2):
        status, out, err = finish(
            zklocks(zk_server.hosts, "run", path, "--", "sh", "-c", "echo $ZKLOCKS_TOKEN")
        )
        assert status == 0, err
        tokens.append(int(out))
    assert tokens[0] < tokens[1]
    assert children(kazoo, path) == []


@pytest.mark.parametrize(
    ("shared", "excluded"),
    [(["--semaphore", "2"], ["--semaphore", "2"]), (["--read"], ["--write"])],
    ids=["semaphore", "read-write"],
)
def test_shared_sides_run_together_and_exclude_the_rest(
    zk_server: ZooKeeperServer,
    kazoo: KazooClient,
    path: str,
    shared: list[str],
    excluded: list[str],
) -> None:
    holders = [
        zklocks(
            zk_server.hosts,
            "run",
            path,
            *shared,
            "--",
            "sh",
            "-c",
            "echo held; cat >/dev/null",
            stdin=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    assert [read_line(holder) for holder in holders] == ["held", "held"]  # both at once
    status, _, _ = finish(zklocks(zk_server.hosts, "run", path, *excluded, "-n", "--", "true"))
    assert status == 75
    for holder in holders:
        assert finish(holder)[0] == 0
    assert children(kazoo, path) == []


def test_exit_75_when_not_acquired_in_time_and_names_the_holder(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    holder = zklocks(
        zk_server.hosts,
        "run",
        path,
        "--identifier",
        "nightly-backup",
        "--",
        "sh",
        "-c",
        "echo held; cat >/dev/null",
        stdin=subprocess.PIPE,
    )
    assert read_line(holder) == "held"
    started = time.monotonic()
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "--timeout", "0.5", "--", "true"))
    assert status == 75
    assert time.monotonic() - started >= 0.5
    assert "not acquired within 0.5 s" in err and "nightly-backup" in err
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "--non-blocking", "--", "true"))
    assert status == 75
    assert "nightly-backup" in err
    assert len(children(kazoo, path)) == 1  # the waiters left no node behind
    assert finish(holder)[0] == 0
    assert children(kazoo, path) == []


# -- lost lease ------------------------------------------------------------------------------


def test_lost_lease_stops_the_command_and_exits_76(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'echo "$ZKLOCKS_NODE"; trap "echo got TERM; exit 9" TERM; while :; do sleep 0.05; done'
    process = zklocks(zk_server.hosts, "run", path, "--", "sh", "-c", script)
    node = read_line(process)
    kazoo.delete(node)  # as if the session had expired: the lock is someone else's now
    status, out, err = finish(process)
    assert status == 76
    assert "got TERM" in out
    assert "lost the lock" in err and "was deleted" in err
    assert children(kazoo, path) == []


def test_lost_lease_kills_a_command_that_ignores_sigterm(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'trap "" TERM; echo "$ZKLOCKS_NODE"; while :; do sleep 0.05; done'
    process = zklocks(zk_server.hosts, "run", path, "--kill-after", "0.5", "--", "sh", "-c", script)
    node = read_line(process)
    kazoo.delete(node)
    status, _, err = finish(process)
    assert status == 76
    assert "sending SIGKILL" in err


def test_paused_holder_whose_session_expired_stops_its_command(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    """SIGSTOP zklocks past its session timeout; on SIGCONT it learns the lease is lost."""
    script = 'echo "$ZKLOCKS_NODE"; trap "echo got TERM; exit 9" TERM; while :; do sleep 0.05; done'
    process = zklocks(
        zk_server.hosts, "run", path, "--session-timeout", "1", "--", "sh", "-c", script
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
    assert "lost the lock" in err


# -- interruptions ---------------------------------------------------------------------------


def test_ctrl_c_while_running_is_forwarded_and_exits_130(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'trap "echo got INT; exit 3" INT; echo started; while :; do sleep 0.05; done'
    process = zklocks(zk_server.hosts, "run", path, "--", "sh", "-c", script)
    assert read_line(process) == "started"
    process.send_signal(signal.SIGINT)
    status, out, _ = finish(process)
    assert status == 130
    assert "got INT" in out
    assert children(kazoo, path) == []


def test_ctrl_c_while_waiting_leaves_the_queue_and_exits_130(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    holder = zklocks(
        zk_server.hosts,
        "run",
        path,
        "--",
        "sh",
        "-c",
        "echo held; cat >/dev/null",
        stdin=subprocess.PIPE,
    )
    assert read_line(holder) == "held"
    waiter = zklocks(zk_server.hosts, "run", path, "--", "echo", "never")
    wait_for_children(kazoo, path, 2)
    waiter.send_signal(signal.SIGINT)
    status, out, err = finish(waiter)
    assert status == 130
    assert "never" not in out
    assert "left the queue" in err
    assert len(children(kazoo, path)) == 1  # only the holder's node is left, immediately
    assert finish(holder)[0] == 0
    assert children(kazoo, path) == []


_SHOW_IGNORED = (
    "import signal, sys\n"
    "print(*(signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGINT, signal.SIGHUP)))\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n"
)


def started_ignoring_sigint_and_sighup(hosts: str, *args: str) -> subprocess.Popen[str]:
    """``zklocks *args`` started with SIGINT and SIGHUP ignored (``nohup ... &`` in a script)."""
    return subprocess.Popen(
        [*ignoring(signal.SIGINT, signal.SIGHUP), ZKLOCKS, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ZKLOCKS_HOSTS": hosts},
    )


def ignored_signals(pid: int) -> set[int]:
    """The signals process ``pid`` ignores now (SigIgn in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            mask = int(line.split()[1], 16)
            return {number for number in range(1, 65) if mask >> (number - 1) & 1}
    raise AssertionError(f"no SigIgn line for {pid}")


def test_signals_ignored_at_start_stay_ignored_for_us_and_the_command(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    """Whoever started us with SIGINT or SIGHUP ignored asked that they stop nothing: we
    neither act on them nor hand the command a default it was not given (as a shell)."""
    process = started_ignoring_sigint_and_sighup(
        zk_server.hosts, "run", path, "--", sys.executable, "-c", _SHOW_IGNORED
    )
    assert read_line(process) == "True True"  # the command inherited them ignored
    assert ignored_signals(process.pid) >= {signal.SIGINT, signal.SIGHUP}
    process.send_signal(signal.SIGHUP)  # a hangup under nohup: nothing happens
    process.send_signal(signal.SIGINT)
    process.send_signal(signal.SIGTERM)  # not ignored: forwarded, as always
    status, _, err = finish(process)
    assert status == 143, err
    assert "SIGHUP" not in err and "SIGINT" not in err
    assert children(kazoo, path) == []


def test_signals_ignored_at_start_do_not_take_us_out_of_the_queue(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    holder = zklocks(
        zk_server.hosts, "run", path, "--", "sh", "-c", "echo held; cat", stdin=subprocess.PIPE
    )
    assert read_line(holder) == "held"
    waiter = started_ignoring_sigint_and_sighup(zk_server.hosts, "run", path, "--", "true")
    wait_for_children(kazoo, path, 2)
    assert ignored_signals(waiter.pid) >= {signal.SIGINT, signal.SIGHUP}
    waiter.send_signal(signal.SIGHUP)
    waiter.send_signal(signal.SIGINT)
    waiter.send_signal(signal.SIGTERM)
    status, _, err = finish(waiter)
    assert status == 143, err
    assert "interrupted (SIGTERM)" in err
    assert "Exception ignored" not in err and "Traceback" not in err
    assert finish(holder)[0] == 0
    assert children(kazoo, path) == []


def test_sigterm_while_running_is_forwarded_to_the_whole_group(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    # the grandchild (sleep) must die too: the command runs in a process group of its own
    script = "sleep 60 & echo $!; wait"
    process = zklocks(zk_server.hosts, "run", path, "--", "sh", "-c", script)
    grandchild = int(read_line(process))
    process.send_signal(signal.SIGTERM)
    status, _, _ = finish(process)
    assert status == 143
    assert _exits(grandchild, timeout=10), "the grandchild outlived the SIGTERM"
    assert children(kazoo, path) == []


def _exits(pid: int, timeout: float) -> bool:
    """Wait for any process (not only a child of ours) to exit: a pidfd polls readable."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # gone already
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)


# -- errors a person can act on ----------------------------------------------------------------


def test_bad_path_and_unknown_command(zk_server: ZooKeeperServer) -> None:
    status, _, err = finish(zklocks(zk_server.hosts, "run", "locks/x", "--", "true"))
    assert status == 2
    assert "must be absolute" in err
    status, _, err = finish(zklocks(zk_server.hosts, "run", "/locks/x", "--", "no-such-cmd-zk"))
    assert status == 127
    assert "command not found" in err


def test_unreachable_zookeeper_says_which_hosts_and_what_to_try() -> None:
    status, _, err = finish(
        zklocks("127.0.0.1:1", "run", "/locks/x", "--connect-timeout", "0.5", "--", "true")
    )
    assert status == 69
    assert "cannot reach ZooKeeper at 127.0.0.1:1" in err
    assert "zklocks server" in err and "ZKLOCKS_HOSTS" in err and "--hosts" in err
    assert "127.0.0.1:1 refused the connection" in err
    assert "--connect-timeout" not in err  # more time cannot help a refusal
    status, _, err = finish(zklocks("not a host:port", "run", "/locks/x", "--", "true"))
    assert status == 2
    assert "not a ZooKeeper connect string" in err


def test_help_has_examples_on_every_command() -> None:
    for command in ([], ["run"], ["status"], ["ls"], ["server"], ["demo"]):
        result = subprocess.run([ZKLOCKS, *command, "--help"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "Examples:" in result.stdout, command


# -- typed at a terminal -----------------------------------------------------------------------


def run_in_terminal(hosts: str, *args: str) -> tuple[int, int]:
    """``zklocks *args`` as the foreground job of a new pseudo-terminal: (pid, master fd)."""
    env = {**os.environ, "ZKLOCKS_HOSTS": hosts, "TERM": "dumb"}
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader with the terminal as its controlling tty
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a shell starts a job in front
        os.execve(ZKLOCKS, [ZKLOCKS, *args], env)
    return pid, master


def read_until(master: int, text: bytes, timeout: float = 15.0) -> bytes:
    output = b""
    deadline = time.monotonic() + timeout
    while text not in output:
        remaining = deadline - time.monotonic()
        assert remaining > 0 and select.select([master], [], [], remaining)[0], output
        output += os.read(master, 4096)
    return output


def exit_status(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_in_a_terminal_the_command_reads_it_and_ctrl_c_reaches_it(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'printf "name? "; read name; echo "hello $name"; exec sleep 60'
    pid, master = run_in_terminal(zk_server.hosts, "run", path, "--", "sh", "-c", script)
    try:
        read_until(master, b"name? ")
        os.write(master, b"zk\n")  # the command can read the terminal: it is in front
        read_until(master, b"hello zk")
        assert len(children(kazoo, path)) == 1
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals the command itself
        assert exit_status(pid) == 130
    finally:
        os.close(master)
    assert children(kazoo, path) == []
