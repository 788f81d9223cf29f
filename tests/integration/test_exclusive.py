"""``zklocks.exclusive``: wait, skip and raise, sync and async, in threads, tasks, and
processes made by fork and by spawn; the client comes from ``hosts`` or the ZKLOCKS_*
variables and is made in each process on its first call.

Where a call must find the lock busy, another call holds it inside the function until
the test lets it go (an event), so "busy" is a fact of the test, not a race.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import exclusive_worker as worker
import pytest

import zklocks
from helpers import run
from zklocks import _exclusive
from zklocks.server import ZooKeeperServer

# Python 3.12+ warns whenever a process with threads forks; forking one is the point here
pytestmark = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


def unique(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}"


@pytest.fixture
def hosts(zk_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """ZKLOCKS_HOSTS for this test (children inherit it); this process's exclusive
    clients are stopped afterwards, so none outlives the test."""
    monkeypatch.setenv("ZKLOCKS_HOSTS", zk_server.hosts)
    for name in ("ZKLOCKS_AUTH", "ZKLOCKS_AUTH_FILE", "ZKLOCKS_ACL", "ZKLOCKS_TLS"):
        monkeypatch.delenv(name, raising=False)
    yield zk_server.hosts
    _exclusive._clients.stop_all()


@pytest.fixture
def observer(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts) as client:
        yield client


def await_contenders(observer: zklocks.Client, path: str, count: int) -> None:
    deadline = time.monotonic() + 20
    lock = observer.lock(path)
    while len(lock.contenders()) < count:
        assert time.monotonic() < deadline, f"{path} never had {count} contenders"
        lock.wait_for_change(timeout=0.5)


class Holder:
    """A call of a decorated function that stays inside it until ``release()``."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.leave = threading.Event()
        self.log: list[str] = []

    def body(self, name: str) -> str:
        self.log.append(f"enter {name}")
        self.inside.set()
        assert self.leave.wait(30)
        self.log.append(f"exit {name}")
        return name


# -- one process, threads --------------------------------------------------------------


def test_wait_runs_calls_one_after_another_across_threads(
    hosts: str, observer: zklocks.Client
) -> None:
    path = f"/exclusive/{unique('wait')}"
    holder = Holder()
    guarded = zklocks.exclusive(path)(holder.body)
    results: list[str] = []
    first = threading.Thread(target=lambda: results.append(guarded("first")))
    first.start()
    assert holder.inside.wait(20)
    second = threading.Thread(target=lambda: results.append(guarded("second")))
    second.start()
    await_contenders(observer, path, 2)  # the second call waits in line
    assert holder.log == ["enter first"]
    holder.leave.set()
    first.join(20)
    second.join(20)
    assert holder.log == ["enter first", "exit first", "enter second", "exit second"]
    assert results == ["first", "second"]
    assert observer.lock(path).contenders() == []


def test_skip_and_raise_do_not_wait_without_a_timeout_and_wait_with_one(
    hosts: str, observer: zklocks.Client
) -> None:
    path = f"/exclusive/{unique('busy')}"
    holder = Holder()
    holding = threading.Thread(target=zklocks.exclusive(path)(holder.body), args=("holder",))
    holding.start()
    try:
        assert holder.inside.wait(20)
        ran: list[str] = []
        skip = zklocks.exclusive(path, on_busy="skip")(lambda: ran.append("skip") or "ran")
        fail = zklocks.exclusive(path, on_busy="raise")(lambda: ran.append("raise") or "ran")
        started = time.monotonic()
        assert skip() is None
        with pytest.raises(zklocks.LockTimeout, match="busy"):
            fail()
        assert time.monotonic() - started < 5.0  # neither waited for the holder (30 s)
        waited = time.monotonic()
        assert zklocks.exclusive(path, on_busy="skip", timeout=0.5)(lambda: "ran")() is None
        with pytest.raises(zklocks.LockTimeout):
            zklocks.exclusive(path, on_busy="raise", timeout=0.5)(lambda: "ran")()
        with pytest.raises(zklocks.LockTimeout):
            zklocks.exclusive(path, timeout=0.5)(lambda: "ran")()  # "wait" with a bound
        assert time.monotonic() - waited >= 1.5  # each waited its 0.5 s
        assert ran == []
        (only,) = observer.lock(path).contenders()  # no node left by a refused call
        assert only.holder
    finally:
        holder.leave.set()
        holding.join(20)
    assert zklocks.exclusive(path, on_busy="raise")(lambda: "ran")() == "ran"  # free again


def test_identifier_names_the_function_and_the_process_and_key_makes_a_lock_per_value(
    hosts: str, observer: zklocks.Client
) -> None:
    base = f"/exclusive/{unique('key')}"
    holder = Holder()

    @zklocks.exclusive(base, key=lambda order, **_: order, on_busy="raise")
    def ship(order: int, *, note: str = "") -> str:
        return holder.body(f"{order}{note}")

    holding = threading.Thread(target=ship, args=(1,))
    other = threading.Thread(target=ship, args=(2,))
    holding.start()
    try:
        assert holder.inside.wait(20)
        (contender,) = observer.lock(f"{base}/1").contenders()
        assert "test_exclusive" in contender.identifier
        assert "ship" in contender.identifier
        assert f"pid {os.getpid()}" in contender.identifier
        with pytest.raises(zklocks.LockTimeout):
            ship(1, note="again")  # the same order: busy
        holder.inside.clear()
        other.start()
        assert holder.inside.wait(20)  # another order runs beside it
        assert sorted(holder.log) == ["enter 1", "enter 2"]
    finally:
        holder.leave.set()
        holding.join(20)
        if other.is_alive():
            other.join(20)


def test_bad_arguments_are_refused_at_decoration_and_bad_keys_at_the_call(hosts: str) -> None:
    with pytest.raises(zklocks.InvalidArgument, match="on_busy"):
        zklocks.exclusive("/exclusive/x", on_busy="queue")  # type: ignore[call-overload]
    with pytest.raises(zklocks.InvalidPath):
        zklocks.exclusive("relative/path")
    with pytest.raises(zklocks.InvalidArgument, match="timeout"):
        zklocks.exclusive("/exclusive/x", timeout=-1)
    with pytest.raises(zklocks.InvalidArgument, match="key"):
        zklocks.exclusive("/exclusive/x", key="{order}")  # type: ignore[arg-type]
    with pytest.raises(zklocks.InvalidArgument):
        zklocks.exclusive("/exclusive/x", hosts="h:notaport")
    bad_key = zklocks.exclusive("/exclusive/x", key=lambda: 1.5)(lambda: "ran")
    with pytest.raises(zklocks.InvalidArgument, match="str or an int"):
        bad_key()
    with pytest.raises(zklocks.InvalidPath):
        zklocks.exclusive("/exclusive/x", key=lambda: "a//b")(lambda: "ran")()


def test_client_settings_come_from_hosts_or_the_command_lines_variables(
    zk_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = f"/exclusive/{unique('env')}"
    try:
        # with hosts given, ZKLOCKS_HOSTS is not used (not even read: it is not hosts)
        monkeypatch.setenv("ZKLOCKS_HOSTS", "h:notaport")
        assert zklocks.exclusive(path, hosts=zk_server.hosts)(lambda: "ran")() == "ran"
        # a variable the command line refuses is refused here, with its words
        monkeypatch.setenv("ZKLOCKS_HOSTS", zk_server.hosts.replace("127.0.0.1", "localhost"))
        monkeypatch.setenv("ZKLOCKS_AUTH", "not-a-credential")
        with pytest.raises(zklocks.InvalidArgument, match=r"ZKLOCKS_.*SCHEME:CREDENTIAL"):
            zklocks.exclusive(path)(lambda: "ran")()
        # and good ones are used: the lock's nodes get the credential's ACL
        monkeypatch.setenv("ZKLOCKS_AUTH", "digest:exclusive:s3cret")
        monkeypatch.setenv("ZKLOCKS_ACL", "creator")
        protected = f"{path}-creator"

        @zklocks.exclusive(protected)
        def guarded() -> str:
            stranger = zklocks.Client(zk_server.hosts)  # no credentials
            with stranger, pytest.raises(zklocks.AccessDenied):
                stranger.lock(protected).contenders()
            return "ran"

        assert guarded() == "ran"
    finally:
        _exclusive._clients.stop_all()


# -- one process, tasks ----------------------------------------------------------------


def test_async_wait_skip_and_raise(hosts: str, observer: zklocks.Client) -> None:
    path = f"/exclusive/{unique('async')}"

    async def scenario() -> None:
        inside, leave = asyncio.Event(), asyncio.Event()
        log: list[str] = []

        @zklocks.exclusive(path)
        async def waits(name: str) -> str:
            log.append(f"enter {name}")
            inside.set()
            await leave.wait()
            log.append(f"exit {name}")
            return name

        @zklocks.exclusive(path, on_busy="skip")
        async def skips() -> str:
            return "ran"

        @zklocks.exclusive(path, on_busy="raise")
        async def raises() -> str:
            return "ran"

        first = asyncio.create_task(waits("first"))
        await inside.wait()
        second = asyncio.create_task(waits("second"))
        await asyncio.to_thread(await_contenders, observer, path, 2)
        assert await skips() is None
        with pytest.raises(zklocks.LockTimeout):
            await raises()
        assert (
            await zklocks.exclusive(path, on_busy="skip", timeout=0.2)(skips.__wrapped__)() is None
        )
        assert log == ["enter first"]
        leave.set()
        assert await asyncio.gather(first, second) == ["first", "second"]
        assert log == ["enter first", "exit first", "enter second", "exit second"]
        assert await raises() == "ran"

    run(scenario())
    assert observer.lock(path).contenders() == []
    assert not _exclusive._clients.by_loop or all(
        entry.loop.is_closed() for entry in _exclusive._clients.by_loop.values()
    )


def test_async_client_is_stopped_when_its_loop_shuts_down(hosts: str) -> None:
    path = f"/exclusive/{unique('async-stop')}"
    clients: list[zklocks.AsyncClient] = []

    @zklocks.exclusive(path)
    async def guarded() -> str:
        return "ran"

    async def scenario() -> None:
        assert await guarded() == "ran"
        assert await guarded() == "ran"  # the same client again
        entries = [e for e in _exclusive._clients.by_loop.values() if not e.loop.is_closed()]
        (entry,) = entries
        clients.append(entry.starting.result())
        assert clients[0].connected

    asyncio.run(scenario())
    assert not clients[0].connected and "stopped" in repr(clients[0])
    assert asyncio.run(_call(guarded)) == "ran"  # a new loop makes its own client


async def _call(fn: object) -> object:
    return await fn()  # type: ignore[operator]


# -- processes ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_calls_in_many_processes_never_overlap(hosts: str, method: str, tmp_path: Path) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    context = multiprocessing.get_context(method)
    run, log = unique(method), str(tmp_path / "log")
    worker.critical(run, log, 0)  # this process made its client before the children exist
    calls = [(run, log, 0.05)] * 12
    with context.Pool(4) as pool:
        pids = pool.starmap(worker.critical, calls)
        # the same work unguarded, on the same pool: the log catches overlaps
        unguarded_log = str(tmp_path / "unguarded")
        pool.starmap(worker.unguarded, [(run, unguarded_log, 0.2)] * 4)
    assert os.getpid() not in pids and len(set(pids)) >= 2, pids  # several processes ran
    assert worker.overlaps(log) == 0
    assert Path(log).read_text().count("enter") == 13
    assert worker.overlaps(unguarded_log) > 0


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_skip_and_raise_in_other_processes_while_one_holds(
    hosts: str, method: str, observer: zklocks.Client
) -> None:
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    run = unique(method)
    context = multiprocessing.get_context(method)
    assert worker.outcome("skipping", run) == "ran"  # made in this process before the fork
    with (
        observer.lock(f"/exclusive/skip/{run}"),
        observer.lock(f"/exclusive/raise/{run}"),
        context.Pool(2) as pool,
    ):
        outcomes = pool.starmap(worker.outcome, [("skipping", run), ("raising", run)] * 2)
    assert outcomes == ["skipped", "LockTimeout"] * 2
    with context.Pool(1) as pool:  # released: they run
        assert pool.starmap(worker.outcome, [("skipping", run), ("raising", run)]) == [
            "ran",
            "ran",
        ]
