"""zklocks.server against a real ZooKeeper, checked with kazoo as an independent client."""

from __future__ import annotations

import gc
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

import zklocks
from zklocks import server as zk
from zklocks.server import (
    JavaNotFound,
    ServerStartError,
    ZooKeeperEnsemble,
    ZooKeeperNotFound,
    ZooKeeperServer,
)

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still false after {timeout} s: {condition}"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def free_port() -> int:
    return zk._free_ports(1)[0]


def test_picked_ports_are_outside_the_ephemeral_range() -> None:
    """An outgoing connection (a member dialling a peer, a proxy) can take a port from
    the ephemeral range between the pick and the JVM's bind: seen in CI as a member
    whose client port was "already in use"."""
    low, high = zk._ephemeral_range()
    ports = zk._free_ports(30)
    assert len(set(ports)) == 30
    assert not [port for port in ports if low <= port <= high]
    for port in ports:
        assert zk._port_is_free(port)


@contextmanager
def kazoo(hosts: str, timeout: float = 10.0) -> Iterator[KazooClient]:
    # Retry quickly, so a restarted server or a new leader is found at once. Reconnecting
    # has no deadline: kazoo stops reconnecting for good once its connection retry runs out,
    # and one handshake accepted by a JVM still starting waits out a whole session timeout
    # (it failed that way on a loaded machine: test_kill_then_restart_resumes).
    reconnect = {"max_tries": -1, "delay": 0.05, "max_delay": 0.5}
    retry = {**reconnect, "deadline": 60}
    client = KazooClient(
        hosts=hosts, timeout=timeout, connection_retry=reconnect, command_retry=retry
    )
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def session_timeout_ms(server: ZooKeeperServer, session_id: int) -> int:
    """The timeout the server granted a session, as ``cons`` reports it."""
    for line in server.four_letter("cons").splitlines():
        if f"sid=0x{session_id:x}," in line:
            return int(re.search(r"\bto=(\d+)", line).group(1))  # type: ignore[union-attr]
    raise AssertionError(f"session 0x{session_id:x} is not connected")


# -- one server ------------------------------------------------------------------------


def test_start_serves_and_stop_removes_everything() -> None:
    server = ZooKeeperServer(tick_time=200)
    assert not server.running and server.pid is None
    server.start()
    pid, data_dir = server.pid, server.data_dir
    assert pid is not None and data_dir is not None
    assert server.four_letter("ruok") == "imok"
    assert server.mode() == "standalone"
    assert "maxSessionTimeout=4000" in server.four_letter("conf")  # ZooKeeper's 20 ticks
    assert server.hosts == f"127.0.0.1:{server.port}"
    assert os.getpgid(pid) == pid  # its own group: a terminal's Ctrl-C doesn't reach it
    assert (data_dir / "zookeeper.log").is_file() and (data_dir / "version-2").is_dir()

    server.stop()
    assert not server.running and not alive(pid)
    assert not data_dir.exists()
    with pytest.raises(OSError):
        server.four_letter("ruok", timeout=0.5)


def test_jvm_that_exits_early_is_reported() -> None:
    server = ZooKeeperServer(heap="not-a-size")
    with pytest.raises(ServerStartError, match="exited with code 1 before serving") as error:
        server.start()
    assert "Invalid maximum heap size" in str(error.value)  # the log tail
    assert not server.running


def test_port_in_use_is_reported(zk_server: ZooKeeperServer) -> None:
    with pytest.raises(ServerStartError, match="already in use"):
        ZooKeeperServer(port=zk_server.port).start()


def test_mntr_is_parsed(zk_server: ZooKeeperServer) -> None:
    stats = zk_server.mntr()
    assert isinstance(stats["zk_packets_received"], int)
    assert stats["zk_server_state"] == "standalone"


def test_tick_time_sets_session_bounds(zk_server: ZooKeeperServer) -> None:
    conf = zk_server.four_letter("conf").splitlines()
    assert {"tickTime=200", "minSessionTimeout=400", "maxSessionTimeout=60000"} <= set(conf)
    with kazoo(zk_server.hosts, timeout=0.4) as short, kazoo(zk_server.hosts) as usual:
        assert session_timeout_ms(zk_server, short.client_id[0]) == 400
        assert session_timeout_ms(zk_server, usual.client_id[0]) == 10_000  # not cut to 4 s


def test_given_data_dir_is_kept_and_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "zk"
    first = ZooKeeperServer(data_dir=data_dir, tick_time=200)
    with first, kazoo(first.hosts) as client:
        client.create("/kept", b"v1")
    assert (data_dir / "version-2").is_dir()
    second = ZooKeeperServer(data_dir=data_dir, tick_time=200)
    with second, kazoo(second.hosts) as client:
        assert client.get("/kept")[0] == b"v1"


def test_restart_keeps_port_data_and_sessions(fresh_zk_server: ZooKeeperServer) -> None:
    port = fresh_zk_server.port
    # a session long enough to outlive a slow restart on a loaded machine
    with kazoo(fresh_zk_server.hosts, timeout=60.0) as client:
        session = client.client_id
        client.create("/persistent", b"p")
        client.create("/ephemeral", ephemeral=True)
        fresh_zk_server.restart()
        assert fresh_zk_server.port == port
        # see test_kill_then_restart_resumes: one kazoo attempt may be swallowed by the JVM
        wait_until(lambda: client.connected, timeout=75.0)
        assert client.client_id == session
        assert client.get("/persistent")[0] == b"p"
        assert client.exists("/ephemeral") is not None


def test_kill_then_restart_resumes(fresh_zk_server: ZooKeeperServer) -> None:
    with kazoo(fresh_zk_server.hosts, timeout=60.0) as client:
        session = client.client_id
        client.create("/ephemeral", ephemeral=True)
        pid = fresh_zk_server.pid
        assert pid is not None
        fresh_zk_server.kill()
        assert not fresh_zk_server.running and not alive(pid)
        wait_until(lambda: not client.connected)
        fresh_zk_server.restart()
        # A reconnect that lands while the JVM is still starting can be accepted and never
        # answered; kazoo then waits out its attempt (up to the 60 s session) before the next.
        wait_until(lambda: client.connected, timeout=75.0)
        assert client.client_id == session
        assert client.exists("/ephemeral") is not None


def test_pause_and_resume(fresh_zk_server: ZooKeeperServer) -> None:
    with kazoo(fresh_zk_server.hosts) as client:
        fresh_zk_server.pause()
        assert fresh_zk_server.paused
        with pytest.raises(TimeoutError):
            fresh_zk_server.four_letter("ruok", timeout=0.3)
        pending = client.exists_async("/")
        with pytest.raises(KazooTimeoutError):
            pending.get(timeout=0.5)
        fresh_zk_server.resume()
        assert pending.get(timeout=5) is not None
        assert fresh_zk_server.four_letter("ruok") == "imok"


def test_stop_while_paused_shuts_down() -> None:
    server = ZooKeeperServer(tick_time=200)
    server.start()
    server.pause()
    server.stop()  # SIGTERM is only acted on once the JVM runs again
    assert not server.running


def test_zookeeper_home_in_release_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A release keeps zookeeper-<version>.jar and its dependencies in lib/.
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "zookeeper-3.8.0.jar").symlink_to("/usr/share/java/zookeeper.jar")
    (lib / "slf4j-simple-1.7.32.jar").symlink_to("/usr/share/java/slf4j-simple.jar")
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    monkeypatch.setattr(zk, "SYSTEM_JAR_DIRS", ())
    with ZooKeeperServer(tick_time=200) as server:
        assert server.four_letter("ruok") == "imok"


def test_dropped_server_is_killed() -> None:
    server = ZooKeeperServer(tick_time=200)
    server.start()
    pid = server.pid
    assert pid is not None
    del server
    gc.collect()
    assert not alive(pid)


# -- missing ZooKeeper or Java ---------------------------------------------------------


def test_empty_zookeeper_home_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    server = ZooKeeperServer()
    with pytest.raises(ZooKeeperNotFound, match="apt-get install zookeeper") as error:
        server.start()
    assert f"ZOOKEEPER_HOME={tmp_path}" in str(error.value)
    assert not server.running and server.data_dir is None


def test_missing_package_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setattr(zk, "SYSTEM_JAR_DIRS", (tmp_path,))
    with pytest.raises(ZooKeeperNotFound, match="apt-get install zookeeper") as error:
        ZooKeeperServer().start()
    assert "ZOOKEEPER_HOME is not set" in str(error.value)
    assert str(tmp_path / "zookeeper.jar") in str(error.value)


@pytest.mark.parametrize("java_home", [True, False], ids=["bad-JAVA_HOME", "no-java-on-PATH"])
def test_missing_java_is_reported(
    java_home: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if java_home:
        monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    else:
        monkeypatch.delenv("JAVA_HOME", raising=False)
        monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFound, match="apt-get install") as error:
        ZooKeeperServer().start()
    assert ("JAVA_HOME=" if java_home else "no `java` on PATH") in str(error.value)


# -- ensemble --------------------------------------------------------------------------


def test_ensemble_elects_one_leader(zk_ensemble: ZooKeeperEnsemble) -> None:
    modes = sorted(member.mode() or "none" for member in zk_ensemble.members)
    assert modes == ["follower", "follower", "leader"]
    assert zk_ensemble.leader().mode() == "leader"
    assert zk_ensemble.hosts == ",".join(member.hosts for member in zk_ensemble.members)
    with kazoo(zk_ensemble.hosts) as client:
        client.create("/replicated", b"r")
    for member in zk_ensemble.members:  # every member serves the write
        with kazoo(member.hosts) as client:
            client.sync("/replicated")
            assert client.get("/replicated")[0] == b"r"


def test_killing_the_leader_elects_another(zk_ensemble: ZooKeeperEnsemble) -> None:
    with kazoo(zk_ensemble.hosts) as client:
        client.create("/before", b"b")
        old = zk_ensemble.leader()
        old.kill()
        new = zk_ensemble.wait_for_leader(timeout=30)
        assert new is not old
        client.retry(client.ensure_path, "/after")
        assert client.get("/before")[0] == b"b"
        old.start()  # rejoins with its data, as a follower
        assert old.mode() == "follower"


# -- no stray JVMs ---------------------------------------------------------------------

CHILD = """
import sys, time
from zklocks.server import ZooKeeperServer
server = ZooKeeperServer(tick_time=200)
server.start()
print(server.pid, server.data_dir, flush=True)
sys.stdin.readline()  # wait for the test to look
if sys.argv[1] == "hang":
    time.sleep(600)
"""


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_child_python_leaves_no_jvm(
    ending: str, child_tag: str, tagged_pids: Callable[[str], list[int]]
) -> None:
    """Exit without stop() (the finalizer kills the JVM) or be SIGKILLed (the watchdog does)."""
    env = {**os.environ, "ZKLOCKS_SERVER_TAG": child_tag}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "exit" if ending == "exit" else "hang"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    pid_text, data_dir = child.stdout.readline().split()
    try:
        assert len(tagged_pids(child_tag)) == 2  # the JVM and its watchdog
        if ending == "sigkill":
            child.kill()
        else:
            child.stdin.write("go\n")
            child.stdin.flush()
        assert child.wait(timeout=30) in (0, -signal.SIGKILL)
        # The watchdog polls, then kills and reaps; on a loaded machine that takes seconds.
        wait_until(lambda: not tagged_pids(child_tag), timeout=30.0)
        assert not alive(int(pid_text))
        wait_until(lambda: not Path(data_dir).exists(), timeout=30.0)
    finally:
        child.kill()
        child.communicate()


# -- command line ----------------------------------------------------------------------


def test_cli_version() -> None:
    result = subprocess.run([ZKLOCKS, "--version"], capture_output=True, text=True, check=True)
    assert zklocks.__version__ in result.stdout


def test_cli_server_runs_until_ctrl_c(
    child_tag: str, tagged_pids: Callable[[str], list[int]]
) -> None:
    port = free_port()
    env = {**os.environ, "ZKLOCKS_SERVER_TAG": child_tag}
    cli = subprocess.Popen(
        [ZKLOCKS, "server", "--port", str(port), "--tick-time", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        output = read_until(cli, f"export ZKLOCKS_HOSTS=127.0.0.1:{port}", timeout=30)
        assert f"serving on 127.0.0.1:{port}" in output
        server = ZooKeeperServer(port=port)  # never started: only used to ask it
        assert server.four_letter("ruok") == "imok"
        cli.send_signal(signal.SIGINT)
        assert cli.wait(timeout=15) == 0
        assert not tagged_pids(child_tag)
    finally:
        cli.kill()
        cli.communicate()


def read_until(process: subprocess.Popen[bytes], text: str, timeout: float) -> str:
    """Stdout of ``process`` until it holds ``text``, failing at the deadline."""
    assert process.stdout is not None
    fd = process.stdout.fileno()  # unbuffered reads, so select() sees all that is left
    deadline = time.monotonic() + timeout
    output = ""
    while text not in output:
        remaining = deadline - time.monotonic()
        readable, _, _ = select.select([fd], [], [], max(0.0, remaining))
        assert readable, f"no {text!r} within {timeout} s; got {output!r}"
        chunk = os.read(fd, 65536)
        assert chunk, f"exited with {process.wait()} before {text!r}; got {output!r}"
        output += chunk.decode()
    return output
