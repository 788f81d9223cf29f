"""What a client tells its user: the granted session timeout, connection listeners and
state, lock events and connection failures in the logs (and nothing on stderr unless
logging is configured)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nemesis.proxy import Proxy

import zklocks
from helpers import (
    close_session,
    expire_session,
    run,
    session_credentials,
    threaded_proxy,
    without_version_warning,
)
from zklocks import ConnectionState
from zklocks.server import ZooKeeperServer

TESTS = Path(__file__).resolve().parents[1]


def unique(name: str) -> str:
    return f"/events/{name}-{time.monotonic_ns()}"


@contextlib.contextmanager
def http_port() -> Iterator[tuple[int, list[int]]]:
    """A port where an HTTP server answers whatever it gets with a 400, and the count of
    connections it accepted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            with conn, contextlib.suppress(OSError):
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(5)


def refused_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- the session timeout the server granted ----------------------------------------------


@pytest.mark.parametrize(("asked", "granted"), [(0.1, 0.4), (100.0, 60.0), (5.0, 5.0)])
def test_session_timeout_is_the_granted_one(
    zk_server: ZooKeeperServer, asked: float, granted: float
) -> None:
    """tickTime 200 ms and maxSessionTimeout 60 s: the server grants 0.4 s to 60 s."""
    client = zklocks.Client(zk_server.hosts, session_timeout=asked)
    assert client.session_timeout == asked  # not connected yet: what was asked
    with client:
        assert client.session_timeout == granted
    assert client.session_timeout == granted  # the last session's, after stop


def test_async_session_timeout_is_the_granted_one(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts, session_timeout=0.1) as client:
            assert client.session_timeout == 0.4

    asyncio.run(scenario())


# -- connection listeners and state -------------------------------------------------------


def test_listener_hears_an_expiry_on_the_connection_thread(zk_server: ZooKeeperServer) -> None:
    heard: list[tuple[ConnectionState, str]] = []
    reconnected = threading.Event()

    def listener(state: ConnectionState) -> None:
        heard.append((state, threading.current_thread().name))
        if state is ConnectionState.CONNECTED and len(heard) > 1:
            reconnected.set()

    client = zklocks.Client(zk_server.hosts, session_timeout=4.0)
    assert client.state is ConnectionState.LOST  # no session yet
    client.add_listener(listener)
    with client:
        assert client.state is ConnectionState.CONNECTED
        first_session = session_credentials(client)[0]
        expire_session(client, zk_server.hosts)
        assert reconnected.wait(30), heard
        assert client.state is ConnectionState.CONNECTED
        assert session_credentials(client)[0] != first_session
    states = [state for state, _ in heard]
    assert states == [
        ConnectionState.CONNECTED,
        ConnectionState.SUSPENDED,
        ConnectionState.LOST,
        ConnectionState.CONNECTED,
        ConnectionState.CLOSED,
    ]
    assert {thread for _, thread in heard[:-1]} == {"zklocks-connection"}
    assert client.state is ConnectionState.CLOSED


def test_removed_listener_and_failing_listener(
    zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[ConnectionState] = []

    def broken(state: ConnectionState) -> None:
        raise RuntimeError("listener bug")

    client = zklocks.Client(zk_server.hosts)
    client.add_listener(broken)
    client.add_listener(heard.append)
    client.remove_listener(heard.append)
    client.remove_listener(print)  # never added: nothing happens
    with caplog.at_level(logging.ERROR, logger="zklocks.connection"), client:
        pass
    assert heard == []
    assert any("listener" in r.getMessage() and r.exc_info for r in caplog.records)
    with pytest.raises(zklocks.InvalidArgument):
        client.add_listener("not callable")  # type: ignore[arg-type]


def test_async_listener_hears_a_stall_and_the_recovery(zk_server: ZooKeeperServer) -> None:
    """The network eats everything: SUSPENDED when the read deadline passes, CONNECTED
    (the same session) once it flows again. Called on the client's event loop."""

    async def scenario() -> None:
        heard: list[ConnectionState] = []
        suspended, resumed = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        loops: list[asyncio.AbstractEventLoop] = []

        def listener(state: ConnectionState) -> None:
            heard.append(state)
            loops.append(asyncio.get_running_loop())
            if state is ConnectionState.SUSPENDED:
                suspended.set()
            elif state is ConnectionState.CONNECTED and suspended.is_set():
                resumed.set()

        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            client = zklocks.AsyncClient(proxy.hosts, session_timeout=6.0)
            client.add_listener(listener)
            async with client:
                session = client._session
                assert session is not None
                session_id = session.session_id()
                proxy.stall()
                await asyncio.wait_for(suspended.wait(), 30)
                assert client.state is ConnectionState.SUSPENDED
                proxy.unstall()
                await asyncio.wait_for(resumed.wait(), 30)
                assert session.session_id() == session_id  # resumed, not a new one
            assert heard == [
                ConnectionState.CONNECTED,
                ConnectionState.SUSPENDED,
                ConnectionState.CONNECTED,
                ConnectionState.CLOSED,
            ]
            assert set(loops) == {loop}

    run(scenario())


def test_async_listener_hears_an_expiry(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        heard: list[ConnectionState] = []
        renewed = asyncio.Event()

        def listener(state: ConnectionState) -> None:
            heard.append(state)
            if state is ConnectionState.CONNECTED and ConnectionState.LOST in heard:
                renewed.set()

        client = zklocks.AsyncClient(zk_server.hosts, session_timeout=4.0)
        client.add_listener(listener)
        async with client:
            lease = await client.lock(unique("async-expiry")).acquire()
            # a blocking call on the loop's thread: the client is frozen meanwhile
            close_session(zk_server.hosts, *client._session.credentials())  # type: ignore[union-attr]
            await asyncio.wait_for(renewed.wait(), 30)
            assert lease.lost
        assert heard == [
            ConnectionState.CONNECTED,
            ConnectionState.SUSPENDED,
            ConnectionState.LOST,
            ConnectionState.CONNECTED,
            ConnectionState.CLOSED,
        ]

    run(scenario())


# -- logs ---------------------------------------------------------------------------------


def test_lock_events_are_logged(
    zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    path = unique("logged")
    caplog.set_level(logging.INFO, logger="zklocks")
    queued = threading.Event()

    class Queued(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "queued at position" in record.getMessage():
                queued.set()

    handler = Queued()
    logging.getLogger("zklocks.lock").addHandler(handler)
    try:
        with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as waiter:
            lock = holder.lock(path)
            lock.acquire()
            got: list[zklocks.Lease] = []
            thread = threading.Thread(target=lambda: got.append(waiter.lock(path).acquire(30)))
            thread.start()
            assert queued.wait(30)
            lock.release()
            thread.join(30)
            assert got
            expire_session(waiter, zk_server.hosts)
            assert got[0].wait_lost(30)
    finally:
        logging.getLogger("zklocks.lock").removeHandler(handler)
    lock_records = [r for r in caplog.records if r.name == "zklocks.lock"]
    messages = [r.getMessage() for r in lock_records]
    assert f"{path}: lock queued at position 2" in messages, messages
    assert sum(f"{path}: lock granted after" in m for m in messages) == 2, messages
    assert any(f"{path}: lock released after" in m and "s held" in m for m in messages)
    lost = [r for r in lock_records if "lost after" in r.getMessage()]
    assert len(lost) == 1 and lost[0].levelno == logging.WARNING
    assert "the ZooKeeper session expired" in lost[0].getMessage()


def test_a_port_that_is_not_zookeeper_is_named_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="zklocks")
    with http_port() as (port, accepted):
        client = zklocks.Client(f"127.0.0.1:{port}", connect_timeout=1.5)
        with pytest.raises(zklocks.ConnectionFailed) as failed:
            client.start()
        tries = len(accepted)
    text = f"127.0.0.1:{port} answered, but not as ZooKeeper; it looks like HTTP"
    assert text in str(failed.value)
    assert tries >= 2  # tried again and again, said once
    said = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.getMessage() for r in said] == [text]
    assert not any("frame length" in r.getMessage() for r in said)


def test_refused_and_unknown_hosts_are_named(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="zklocks")
    port = refused_port()
    hosts = f"127.0.0.1:{port},no-such-host.invalid:2181"
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(hosts, connect_timeout=1.0).start()
    message = str(failed.value)
    assert f"127.0.0.1:{port} refused the connection" in message
    assert "no-such-host.invalid:2181: unknown host name" in message
    # a library error names the library's arguments, not the command line's flags
    assert "hosts=" in message and "--hosts" not in message and "ZKLOCKS_HOSTS" not in message
    said = [r.getMessage() for r in caplog.records]
    assert sum("refused the connection" in m for m in said) == 1, said
    assert sum("unknown host name" in m for m in said) == 1, said


QUIET_SCRIPT = """
import asyncio, logging, os, socket, sys, threading, warnings
import zklocks
from helpers import expire_session

if os.environ.get("CONFIGURE_LOGGING"):
    logging.basicConfig(level=logging.INFO)
hosts, http = sys.argv[1], sys.argv[2]
for bad in (f"127.0.0.1:{http}", f"127.0.0.1:{sys.argv[3]}", "no-such-host.invalid:2181"):
    try:
        zklocks.Client(bad, connect_timeout=1.0).start()
    except zklocks.ConnectionFailed:
        pass
with zklocks.Client(hosts, session_timeout=1.0) as client:
    lease = client.lock("/events/quiet").acquire()
    expire_session(client, hosts)
    assert lease.wait_lost(30)

async def main():
    async with zklocks.AsyncClient(hosts) as client:
        async with client.lock("/events/quiet-async"):
            pass
asyncio.run(main())
print("done")
"""


@pytest.mark.parametrize("configured", [False, True])
def test_the_library_prints_nothing_unless_logging_is_configured(
    zk_server: ZooKeeperServer, configured: bool
) -> None:
    """Bad hosts, a lost lease, an asyncio client: silent by default; with logging
    configured the same run shows the records (so the silence is not for want of them)."""
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    if configured:
        env["CONFIGURE_LOGGING"] = "1"
    with http_port() as (port, _accepted):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(QUIET_SCRIPT),
                zk_server.hosts,
                str(port),
                str(refused_port()),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    if not configured:
        assert done.stderr == ""
    else:
        assert "answered, but not as ZooKeeper; it looks like HTTP" in done.stderr
        assert "refused the connection" in done.stderr
        assert "unknown host name" in done.stderr
        assert "WARNING:zklocks.lock:/events/quiet: lock lost after" in done.stderr


# -- the CLI shows library records as its own lines ---------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zklocks.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_names_a_port_that_is_not_zookeeper() -> None:
    with http_port() as (port, _accepted):
        done = cli("ls", "--hosts", f"127.0.0.1:{port}", "--connect-timeout", "1")
    assert done.returncode == 69
    text = f"127.0.0.1:{port} answered, but not as ZooKeeper; it looks like HTTP"
    assert done.stderr.count(text) == 1, done.stderr
    assert "frame length" not in done.stderr
    assert "no answer within" not in done.stderr


def test_cli_warns_when_the_server_grants_another_session_timeout(
    zk_server: ZooKeeperServer,
) -> None:
    path = unique("cli-timeout")
    asked = cli("run", path, "--hosts", zk_server.hosts, "--session-timeout", "0.1", "--", "true")
    assert asked.returncode == 0, asked.stderr
    assert (
        "zklocks: the server granted a session timeout of 0.4 s, not the 0.1 s asked for"
        in asked.stderr
    )
    fits = cli("run", path, "--hosts", zk_server.hosts, "--session-timeout", "5", "--", "true")
    assert fits.returncode == 0 and "granted" not in fits.stderr


def test_cli_verbose_shows_lock_events_as_its_own_lines(zk_server: ZooKeeperServer) -> None:
    path = unique("cli-verbose")
    quiet = cli("run", path, "--hosts", zk_server.hosts, "--", "true")
    assert quiet.returncode == 0 and without_version_warning(quiet.stderr) == ""
    loud = cli("-v", "run", path, "--hosts", zk_server.hosts, "--", "true")
    assert loud.returncode == 0, loud.stderr
    lines = loud.stderr.splitlines()
    assert any(line.startswith(f"zklocks: {path}: lock granted after") for line in lines), lines
    assert any(line.startswith(f"zklocks: {path}: lock released after") for line in lines)
    assert all(line.startswith("zklocks: ") for line in lines), lines


def test_demo_narrates_the_session_timeout_the_server_granted() -> None:
    """A server whose minimum session is 2 s: the demo asked for 1 s and says 2 s."""
    with ZooKeeperServer(tick_time=200, min_session_timeout=2000) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "zklocks.cli",
                "demo",
                "--hosts",
                server.hosts,
                "--scenario",
                "crash",
                "--session-timeout",
                "1",
                "--plain",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "(2 s of silence)" in done.stdout
    assert "(session timeout 2 s)" in done.stdout
    assert "1 s of silence" not in done.stdout and "session timeout 1 s" not in done.stdout


def test_a_silent_host_is_reported_once_through_many_attempts(
    zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A stall past the session timeout: every reconnect attempt times out, one WARNING
    says so; the client's own clock declares the session LOST, then a new one is made."""
    caplog.set_level(logging.INFO, logger="zklocks.connection")

    async def scenario() -> None:
        heard: list[ConnectionState] = []
        lost = asyncio.Event()
        renewed = asyncio.Event()

        def listener(state: ConnectionState) -> None:
            heard.append(state)
            if state is ConnectionState.LOST:
                lost.set()
            elif state is ConnectionState.CONNECTED and lost.is_set():
                renewed.set()

        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            client = zklocks.AsyncClient(proxy.hosts, session_timeout=3.0, connect_timeout=0.3)
            client.add_listener(listener)
            async with client:
                accepted = proxy.accepted
                proxy.stall()
                await asyncio.wait_for(lost.wait(), 30)
                while proxy.accepted < accepted + 4:  # attempts go on after the loss
                    await asyncio.sleep(0.05)
                proxy.unstall()
                await asyncio.wait_for(renewed.wait(), 30)
            assert heard == [
                ConnectionState.CONNECTED,
                ConnectionState.SUSPENDED,
                ConnectionState.LOST,
                ConnectionState.CONNECTED,
                ConnectionState.CLOSED,
            ]
            silent = [r for r in caplog.records if "did not answer within" in r.getMessage()]
            assert len(silent) == 1, [r.getMessage() for r in silent]
            assert silent[0].levelno == logging.WARNING
            assert silent[0].getMessage().startswith(f"{proxy.hosts} did not answer within")

    run(scenario())


def test_listener_hears_a_stall_and_the_recovery(zk_server: ZooKeeperServer) -> None:
    heard: list[tuple[ConnectionState, str]] = []
    suspended, resumed = threading.Event(), threading.Event()

    def listener(state: ConnectionState) -> None:
        heard.append((state, threading.current_thread().name))
        if state is ConnectionState.SUSPENDED:
            suspended.set()
        elif state is ConnectionState.CONNECTED and suspended.is_set():
            resumed.set()

    with threaded_proxy(zk_server.port) as (proxy, loop):
        client = zklocks.Client(proxy.hosts, session_timeout=6.0)
        client.add_listener(listener)
        with client:
            session_id = session_credentials(client)[0]
            loop.call_soon_threadsafe(proxy.stall)
            assert suspended.wait(30)
            assert client.state is ConnectionState.SUSPENDED and not client.connected
            loop.call_soon_threadsafe(proxy.unstall)
            assert resumed.wait(30)
            assert session_credentials(client)[0] == session_id
    assert [state for state, _ in heard] == [
        ConnectionState.CONNECTED,
        ConnectionState.SUSPENDED,
        ConnectionState.CONNECTED,
        ConnectionState.CLOSED,
    ]
    assert {thread for _, thread in heard[:-1]} == {"zklocks-connection"}


def test_a_failed_start_leaves_the_state_lost_and_tells_no_listener() -> None:
    heard: list[ConnectionState] = []
    port = refused_port()
    client = zklocks.Client(f"127.0.0.1:{port}", connect_timeout=0.3)
    client.add_listener(heard.append)
    with pytest.raises(zklocks.ConnectionFailed):
        client.start()
    assert client.state is ConnectionState.LOST

    async def scenario() -> None:
        aclient = zklocks.AsyncClient(f"127.0.0.1:{port}", connect_timeout=0.3)
        aclient.add_listener(heard.append)
        with pytest.raises(zklocks.ConnectionFailed):
            await aclient.start()
        assert aclient.state is ConnectionState.LOST

    asyncio.run(scenario())
    assert heard == []


def test_cli_missing_chroot_is_a_usage_error_not_a_traceback(zk_server: ZooKeeperServer) -> None:
    hosts = f"{zk_server.hosts}/no-such-chroot-{time.monotonic_ns()}"
    done = cli("ls", "--hosts", hosts, "--connect-timeout", "5")
    assert done.returncode == 2, done.stderr
    assert without_version_warning(done.stderr).startswith(f"zklocks: --hosts {hosts}: chroot ")
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
