"""``zklocks demo``: the README's first command, and our end-to-end smoke test.

It runs as a user runs it: as plain lines when its output is not a terminal (starting
its own ZooKeeper, as on a fresh machine), and drawn live in a pseudo-terminal. Each
run's final summary is checked: queue order, rising fencing tokens, one wake-up per
waiter, the crashed holder's lock freed by ZooKeeper, the paused holder's write refused.
"""

from __future__ import annotations

import fcntl
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
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient

from helpers import ctrl_c_restored, ignoring
from zklocks._cli import demo as demo_module
from zklocks._cli.demo_crew import Crew, ScenarioFailed
from zklocks._cli.demo_screen import PlainScreen
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))
DEADLINE = 60.0  # the demo promises to finish in under a minute


def tokens_in(line: str) -> list[int]:
    match = re.search(r"tokens (\d+(?: < \d+)+)", line)
    assert match, line
    return [int(token) for token in match.group(1).split(" < ")]


def check_summary(text: str) -> None:
    """The summary says every scenario behaved as its story says."""
    summary = text[text.rindex("Summary") :]
    lines = [line.strip() for line in summary.splitlines()]
    for title in ("fair lock", "read/write", "crash", "pause"):
        assert f"ok     {title}" in lines, summary
    assert "acquired in queue order: w1 w2 w3 w4 w5" in lines
    assert "held in the order: R1+R2+R3 together, then W4, W5, R6, W7" in lines
    assert "4 releases woke 4 waiters, one each: w2 1, w3 1, w4 1, w5 1" in lines
    assert "7 releases woke 4 waiters, one each: W4 1, W5 1, R6 1, W7 1" in lines
    token_lines = [line for line in lines if "tokens " in line]
    assert len(token_lines) == 4, token_lines
    for line in token_lines:
        tokens = tokens_in(line)
        assert tokens == sorted(set(tokens)), line  # strictly rising
    assert len(tokens_in(token_lines[0])) == 5 and len(tokens_in(token_lines[1])) == 7
    crash = next(line for line in lines if line.startswith("w1 SIGKILLed while holding"))
    gone = float(re.search(r"deleted its node ([\d.]+) s later", crash).group(1))  # type: ignore[union-attr]
    assert gone >= 0.5  # ZooKeeper waited for the session to time out
    assert any(line.startswith("after SIGCONT w1's lease said lost") for line in lines)
    refused = next(line for line in lines if "stale write" in line)
    match = re.fullmatch(
        r"w1's stale write \(token (\d+)\) was refused; the store kept balance=200 from (\d+)",
        refused,
    )
    assert match, refused
    assert int(match.group(1)) < int(match.group(2))
    assert re.search(
        r"all 4 scenarios behaved as the story says \([\d.]+ s\); every worker stopped, "
        r"no node left behind",
        summary,
    ), summary


def demo_workers(hosts: str) -> list[int]:
    """Live demo worker processes on this machine that use ``hosts``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"zklocks._cli.demo_worker" in args and hosts.encode() in args:
                found.append(int(entry.name))
    return found


def test_demo_on_a_fresh_machine_starts_its_own_zookeeper_and_tells_the_story(
    child_tag: str, tagged_pids: Callable[[str], list[int]]
) -> None:
    """`make demo`: no --hosts, stdout not a terminal (CI): plain lines, exit 0."""
    started = time.monotonic()
    result = subprocess.run(
        [ZKLOCKS, "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ZKLOCKS_SERVER_TAG": child_tag},
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert elapsed < DEADLINE
    out = result.stdout
    assert "\x1b[" not in out  # plain lines: no cursor movement or colour
    served = re.search(r"ZooKeeper: serving on (127\.0\.0\.1:\d+), ready in", out)
    assert served
    assert "== 1/4 fair lock" in out and "== 4/4 pause" in out
    assert "watch chain: w5 → w4 → w3 → w2 → w1" in out
    assert "queue: w1 holds (token " in out and "w2 watches w1" in out
    check_summary(out)
    assert not tagged_pids(child_tag)  # its ZooKeeper is gone
    assert not demo_workers(served.group(1))


def test_demo_draws_live_in_a_terminal(zk_server: ZooKeeperServer) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 130, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "130"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [ZKLOCKS, "demo", "--hosts", zk_server.hosts, "--pace", "0"],  # unpaced in tests
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + DEADLINE
    try:
        while process.poll() is None or select.select([master], [], [], 0)[0]:
            assert time.monotonic() < deadline, output[-3000:].decode(errors="replace")
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the demo closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    assert process.wait(timeout=15) == 0, output[-3000:].decode(errors="replace")
    raw = output.decode(errors="replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    # the live region: a table that is redrawn in place (cursor up, erase line) ...
    assert re.search(r"\x1b\[\d*A", raw) and "\x1b[2K" in raw
    assert "fair lock: the lock's queue now" in text and "wake-ups" in text
    assert re.search(r"w2\W+lock\W+waiting\W+\d+\W+→ w1", text)  # w2 watches w1
    assert "\x1b[32m" in raw or "\x1b[1;32m" in raw  # colour: green for holding / ok
    check_summary(text)


def test_demo_exits_70_when_the_story_does_not_hold(
    zk_server: ZooKeeperServer, capsys: object
) -> None:
    """A failed expectation is reported as FAILED and turns into exit status 70."""

    def broken(stage: demo_module.Stage, crew: Crew) -> list[str]:
        crew.spawn("w1", f"{stage.root}/broken")
        crew.expect("w1", "ready")
        raise ScenarioFailed("w1 was expected to fly")

    scenarios = [
        demo_module.DemoScenario("broken", "broken", ("a story that cannot hold",), broken),
        demo_module.BY_KEY["crash"],
    ]
    status = demo_module._play(PlainScreen(), scenarios, zk_server.hosts, 5.0, 1.0)
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert status == 70
    assert "FAILED broken" in out and "w1 was expected to fly" in out
    assert "ok     crash" in out
    assert "1 of 2 checks FAILED" in out and "no node left behind" in out
    assert not demo_workers(zk_server.hosts)


def test_demo_ctrl_c_stops_every_worker_and_removes_its_nodes(
    zk_server: ZooKeeperServer,
) -> None:
    with ctrl_c_restored():  # as from a terminal, even if this run ignores SIGINT
        process = subprocess.Popen(
            [ZKLOCKS, "demo", "--hosts", zk_server.hosts, "--scenario", "rw"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert process.stdout is not None
    root = ""
    deadline = time.monotonic() + DEADLINE
    for line in process.stdout:  # interrupt once the queue is full and waiting
        root = root or (re.findall(r"Lock paths under (\S+);", line) or [""])[0]
        if "W7 queues and watches R6" in line:
            break
        assert time.monotonic() < deadline
    assert root and demo_workers(zk_server.hosts)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "demo interrupted" in err
    assert not demo_workers(zk_server.hosts)
    kazoo = KazooClient(hosts=zk_server.hosts)
    kazoo.start(timeout=15)
    try:
        assert kazoo.exists(root) is None
    finally:
        kazoo.stop()
        kazoo.close()


def test_the_time_limit_stops_the_demo_even_when_started_with_sigint_ignored(
    zk_server: ZooKeeperServer,
) -> None:
    """A smoke test must not hang CI, and some CI runners start it with SIGINT ignored:
    the watchdog's own interrupt still lands (an outside Ctrl-C still does nothing)."""
    result = subprocess.run(
        [*ignoring(signal.SIGINT), ZKLOCKS, "demo", "--hosts", zk_server.hosts, "--plain",
         "--time-limit", "1"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )  # fmt: skip
    assert result.returncode == 70, result.stdout[-3000:] + result.stderr[-3000:]
    assert "the demo was still running after 1 s, so it was stopped" in result.stderr
    assert not demo_workers(zk_server.hosts)
