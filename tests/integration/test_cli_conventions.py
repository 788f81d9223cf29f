"""The CLI's conventions, as a user meets them: the real executable, a real ZooKeeper.

``--read --write`` is a usage error; ``-c`` runs through ``sh -c`` (flock); no command
holds the lock until Ctrl-C (etcdctl); a second Ctrl-C at a terminal escalates;
``zklocks server`` on a busy port says what to do; ``python -m zklocks``; bad option
values (bytes that are not UTF-8 included) are usage errors naming the rule, never a
traceback.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from test_cli_run import (
    ZKLOCKS,
    children,
    exit_status,
    finish,
    read_line,
    read_until,
    run_in_terminal,
    zklocks,
)

from zklocks.server import ZooKeeperServer


@pytest.fixture
def path() -> str:
    return f"/cli-conventions/{uuid.uuid4().hex[:10]}"


def test_read_and_write_together_is_a_usage_error(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    status, out, err = finish(
        zklocks(zk_server.hosts, "run", path, "--read", "--write", "--", "true")
    )
    assert status == 2
    assert "--read and --write exclude each other" in err
    assert out == ""
    assert kazoo.exists(path) is None  # refused before anything was sent


def test_dash_c_runs_the_text_with_sh(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = 'echo "in $ZKLOCKS_PATH" && echo "token=$ZKLOCKS_TOKEN" | cut -c1-6'
    status, out, err = finish(zklocks(zk_server.hosts, "run", path, "-c", script))
    assert status == 0, err
    assert out.splitlines() == [f"in {path}", "token="]
    status, _, _ = finish(zklocks(zk_server.hosts, "run", path, "-c", "false && echo no"))
    assert status == 1  # sh's status: the && chain stopped at false
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "-c", "true", "--", "true"))
    assert status == 2
    assert "not both" in err
    assert children(kazoo, path) == []


def test_no_command_holds_prints_the_lease_and_releases_on_ctrl_c(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    holder = zklocks(zk_server.hosts, "run", path)
    assert holder.stdout is not None
    lines = [read_line(holder), holder.stdout.readline(), holder.stdout.readline()]
    lease = dict(line.rstrip("\n").split("=", 1) for line in lines)
    assert set(lease) == {"ZKLOCKS_TOKEN", "ZKLOCKS_NODE", "ZKLOCKS_PATH"}
    node = shlex.split(lease["ZKLOCKS_NODE"])[0]
    assert shlex.split(lease["ZKLOCKS_PATH"]) == [path]
    assert node.startswith(path + "/")
    stat = kazoo.exists(node)
    assert stat is not None and stat.czxid == int(lease["ZKLOCKS_TOKEN"])  # the real lease
    # held: another contender cannot have it now
    status, _, err = finish(zklocks(zk_server.hosts, "run", path, "-n", "--", "true"))
    assert status == 75, err
    holder.send_signal(signal.SIGINT)
    status, _, err = finish(holder)
    assert status == 0, err
    assert f"releasing {path}" in err
    assert children(kazoo, path) == []


def test_no_command_in_a_terminal_releases_on_ctrl_c(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    pid, master = run_in_terminal(zk_server.hosts, "run", path)
    try:
        read_until(master, b"Ctrl-C releases it")
        assert len(children(kazoo, path)) == 1
        os.write(master, b"\x03")
        assert exit_status(pid) == 0
    finally:
        os.close(master)
    assert children(kazoo, path) == []


def test_a_second_ctrl_c_at_a_terminal_kills_a_command_that_ignores_the_first(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    # SIG_IGN survives exec: the sleep ignores Ctrl-C as its shell did
    script = "trap '' INT; echo started; exec sleep 120"
    pid, master = run_in_terminal(zk_server.hosts, "run", path, "--", "sh", "-c", script)
    try:
        read_until(master, b"started")
        os.write(master, b"\x03")  # ignored by the command: zklocks says what to do
        read_until(master, b"press Ctrl-C again to kill it")
        os.write(master, b"\x03")
        read_until(master, b"sending SIGKILL")
        assert exit_status(pid) == 130
    finally:
        os.close(master)
    assert children(kazoo, path) == []


def test_server_on_a_busy_port_exits_69_with_a_hint() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [ZKLOCKS, "server", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 69, result.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "zklocks server --port 0" in result.stderr
    assert f"export ZKLOCKS_HOSTS=127.0.0.1:{port}\n" in result.stderr  # not a literal PORT
    assert "Traceback" not in result.stderr


def test_python_dash_m_zklocks_is_the_cli(zk_server: ZooKeeperServer, path: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "zklocks",
            "run",
            path,
            "--hosts",
            zk_server.hosts,
            "-c",
            "echo $ZKLOCKS_PATH",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{path}\n"
    usage = subprocess.run(
        [sys.executable, "-m", "zklocks", "--help"], capture_output=True, text=True, timeout=60
    )
    assert usage.stdout.startswith("Usage: zklocks ")


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (["run", "/x", "--timeout", "nan", "--", "true"], "nan is not a number of seconds"),
        (["run", "/x", "--timeout", "-1", "--", "true"], "must be at least 0, or inf"),
        (["run", "/x", "--timeout", "soon", "--", "true"], "'soon' is not a number of seconds"),
        (["run", "/x", "--kill-after", "nan", "--", "true"], "nan is not a number of seconds"),
        (["run", "/x", "--kill-after", "inf", "--", "true"], "inf seconds: must be finite"),
        (["run", "/x", "--session-timeout", "inf", "--", "true"], "must be finite"),
        (["run", "/x", "--session-timeout", "0", "--", "true"], "must be at least 0.1"),
        (["run", "/x", "--connect-timeout", "nan", "--", "true"], "nan is not a number"),
        (["status", "/x", "--connect-timeout", "inf"], "must be finite"),
        (["ls", "--connect-timeout", "-5"], "must be at least 0.1"),
        (["run", "/x", "--semaphore", "0", "--", "true"], "0 is not in the range"),
        (["demo", "--session-timeout", "nan"], "nan is not a number of seconds"),
        (["server", "--port", "70000"], "70000 is not in the range"),
    ],
)
def test_bad_option_values_are_usage_errors_naming_the_rule(args: list[str], rule: str) -> None:
    option = next(arg for arg in args if arg.startswith("--"))
    # nothing answers there, with little patience: a value let through fails differently
    env = {**os.environ, "ZKLOCKS_HOSTS": "127.0.0.1:1"}
    result = subprocess.run(
        [ZKLOCKS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert f"Invalid value for '{option}'" in result.stderr
    assert rule in result.stderr
    assert "Traceback" not in result.stderr


def test_no_command_exits_76_when_the_lock_is_lost(fresh_zk_server: ZooKeeperServer) -> None:
    path = f"/cli-conventions/{uuid.uuid4().hex[:10]}"
    holder = zklocks(fresh_zk_server.hosts, "run", path, "--session-timeout", "1")
    assert read_line(holder).startswith("ZKLOCKS_TOKEN=")
    fresh_zk_server.stop()  # no answer for a whole session timeout: the lease is lost
    status, _, err = finish(holder)
    assert status == 76, err
    assert f"lost the lock on {path}" in err


# Bytes that are not UTF-8, as a Latin-1 terminal or a file name from one sends them.
NOT_UTF8 = b"caf\xe9"


@pytest.mark.parametrize(
    ("args", "env", "option", "rule"),
    [
        ([b"run", b"/x", b"--identifier", NOT_UTF8, b"--", b"true"], {}, "'--identifier'",
         r"'caf\xe9' is not UTF-8 text"),
        ([b"elect", b"/x", b"--identifier", NOT_UTF8, b"--", b"true"], {}, "'--identifier'",
         r"'caf\xe9' is not UTF-8 text"),
        ([b"run", b"/x", b"--identifier", b"a\x01b", b"--", b"true"], {}, "'--identifier'",
         "identifier must be printable text of at most 1024 characters"),
        ([b"run", b"/locks/" + NOT_UTF8, b"--", b"true"], {}, "'PATH'",
         r"'/locks/caf\xe9' is not UTF-8 text"),
        ([b"status", b"/locks/" + NOT_UTF8], {}, "'PATH'", r"'/locks/caf\xe9' is not UTF-8 text"),
        ([b"leader", b"/locks/" + NOT_UTF8], {}, "'PATH'", r"'/locks/caf\xe9' is not UTF-8 text"),
        ([b"ls", b"/locks/" + NOT_UTF8], {}, "'[ROOT]'", r"'/locks/caf\xe9' is not UTF-8 text"),
        ([b"run", b"/x", b"--auth", b"digest:me:" + NOT_UTF8, b"--", b"true"], {}, "'--auth'",
         "the value (not shown here) is not UTF-8 text"),
        ([b"status", b"/x"], {b"ZKLOCKS_AUTH": b"digest:me:" + NOT_UTF8}, "'--auth'",
         "the value (not shown here) is not UTF-8 text"),
        ([b"ls"], {b"ZKLOCKS_HOSTS": b"127.0.0.1:2181/" + NOT_UTF8}, "'--hosts'",
         r"'127.0.0.1:2181/caf\xe9' is not UTF-8 text"),
        ([b"server", b"--data-dir", b"/tmp/" + NOT_UTF8], {}, "'--data-dir'",
         r"'/tmp/caf\xe9' is not UTF-8 text, and ZooKeeper reads the directory's name from "
         "its configuration file"),
    ],
    ids=["run-identifier", "elect-identifier", "unprintable-identifier", "run-path",
         "status-path", "leader-path", "ls-root", "auth", "auth-env", "hosts-env",
         "server-data-dir"],
)  # fmt: skip
def test_text_that_is_not_utf8_is_a_usage_error_on_one_line(
    zk_server: ZooKeeperServer, args: list[bytes], env: dict[bytes, bytes], option: str, rule: str
) -> None:
    """Bytes that are not UTF-8 where zklocks needs text (it sends it to ZooKeeper) are a
    usage error naming the option, never a traceback, wherever they come from."""
    environment = {**os.environb, b"ZKLOCKS_HOSTS": zk_server.hosts.encode(), **env}
    result = subprocess.run(
        [ZKLOCKS.encode(), *args], capture_output=True, env=environment, timeout=60
    )
    err = result.stderr.decode(errors="replace")
    assert result.returncode == 2, err
    assert "Traceback" not in err
    (error,) = [line for line in err.splitlines() if line.startswith("Error:")]
    assert f"Invalid value for {option}" in error
    assert error.endswith(rule)  # the whole message is this one line
    assert "me:" not in err  # a credential is never echoed
    assert result.stdout == b""


def test_an_auth_file_that_is_not_utf8_is_a_usage_error(
    zk_server: ZooKeeperServer, tmp_path: Path
) -> None:
    auth_file = tmp_path / "auth"
    auth_file.write_bytes(b"digest:me:" + NOT_UTF8 + b"\n")
    result = subprocess.run(
        [ZKLOCKS, "status", "/x", "--hosts", zk_server.hosts, "--auth-file", str(auth_file)],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"Error: Invalid value: {auth_file} is not UTF-8 text" in result.stderr
    assert "me:" not in result.stderr


def test_a_command_and_its_arguments_may_hold_any_bytes(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    """A command goes to the operating system as typed: file names need not be UTF-8."""
    for command in ([b"--", b"printf", b"%s", NOT_UTF8], [b"-c", b"printf %s " + NOT_UTF8]):
        result = subprocess.run(
            [ZKLOCKS.encode(), b"run", path.encode(), b"--hosts", zk_server.hosts.encode(),
             *command],
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout == NOT_UTF8
    assert children(kazoo, path) == []
