"""Hostile nodes, bad arguments and endless timeouts against a real ZooKeeper.

Anyone who can reach the ensemble can create nodes under a lock path; ``kazoo`` plays
that peer here. What it writes must be ignored (a name we cannot order) or shown
harmlessly (data), and never cost anyone else their lock.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import BadArgumentsError

import zklocks
from helpers import wait_for_children
from zklocks.server import ZooKeeperServer

ZKLOCKS = str(Path(sys.executable).with_name("zklocks"))
HEX = uuid.UUID(int=0xFEED).hex
HOSTILE = (
    "\x1b]0;pwned\x07"  # OSC: the window title
    "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: the clipboard
    "\x1bP+q544e\x1b\\"  # DCS
    "\x9b2J"  # C1 CSI: clear the screen
    "[blink]x[/blink]"  # rich markup
)


@pytest.fixture
def path(kazoo: Any) -> Iterator[str]:
    path = f"/hostile/{uuid.uuid4().hex[:10]}"
    yield path
    kazoo.delete(path, recursive=True)


def cli(hosts: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ZKLOCKS, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "ZKLOCKS_HOSTS": hosts, "COLUMNS": "400"},  # no cell cut short
    )


# -- 3. a name that looks like ours, with a sequence no ZooKeeper issues --------------------


def test_a_foreign_sequence_outside_32_bits_stops_nobody(
    zk_server: ZooKeeperServer, kazoo: Any, path: str
) -> None:
    foreign = f"{path}/lock-{HEX}-9999999999"
    kazoo.create(foreign, b"", makepath=True)
    with zklocks.Client(zk_server.hosts) as client:
        lock = client.lock(path)
        with lock as lease:
            assert [c.node for c in lock.contenders()] == [lease.node]
        lease = lock.try_acquire()
        assert lease is not None
        lock.release()

    async def asynchronously() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            lock = client.lock(path)
            async with lock as lease:
                assert [c.node for c in await lock.contenders()] == [lease.node]
            assert await lock.try_acquire() is not None
            await lock.release()

    asyncio.run(asynchronously())
    done = cli(zk_server.hosts, "status", path)
    assert done.returncode == 0, done.stderr
    assert "nobody holds or waits" in done.stdout
    assert kazoo.exists(foreign) is not None  # ignored, not ours to delete


# -- 4. foreign data; and a contender node no session owns ----------------------------------


def test_foreign_node_data_is_shown_and_a_node_nobody_owns_is_marked(
    zk_server: ZooKeeperServer, kazoo: Any, path: str
) -> None:
    datas = [b'{"pid": Infinity}', b'{"pid": 1e999}', b"[" * 50_000, b"\xff\xfe"]
    for index, data in enumerate(datas, start=1):
        kazoo.create(f"{path}/lock-{HEX}-{index:010d}", data, makepath=True)
    with zklocks.Client(zk_server.hosts) as client:
        found = client.lock(path).contenders()
    assert [c.identifier for c in found] == [
        '{"pid": Infinity}',
        "",  # JSON of ours, but with no identifier (and no usable pid)
        "[" * 50_000,
        "\\xff\\xfe",
    ]
    assert [c.holder for c in found] == [True, False, False, False]
    assert not any(c.ephemeral for c in found)
    done = cli(zk_server.hosts, "status", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("holding*") == 1 and done.stdout.count("waiting*") == 3
    assert "* not ephemeral" in done.stdout
    as_json = cli(zk_server.hosts, "status", path, "--json")
    assert as_json.returncode == 0, as_json.stderr
    state = json.loads(as_json.stdout)
    assert [e["ephemeral"] for e in state["holders"] + state["waiters"]] == [False] * 4


# -- 5. escape sequences and markup in what the CLI prints ----------------------------------


def test_status_run_and_ls_print_what_the_server_says_harmlessly(
    zk_server: ZooKeeperServer, kazoo: Any, path: str
) -> None:
    data = json.dumps({"identifier": HOSTILE, "host": HOSTILE, "pid": 1}).encode()
    kazoo.create(f"{path}/[blink]q/lock-{HEX}-0000000000", data, makepath=True)
    lock_path = f"{path}/[blink]q"
    outputs = []
    table = cli(zk_server.hosts, "status", lock_path)
    assert table.returncode == 0, table.stderr
    outputs.append(table.stdout)
    assert "[blink]x[/blink]" in table.stdout  # text, not markup
    assert "\\x1b]52;c;ZXZpbA==\\x07" in table.stdout  # shown escaped
    run = cli(zk_server.hosts, "run", lock_path, "--timeout", "0.5", "--", "true")
    assert run.returncode == 75
    outputs.append(run.stderr)
    assert "held by" in run.stderr and "\\x9b2J" in run.stderr
    listing = cli(zk_server.hosts, "ls", path)
    assert listing.returncode == 0, listing.stderr
    outputs.append(listing.stdout)
    assert "[blink]q" in listing.stdout
    for output in outputs:
        assert not {"\x1b", "\x9b", "\x07", "\x90"} & set(output), output
    as_json = cli(zk_server.hosts, "status", lock_path, "--json")
    assert "\x1b" not in as_json.stdout
    assert json.loads(as_json.stdout)["holders"][0]["identifier"] == HOSTILE


# -- 7. acquire(blocking=False) ---------------------------------------------------------------


def test_acquire_not_blocking_is_try_acquire(zk_server: ZooKeeperServer, path: str) -> None:
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as other:
        theirs, ours = holder.lock(path), other.lock(path)
        held = theirs.acquire()
        assert ours.acquire(blocking=False) is None
        assert [c.node for c in ours.contenders()] == [held.node]  # nothing of ours left
        theirs.release()
        lease = ours.acquire(blocking=False)
        assert isinstance(lease, zklocks.Lease)
        ours.release()

    async def asynchronously() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            first, second = client.lock(path), client.lock(path)
            await first.acquire()

            async def other_task() -> zklocks.AsyncLease | None:
                return await second.acquire(blocking=False)

            assert await asyncio.create_task(other_task()) is None
            await first.release()
            lease = await asyncio.create_task(other_task())
            assert isinstance(lease, zklocks.AsyncLease)

    asyncio.run(asynchronously())


# -- 8. endless timeouts --------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [float("inf"), 1e300], ids=["inf", "1e300"])
def test_an_endless_timeout_waits_until_granted(
    zk_server: ZooKeeperServer, kazoo: Any, path: str, timeout: float
) -> None:
    with zklocks.Client(zk_server.hosts) as holder, zklocks.Client(zk_server.hosts) as waiter:
        theirs, ours = holder.lock(path), waiter.lock(path)
        theirs.acquire()
        got: list[object] = []

        def take() -> None:
            got.append(ours.acquire(timeout))
            ours.release()

        thread = threading.Thread(target=take)
        thread.start()
        wait_for_children(kazoo, path, 2)  # the waiter is in line
        theirs.release()
        thread.join(15)
        assert not thread.is_alive()
        assert len(got) == 1 and isinstance(got[0], zklocks.Lease)

    async def asynchronously() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            first = client.lock(path)
            await first.acquire()
            waiting = asyncio.create_task(client.lock(path).acquire(timeout))
            while len(await first.contenders()) < 2:
                await first.wait_for_change(5)
            await first.release()
            lease = await asyncio.wait_for(waiting, 15)
            assert isinstance(lease, zklocks.AsyncLease)

    asyncio.run(asynchronously())


def test_run_with_an_infinite_timeout_waits(
    zk_server: ZooKeeperServer, kazoo: Any, path: str
) -> None:
    with zklocks.Client(zk_server.hosts) as holder:
        lock = holder.lock(path)
        lock.acquire()
        run = subprocess.Popen(
            [ZKLOCKS, "run", path, "--timeout", "inf", "--", "echo", "ran"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ZKLOCKS_HOSTS": zk_server.hosts},
        )
        wait_for_children(kazoo, path, 2)
        lock.release()
        out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    assert out == "ran\n"


# -- 9/10. connect strings and paths ----------------------------------------------------------


def test_cli_refuses_a_bad_connect_string_with_the_librarys_words(
    zk_server: ZooKeeperServer,
) -> None:
    for hosts in ("h:99999", "h:2181,", f"{zk_server.hosts}/chroot/"):
        done = cli(zk_server.hosts, "status", "/x", "--hosts", hosts)
        assert done.returncode == 2, hosts
        assert "not a ZooKeeper connect string" in done.stderr
    assert cli(f"[::1]:1,{zk_server.hosts}", "ls", "--connect-timeout", "20").returncode == 0


REFUSED = ["\x80", "\x9f", "\ue000", "\uf8ff", "\ufff0", "\U0001f512"]
TAKEN = ["\xa0", "é", "\u4e2d", "\uf900", "\uffef"]


@pytest.mark.parametrize("ch", REFUSED + TAKEN, ids=[f"U+{ord(c):04X}" for c in REFUSED + TAKEN])
def test_we_refuse_exactly_the_paths_zookeeper_refuses(
    zk_server: ZooKeeperServer, kazoo: Any, path: str, ch: str
) -> None:
    name = f"{path}/a{ch}b"
    try:
        kazoo.create(name, b"", makepath=True)
        server_refuses = False
    except BadArgumentsError:
        server_refuses = True
    with zklocks.Client(zk_server.hosts) as client:
        if ch in REFUSED:
            assert server_refuses
            with pytest.raises(zklocks.InvalidPath, match=f"U\\+{ord(ch):04X}"):
                client.lock(name)
        else:
            assert not server_refuses
            with client.lock(name) as lease:
                assert lease.node.startswith(name + "/")


# -- also: a command that cannot run fails before joining the queue ---------------------------


def test_run_checks_its_command_before_joining_the_queue(
    zk_server: ZooKeeperServer, kazoo: Any, path: str, tmp_path: Path
) -> None:
    done = cli(zk_server.hosts, "run", path, "--", "no-such-command-zk")
    assert done.returncode == 127
    assert "command not found" in done.stderr
    plain = tmp_path / "not-executable"
    plain.write_text("echo hi\n")
    done = cli(zk_server.hosts, "run", path, "--", str(plain))
    assert done.returncode == 126
    assert kazoo.exists(path) is None  # never queued: not even the lock path was made
