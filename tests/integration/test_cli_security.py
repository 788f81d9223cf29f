"""The CLI's security options as a user runs them: credentials, ACLs and TLS.

``zklocks run`` holds the lock while its command waits for a line on stdin, so the test
looks at the lock (with ``zklocks status`` and an independent kazoo client) while held.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tls_support import TLSSetup
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))
SECRET = "cli-s3cret-pw"
HOLD = ["sh", "-c", "echo holding; read line"]


def zklocks(
    *args: str, env: dict[str, str] | None = None, stdin: int | None = None
) -> subprocess.Popen[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ZKLOCKS_")}
    full_env.update(env or {})
    return subprocess.Popen(
        [ZKLOCKS, *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )


def finish(process: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def read_line(process: subprocess.Popen[str], timeout: float = 30.0) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return process.stdout.readline().rstrip("\n")


def lines_until(process: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    """Stdout lines up to the one starting with ``marker`` (a reader thread: a text pipe
    buffers lines that ``select`` on its descriptor cannot see)."""
    found: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            found.put(line.rstrip("\n"))
            if line.startswith(marker):
                return
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        line = found.get(timeout=max(0.1, deadline - time.monotonic()))
        assert line is not None, f"exited before {marker!r}: {lines}"
        lines.append(line)
        if line.startswith(marker):
            return lines


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    path = tmp_path / "zk-auth"
    path.write_text(f"digest:alice:{SECRET}\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def path() -> str:
    return f"/cli-sec/{uuid.uuid4().hex[:10]}"


def test_run_and_status_with_credentials_and_without(
    zk_server: ZooKeeperServer, auth_file: Path, path: str
) -> None:
    hosts = {"ZKLOCKS_HOSTS": zk_server.hosts}
    holder = zklocks(
        "run", path, "--auth-file", str(auth_file), "--acl", "creator", "--", *HOLD,
        env=hosts, stdin=subprocess.PIPE,
    )  # fmt: skip
    outputs: list[str] = []
    try:
        assert read_line(holder) == "holding"
        # the secret is nowhere in the process's command line
        cmdline = Path(f"/proc/{holder.pid}/cmdline").read_bytes().decode()
        assert SECRET not in cmdline
        code, out, err = finish(zklocks("status", path, "--auth-file", str(auth_file), env=hosts))
        outputs += [out, err]
        assert code == 0, err
        assert "1 holding" in out
        assert out.splitlines()[-1] == "ACL of the lock directory: digest:alice=cdrwa"
        code, out, err = finish(
            zklocks("status", path, "--json", env={**hosts, "ZKLOCKS_AUTH": auth_file.read_text()})
        )
        outputs += [out, err]
        state = json.loads(out)
        assert state["acl"] == [{"id": "digest:alice", "perms": "cdrwa"}]
        assert len(state["holders"]) == 1
        root = "/" + path.split("/")[1]
        as_alice = ("--auth-file", str(auth_file))
        code, out, err = finish(zklocks("ls", root, "--json", *as_alice, env=hosts))
        assert code == 0, err
        assert [lock["path"] for lock in json.loads(out)] == [path]
        code, out, err = finish(zklocks("ls", root, "--json", env=hosts))  # skipped, not an error
        assert code == 0, err
        assert path not in out
        code, out, err = finish(zklocks("ls", path, env=hosts))  # asked for it: denied
        assert code == 77 and f"denied list on {path}" in err
        for env in (hosts, {**hosts, "ZKLOCKS_AUTH": "digest:mallory:guess"}):
            code, out, err = finish(zklocks("status", path, env=env))
            outputs += [out, err]
            assert code == 77, err
            assert f"denied list on {path}" in err
            code, out, err = finish(zklocks("run", path, "-n", "--", "true", env=env))
            outputs += [out, err]
            assert code == 77, err
            assert f"denied create on {path}" in err
        # another identity asking for acl=creator: refused by the directory check
        code, out, err = finish(
            zklocks("run", path, "--acl", "creator", "--", "true",
                    env={**hosts, "ZKLOCKS_AUTH": "digest:alice:wrong", "ZKLOCKS_TLS": ""})
        )  # fmt: skip
        outputs += [out, err]
        assert code == 77, err
    finally:
        out, err = holder.communicate("done\n", timeout=60)
        code = holder.returncode
    assert code == 0, err
    for text in [*outputs, out, err]:
        assert SECRET not in text
    owner = KazooClient(hosts=zk_server.hosts, auth_data=[("digest", f"alice:{SECRET}")])
    owner.start(timeout=15)
    try:
        assert owner.get_children(path) == []  # nothing left behind by any of them
    finally:
        owner.stop()
        owner.close()


def test_an_open_directory_is_refused_by_run_with_the_fix(
    zk_server: ZooKeeperServer, auth_file: Path, kazoo: KazooClient
) -> None:
    path = f"/cli-sec-open/{uuid.uuid4().hex[:10]}"
    kazoo.create(path, makepath=True)
    code, _, err = finish(
        zklocks("run", path, "--auth-file", str(auth_file), "--acl", "creator", "--", "true",
                env={"ZKLOCKS_HOSTS": zk_server.hosts})
    )  # fmt: skip
    assert code == 77
    assert "world:anyone=cdrwa" in err and "setAcl" in err
    assert kazoo.get_children(path) == []


def test_bad_security_options_are_usage_errors_that_do_not_echo_the_secret(
    zk_server: ZooKeeperServer, path: str, tmp_path: Path
) -> None:
    hosts = {"ZKLOCKS_HOSTS": zk_server.hosts}
    two_lines = tmp_path / "two"
    two_lines.write_text(f"digest:a:{SECRET}\ndigest:b:{SECRET}\n")
    cases = [
        ["run", path, "--acl", "creator", "--", "true"],  # creator needs credentials
        ["run", path, "--auth", f"nocolon{SECRET}", "--", "true"],
        ["run", path, "--auth", f"digest:{SECRET}", "--", "true"],  # no user:password
        ["status", path, "--auth-file", str(two_lines)],
        ["status", path, "--tls-key", str(two_lines)],  # a key without a certificate
    ]
    for args in cases:
        code, out, err = finish(zklocks(*args, env=hosts))
        assert code == 2, (args, err)
        assert SECRET not in out + err
    code, out, _ = finish(zklocks("run", "--help"))
    assert "visible to other users in `ps`" in " ".join(out.split())


# -- TLS ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSSetup:
    return TLSSetup.make(tmp_path_factory.mktemp("cli-tls"))


@pytest.fixture(scope="module")
def mtls_server(tls: TLSSetup) -> Iterator[ZooKeeperServer]:
    with tls.server("need") as server:
        yield server


def test_run_and_status_over_mutual_tls(
    tls: TLSSetup, mtls_server: ZooKeeperServer, path: str, tmp_path: Path
) -> None:
    env = {
        "ZKLOCKS_HOSTS": mtls_server.hosts,
        "ZKLOCKS_TLS_CA": str(tls.ca_file),
        "ZKLOCKS_TLS_CERT": str(tls.client_cert),
        "ZKLOCKS_TLS_KEY": str(tls.client_key),
    }
    code, out, err = finish(zklocks("run", path, "--", "sh", "-c", "echo $ZKLOCKS_TOKEN", env=env))
    assert code == 0, err
    assert int(out.strip()) > 0
    code, out, err = finish(
        zklocks("status", path, "--hosts", mtls_server.hosts, "--tls-ca", str(tls.ca_file),
                "--tls-cert", str(tls.client_cert), "--tls-key", str(tls.client_key))
    )  # fmt: skip
    assert code == 0, err
    no_cert = {k: v for k, v in env.items() if k not in ("ZKLOCKS_TLS_CERT", "ZKLOCKS_TLS_KEY")}
    code, _, err = finish(zklocks("status", path, "--connect-timeout", "2", env=no_cert))
    assert code == 69 and "client certificate" in err and "--tls-cert FILE" in err
    stranger = TLSSetup.make(tmp_path / "stranger")
    code, _, err = finish(
        zklocks("status", path, "--connect-timeout", "2",
                env={**env, "ZKLOCKS_TLS_CA": str(stranger.ca_file)})
    )  # fmt: skip
    assert code == 69 and "did not verify" in err and "--tls-ca FILE" in err
    code, _, err = finish(
        zklocks("status", path, "--connect-timeout", "2", env={"ZKLOCKS_HOSTS": mtls_server.hosts})
    )
    assert code == 69 and "speaks TLS" in err and "Connect with --tls" in err


def test_zklocks_server_tls_serves_only_tls_and_says_how_to_connect(path: str) -> None:
    server = zklocks("server", "--port", "0", "--tls", "--tls-client-auth", "need")
    try:
        lines = lines_until(server, "Press Ctrl-C", 120)
        exports = dict(
            line.split("export ", 1)[1].split("=", 1) for line in lines if "export " in line
        )
        assert set(exports) == {
            "ZKLOCKS_HOSTS", "ZKLOCKS_TLS_CA", "ZKLOCKS_TLS_CERT", "ZKLOCKS_TLS_KEY"
        }  # fmt: skip
        assert any("TLS only" in line for line in lines)
        tls_dir = Path(exports["ZKLOCKS_TLS_CA"]).parent
        assert (Path(exports["ZKLOCKS_TLS_KEY"]).stat().st_mode & 0o077) == 0  # private
        code, out, err = finish(zklocks("run", path, "--", "sh", "-c", "echo ok", env=exports))
        assert code == 0 and out.strip() == "ok", err
        plain = {"ZKLOCKS_HOSTS": exports["ZKLOCKS_HOSTS"]}
        code, _, err = finish(zklocks("status", path, "--connect-timeout", "2", env=plain))
        assert code == 69
    finally:
        server.send_signal(signal.SIGINT)
        code, _, err = finish(server)
    assert code == 0, err
    assert not tls_dir.exists()  # the throwaway CA is removed with the server


def test_status_watch_with_credentials_sees_the_protected_lock(
    zk_server: ZooKeeperServer, auth_file: Path, path: str
) -> None:
    hosts = {"ZKLOCKS_HOSTS": zk_server.hosts}
    watch = zklocks("status", path, "--watch", "--json", "--auth-file", str(auth_file), env=hosts)
    holder: subprocess.Popen[str] | None = None
    try:
        assert json.loads(lines_until(watch, "{", 30)[-1])["holders"] == []
        holder = zklocks(
            "run", path, "--auth-file", str(auth_file), "--acl", "creator", "--identifier",
            "guarded", "--", *HOLD, env=hosts, stdin=subprocess.PIPE,
        )  # fmt: skip
        state = json.loads(lines_until(watch, "{", 30)[-1])
        while not state["holders"]:  # a document per change: the directory, then the holder
            state = json.loads(lines_until(watch, "{", 30)[-1])
        assert [h["identifier"] for h in state["holders"]] == ["guarded"]
        assert state["acl"] == [{"id": "digest:alice", "perms": "cdrwa"}]
    finally:
        if holder is not None:
            holder.communicate("done\n", timeout=60)
        watch.terminate()
        out, err = watch.communicate(timeout=15)
    assert SECRET not in out + err


def test_elect_and_leader_take_the_same_credentials(
    zk_server: ZooKeeperServer, auth_file: Path, path: str
) -> None:
    """An election protected with acl=creator: the candidate and `leader` with the
    credentials see it; `leader` without them is refused (exit 77), never a traceback."""
    hosts = {"ZKLOCKS_HOSTS": zk_server.hosts}
    as_alice = ("--auth-file", str(auth_file))
    candidate = zklocks(
        "elect", path, *as_alice, "--acl", "creator", "--identifier", "node-a", "--", *HOLD,
        env=hosts, stdin=subprocess.PIPE,
    )  # fmt: skip
    outputs: list[str] = []
    try:
        assert read_line(candidate) == "holding"
        code, out, err = finish(zklocks("leader", path, "--json", *as_alice, env=hosts))
        outputs += [out, err]
        assert code == 0, err
        assert json.loads(out)["leader"]["identifier"] == "node-a"
        code, out, err = finish(zklocks("leader", path, env=hosts))
        outputs += [out, err]
        assert code == 77, err
        assert "Traceback" not in err
    finally:
        out, err = candidate.communicate("done\n", timeout=60)
    assert candidate.returncode == 0, err
    for text in [*outputs, out, err]:
        assert SECRET not in text


def test_tls_to_a_plaintext_port_fails_at_once_with_the_flag_to_drop(
    zk_server: ZooKeeperServer, path: str
) -> None:
    started = time.monotonic()
    code, _, err = finish(zklocks("status", path, "--tls", env={"ZKLOCKS_HOSTS": zk_server.hosts}))
    assert time.monotonic() - started < 5.0  # not the 5 s --connect-timeout plus start-up
    assert code == 69, err
    assert "hung up during the TLS handshake (a plaintext port?" in err
    assert "Leave out --tls" in err and "Traceback" not in err
