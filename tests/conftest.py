"""Fixtures that run real ZooKeeper servers, and a guard that none outlives the run.

Every JVM that ``zklocks.server`` starts carries ``-Dzklocks.tag=$ZKLOCKS_SERVER_TAG``.
We set a tag unique to this run before any server starts (child processes inherit it),
so after the last teardown we can find, kill and report any server that leaked, and
never touch the servers of someone else's run on the same machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from nemesis.fence_servers import PostgresServer, RedisServer

import zklocks
from helpers import CALL_FAILED, HostsInOrder, show_member_logs_if_failed, versions_read
from zklocks._transport import connection as _connection
from zklocks.server import ZooKeeperEnsemble, ZooKeeperServer

RUN_TAG = f"pytest-{os.getpid()}"
os.environ["ZKLOCKS_SERVER_TAG"] = RUN_TAG
_child_tags = itertools.count(1)


def _tagged_pids(tag: str) -> list[int]:
    """Live processes (JVMs and their watchdogs) started under ``tag`` or a sub-tag of it."""
    found: list[int] = []
    if not Path("/proc").is_dir():
        return found  # no procfs, no check
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone meanwhile
        if any(
            arg == f"-Dzklocks.tag={tag}" or arg.startswith(f"-Dzklocks.tag={tag}-") for arg in args
        ):
            found.append(int(entry.name))
    return found


@pytest.fixture
def tagged_pids() -> Callable[[str], list[int]]:
    """Lists the live processes started under a tag (zombies have no command line)."""
    return _tagged_pids


@pytest.fixture
def child_tag() -> str:
    """A tag for the servers of one child process, so a test can count just those."""
    return f"{RUN_TAG}-child{next(_child_tags)}"


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a thread of its own (a test's proxy, or timers under test)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@pytest.fixture
def in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients made in this test try their hosts as listed (not shuffled)."""
    monkeypatch.setattr(_connection, "random", HostsInOrder)


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    """One standalone server for the whole run; don't stop, kill or pause it.

    tickTime 200 ms allows sessions from 400 ms (lock-loss tests), and a raised
    maxSessionTimeout still grants the usual 10 s sessions instead of 4 s.
    """
    with ZooKeeperServer(tick_time=200, max_session_timeout=60_000) as server:
        versions_read(server.hosts)
        yield server


@pytest.fixture
def client(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    """A started ``zklocks.Client`` on ``zk_server``, closed after the test."""
    with zklocks.Client(zk_server.hosts) as made:
        yield made


@pytest.fixture
def kazoo(zk_server: ZooKeeperServer) -> Iterator[Any]:
    """An independent kazoo client on ``zk_server``, to look at and poke the server."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_server.hosts)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def fresh_zk_server() -> Iterator[ZooKeeperServer]:
    """A server of the test's own, configured like ``zk_server``, free to kill or pause."""
    with ZooKeeperServer(tick_time=200, max_session_timeout=60_000) as server:
        versions_read(server.hosts)
        yield server


@pytest.fixture
def zk_ensemble(request: pytest.FixtureRequest) -> Iterator[ZooKeeperEnsemble]:
    """A running three-member quorum of the test's own (members may be taken down)."""
    with ZooKeeperEnsemble(3, tick_time=200, max_session_timeout=60_000) as ensemble:
        versions_read(ensemble.hosts)
        yield ensemble
        show_member_logs_if_failed(request, ensemble)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[CALL_FAILED] = True
    return report


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    yield  # session-scoped fixtures are torn down in there
    leaked = _tagged_pids(RUN_TAG)
    if not leaked:
        return
    for pid in leaked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_line(
            f"ZooKeeper processes outlived the run and were killed: pids {leaked}", red=True
        )


# A store beside ZooKeeper, for the fencing tests and the recipes' Celery broker: a
# private PostgreSQL cluster and a private redis-server for the whole run, started on
# first use only.


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of this run's own; tests keep apart by their table or resource names."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of this run's own; tests keep apart by their key prefixes."""
    with RedisServer() as server:
        yield server
