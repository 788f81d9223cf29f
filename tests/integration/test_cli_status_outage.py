"""``zklocks status --watch`` when ZooKeeper goes away, and Ctrl-C at any moment.

The real executable in a pseudo-terminal against a server of the test's own, which the
test stops and starts again (with empty data: the watcher's session is gone too).
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from test_cli_status import HOLD, Terminal, read_line

from helpers import ctrl_c_restored
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))


def test_watch_keeps_the_last_table_marked_through_a_server_stop(
    fresh_zk_server: ZooKeeperServer,
) -> None:
    path = f"/cli-outage/{uuid.uuid4().hex[:10]}"
    hosts = fresh_zk_server.hosts
    holder = subprocess.Popen(
        [ZKLOCKS, "run", path, "--identifier", "before-the-outage", "--", "sh", "-c", HOLD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ZKLOCKS_HOSTS": hosts},
    )
    terminal = Terminal([ZKLOCKS, "status", path, "--watch", "--hosts", hosts])
    try:
        assert read_line(holder) == "held"
        terminal.wait_for(r"1 holding, 0 waiting[\s\S]*holding\s+lock\s+before-the-outage")
        fresh_zk_server.stop()
        banner = rf"disconnected from {re.escape(hosts)} for \d+ s; showing the last known state"
        # the banner sits on top of the last table, which is still there
        terminal.wait_for(
            banner + r"\s*" + re.escape(path) + r"  1 holding, 0 waiting[^\n]*\n"
            r"[\s\S]*?before-the-outage"
        )
        # and it counts the seconds of the outage
        terminal.wait_for(rf"disconnected from {re.escape(hosts)} for [2-9] s")
        fresh_zk_server.start()
        # a fresh listing from the new server, in a frame without the banner
        fresh = r"nobody holds or waits for this lock\s*" + re.escape(path) + "  0 holding"
        terminal.wait_for(fresh)
    finally:
        status = terminal.close()
        holder.communicate(timeout=30)
    assert status == 0
    assert "Aborted" not in terminal.text() and "Traceback" not in terminal.text()


def test_watch_json_says_on_stderr_when_it_loses_and_regains_zookeeper(
    fresh_zk_server: ZooKeeperServer,
) -> None:
    path = f"/cli-outage/{uuid.uuid4().hex[:10]}"
    hosts = fresh_zk_server.hosts
    with ctrl_c_restored():  # it is stopped with Ctrl-C: not ignored, whatever this run ignores
        watch = subprocess.Popen(
            [ZKLOCKS, "status", path, "--watch", "--json", "--hosts", hosts],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        assert '"holders":[]' in read_line(watch)
        fresh_zk_server.stop()
        stderr_until(watch, f"zklocks: disconnected from {hosts}; the last state shown stands")
        fresh_zk_server.start()
        stderr_until(watch, f"zklocks: reconnected to {hosts}")
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "Aborted" not in err


def stderr_until(process: subprocess.Popen[str], line: str, timeout: float = 30.0) -> None:
    """Read stderr lines (the library may log its own) until ``line`` comes."""
    assert process.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while line not in seen:
        remaining = deadline - time.monotonic()
        ready = remaining > 0 and select.select([process.stderr], [], [], remaining)[0]
        assert ready, f"{line!r} not on stderr; got {seen}"
        seen.append(process.stderr.readline().rstrip("\n"))


def test_ctrl_c_while_connecting_exits_0_without_a_traceback() -> None:
    # A port that accepts the connection and never answers: the watcher is connecting.
    with socket.create_server(("127.0.0.1", 0)) as tarpit:
        tarpit.settimeout(30)
        port = tarpit.getsockname()[1]
        terminal = Terminal(
            [
                ZKLOCKS,
                "status",
                "/x",
                "--watch",
                "--hosts",
                f"127.0.0.1:{port}",
                "--connect-timeout",
                "2",
            ]
        )
        connection, _ = tarpit.accept()
        with connection:
            terminal.process.send_signal(signal.SIGINT)
            status = terminal.close()
    assert status == 0, terminal.text()
    assert "Aborted" not in terminal.text() and "Traceback" not in terminal.text()
