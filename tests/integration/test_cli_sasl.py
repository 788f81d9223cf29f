"""The CLI's SASL options as a user runs them, on a server that enforces SASL logins.

The password reaches the CLI only through a file or the environment: the tests look
for it in every process's command line and in everything the commands print.
"""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_security import HOLD, finish, lines_until, read_line, zklocks

from zklocks.server import ZooKeeperServer

PASSWORD = "cli-sasl-Pa55word"
USERS = {"alice": PASSWORD, "bob": "bob-other-pw"}


@pytest.fixture(scope="module")
def enforcing() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(
        tick_time=200, max_session_timeout=60_000, sasl_users=USERS, enforce_auth=True
    ) as server:
        yield server


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "sasl-password"
    path.write_text(PASSWORD + "\n")  # as `echo` writes it: the newline is not part of it
    path.chmod(0o600)
    return path


@pytest.fixture
def path() -> str:
    return f"/cli-sasl/{uuid.uuid4().hex[:10]}"


def command_lines() -> list[bytes]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes())
            except OSError:
                continue  # gone meanwhile, or not ours to read
    return lines


def test_run_status_and_ls_log_in_with_a_password_file(
    enforcing: ZooKeeperServer, password_file: Path, path: str
) -> None:
    env = {"ZKLOCKS_HOSTS": enforcing.hosts}
    login = ("--sasl-user", "alice", "--sasl-password-file", str(password_file))
    holder = zklocks("run", path, *login, "--acl", "creator", "--", *HOLD, env=env,
                     stdin=subprocess.PIPE)  # fmt: skip
    outputs: list[str] = []
    try:
        assert read_line(holder) == "holding"
        assert all(PASSWORD.encode() not in line for line in command_lines())
        code, out, err = finish(zklocks("status", path, *login, env=env))
        outputs += [out, err]
        assert code == 0, err
        assert "1 holding" in out
        assert out.splitlines()[-1] == "ACL of the lock directory: sasl:alice=cdrwa"
        by_env = {**env, "ZKLOCKS_SASL_USER": "alice", "ZKLOCKS_SASL_PASSWORD": PASSWORD}
        code, out, err = finish(zklocks("status", path, "--json", env=by_env))
        outputs += [out, err]
        assert code == 0, err
        assert json.loads(out)["acl"] == [{"id": "sasl:alice", "perms": "cdrwa"}]
        code, out, err = finish(zklocks("ls", "/cli-sasl", "--json", *login, env=env))
        outputs += [out, err]
        assert code == 0, err
        assert path in [lock["path"] for lock in json.loads(out)]
        # bob logs in, and the directory's ACL keeps him out of alice's lock
        as_bob = {**env, "ZKLOCKS_SASL_USER": "bob", "ZKLOCKS_SASL_PASSWORD": USERS["bob"]}
        code, out, err = finish(zklocks("run", path, "-n", "--", "true", env=as_bob))
        outputs += [out, err]
        assert code == 77, err
    finally:
        out, err = holder.communicate("done\n", timeout=60)
    assert holder.returncode == 0, err
    for text in [*outputs, out, err]:
        assert PASSWORD not in text


def test_refused_logins_exit_77_and_say_what_to_fix(
    enforcing: ZooKeeperServer, tmp_path: Path, path: str
) -> None:
    env = {"ZKLOCKS_HOSTS": enforcing.hosts}
    code, out, err = finish(zklocks("status", path, env=env))
    assert code == 77, err
    assert "requires authentication" in err and "--sasl-user" in err
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    login = ("--sasl-user", "alice", "--sasl-password-file", str(wrong))
    for command in (
        ["status", path, *login],
        ["run", path, *login, "--", "true"],
        ["leader", path, *login],
    ):
        code, out, err = finish(zklocks(*command, env=env))
        assert code == 77, (command, err)
        assert "SASL authentication failed" in err
        assert "not-the-password" not in out + err


def test_bad_sasl_options_are_usage_errors(tmp_path: Path, path: str) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases = [
        ["--sasl-user", "alice"],  # no password anywhere
        ["--sasl-user", "alice", "--sasl-password-file", str(empty)],
        ["--sasl-password-file", str(empty)],  # a password for nobody
        ["--sasl-principal", "alice"],  # a principal is for GSSAPI
        ["--sasl-mechanism", "GSSAPI", "--sasl-user", "alice"],  # Kerberos has no user
    ]
    for options in cases:
        code, _, err = finish(zklocks("status", path, *options))
        assert code == 2, (options, err)
        assert "sasl" in err.lower()


def test_zklocks_server_with_sasl_users_enforces_the_login(tmp_path: Path, path: str) -> None:
    server_password = "server-cli-pw"
    server = zklocks(
        "server", "--port", "0", "--sasl-user", f"carol:{server_password}", "--enforce-auth"
    )
    try:
        lines = lines_until(server, "Press Ctrl-C", 120)
        assert any("SASL login required" in line for line in lines)
        assert all(server_password not in line for line in lines)
        exports = dict(
            line.split("export ", 1)[1].split("=", 1)
            for line in lines
            if "export " in line and "<" not in line
        )
        assert exports["ZKLOCKS_SASL_USER"] == "carol"
        secret = tmp_path / "carol"
        secret.write_text(server_password)
        env = {**exports, "ZKLOCKS_SASL_PASSWORD_FILE": str(secret)}
        code, out, err = finish(zklocks("run", path, "--", "sh", "-c", "echo ok", env=env))
        assert code == 0 and out.strip() == "ok", err
        code, _, err = finish(
            zklocks("status", path, env={"ZKLOCKS_HOSTS": exports["ZKLOCKS_HOSTS"]})
        )
        assert code == 77 and "requires authentication" in err
    finally:
        server.send_signal(signal.SIGINT)
        code, _, err = finish(server)
    assert code == 0, err
