"""``zklocks run --max-hold/--on-revoke``, ``zklocks revoke`` and ``zklocks break``: the real
executable against a real ZooKeeper, checked with an independent kazoo client."""

from __future__ import annotations

import os
import pty
import subprocess
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient
from test_cli_run import wait_for_children
from test_cli_run import zklocks as zklocks_command

import zklocks
from zklocks.server import ZooKeeperServer

WAIT = 30.0


@pytest.fixture
def path() -> str:
    return f"/cli-admin/{uuid.uuid4().hex[:10]}"


def start(hosts: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    """``zklocks *args`` as ``test_cli_run`` starts it, reading nothing from our stdin."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    return zklocks_command(hosts, *args, **kwargs)


def zklocks_cli(hosts: str, *args: str) -> subprocess.CompletedProcess[str]:
    process = start(hosts, *args)
    out, err = process.communicate(timeout=WAIT)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# -- run --max-hold / --on-revoke ------------------------------------------------------


def test_run_max_hold_stops_the_command_and_exits_76(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    started = time.monotonic()
    result = zklocks_cli(zk_server.hosts, "run", path, "--max-hold", "1", "--", "sleep", "30")
    took = time.monotonic() - started
    assert result.returncode == 76, result.stderr
    assert "max_hold" in result.stderr
    assert took < 10  # not the 30 s of the command
    assert kazoo.get_children(path) == []


def test_run_max_hold_kills_a_command_that_ignores_sigterm(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    script = "trap '' TERM; echo ready; sleep 30 & wait"
    result = zklocks_cli(
        zk_server.hosts, "run", path, "--max-hold", "0.5", "--kill-after", "0.5", "-c", script
    )
    assert result.returncode == 76, result.stderr
    assert "SIGKILL" in result.stderr
    assert kazoo.get_children(path) == []


def test_run_stops_the_command_on_a_revoke(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    holder = start(zk_server.hosts, "run", path, "--", "sleep", "30")
    try:
        wait_for_children(kazoo, path, 1, timeout=WAIT)
        revoked = zklocks_cli(zk_server.hosts, "revoke", path)
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.strip() == f"asked 1 holder of {path} to let go"
        _, err = holder.communicate(timeout=WAIT)
    finally:
        holder.kill()
    assert holder.returncode == 128 + 15, err  # the command's own status: SIGTERM
    assert "revoke" in err
    assert kazoo.get_children(path) == []


def test_run_on_revoke_ignore_lets_the_command_finish(
    zk_server: ZooKeeperServer, kazoo: KazooClient, path: str
) -> None:
    holder = start(
        zk_server.hosts, "run", path, "--on-revoke", "ignore", "-c", "sleep 2; echo done"
    )
    try:
        wait_for_children(kazoo, path, 1, timeout=WAIT)
        revoked = zklocks_cli(zk_server.hosts, "revoke", path)
        assert revoked.stdout.strip() == f"asked 1 holder of {path} to let go"
        out, err = holder.communicate(timeout=WAIT)
    finally:
        holder.kill()
    assert holder.returncode == 0, err
    assert out.strip() == "done" and "revoke" not in err


def test_revoke_of_a_free_lock_asks_nobody(zk_server: ZooKeeperServer, path: str) -> None:
    result = zklocks_cli(zk_server.hosts, "revoke", path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"asked 0 holders of {path} to let go"


# -- break -----------------------------------------------------------------------------


def test_break_with_the_holders_token_deletes_it_and_says_so(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: KazooClient, path: str
) -> None:
    lease = client.lock(path, identifier="stuck-job").acquire(timeout=5)
    result = zklocks_cli(zk_server.hosts, "break", path, "--token", str(lease.token), "--yes")
    assert result.returncode == 0, result.stderr
    assert f"token {lease.token}" in result.stdout and "stuck-job" in result.stdout
    assert "broke" in result.stderr  # the log line: who broke what
    assert kazoo.get_children(path) == []
    assert lease.wait_lost(timeout=WAIT)  # the holder learns it lost the lock


def test_break_with_another_token_refuses_and_deletes_nothing(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: KazooClient, path: str
) -> None:
    lease = client.lock(path).acquire(timeout=5)
    result = zklocks_cli(zk_server.hosts, "break", path, "--token", str(lease.token + 1), "--yes")
    assert result.returncode == 1
    assert "nothing broken" in result.stderr and str(lease.token) in result.stderr
    assert kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]
    assert not lease.lost
    lease.release()


def test_break_without_yes_and_without_a_terminal_refuses(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: KazooClient, path: str
) -> None:
    lease = client.lock(path).acquire(timeout=5)
    result = zklocks_cli(zk_server.hosts, "break", path)
    assert result.returncode == 2
    assert "--yes" in result.stderr
    assert kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]
    lease.release()


def test_break_on_a_terminal_asks_first(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: KazooClient, path: str
) -> None:
    lease = client.lock(path).acquire(timeout=5)
    controller, terminal = pty.openpty()
    try:
        process = start(zk_server.hosts, "break", path, stdin=terminal)
        os.write(controller, b"y\n")
        out, err = process.communicate(timeout=WAIT)
    finally:
        os.close(controller)
        os.close(terminal)
    assert process.returncode == 0, err
    assert "Break 1 holder(s)" in err
    assert f"token {lease.token}" in out
    assert kazoo.get_children(path) == []


def test_break_of_a_shared_lock_breaks_every_holder(
    zk_server: ZooKeeperServer, client: zklocks.Client, kazoo: KazooClient, path: str
) -> None:
    leases: list[zklocks.Lease] = []
    readers = [client.read_write_lock(path).read for _ in range(2)]
    threads = [threading.Thread(target=lambda r=r: leases.append(r.acquire(5))) for r in readers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result = zklocks_cli(zk_server.hosts, "break", path, "--yes")
    assert result.returncode == 0, result.stderr
    for lease in leases:
        assert f"token {lease.token}" in result.stdout
    assert kazoo.get_children(path) == []
