"""The recipes of docs/recipes.md, run as they are written, against a real ZooKeeper:
a Celery worker (prefork, 4 processes, on the run's own redis-server as broker),
gunicorn with ``--preload``, a FastAPI lifespan, and a multiprocessing pool.

The code blocks titled with a file name are written to a directory as those files;
the test adds only the modules the recipes import for their work (``reports``,
``storage``) and, for Celery and gunicorn, a harness module that records what each
process saw. Runs record "enter" and "exit" events; an "enter" while another run is
inside is an overlap. Each check of "no overlap" is paired with the same work run
unguarded on the same processes, which must overlap: the record can see one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import zklocks
from fence_servers import RedisServer, free_port
from zklocks.server import ZooKeeperServer

RECIPES = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"


def recipe_files() -> dict[str, str]:
    """Every ```python title="NAME"``` block of docs/recipes.md, by file name."""
    text = RECIPES.read_text(encoding="utf-8")
    return dict(re.findall(r'```python title="([^"]+)"\n(.*?)```', text, re.S))


def write(directory: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        (directory / name).write_text(textwrap.dedent(source), encoding="utf-8")


def overlaps(events: list[str]) -> int:
    """Entries made while another run was inside (events: "enter ..."/"exit ...")."""
    inside = found = 0
    for event in events:
        if event.startswith("enter"):
            found += inside > 0
            inside += 1
        else:
            inside -= 1
    return found


def environment(zk_server: ZooKeeperServer, directory: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKLOCKS_")}
    env.update(ZKLOCKS_HOSTS=zk_server.hosts, PYTHONPATH=str(directory), **extra)
    env.pop("ZKLOCKS_SERVER_TAG", None)  # the children start no ZooKeeper
    return env


def stop_group(process: subprocess.Popen[Any], signum: int = signal.SIGTERM) -> int:
    """End a process started in a session of its own; every process of that session must
    be gone once it has exited (its children reaped by it, none left behind)."""
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            raise AssertionError(f"{process.args[:4]} did not stop in 30 s") from None
    leftover = [pid for pid in _session_members(process.pid)]
    for pid in leftover:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not leftover, f"processes left behind: {leftover}"
    return process.returncode


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":  # the session id; not a zombie
                members.append(int(entry.name))
    return members


def read_lines(fd: int, count: int, limit: float) -> list[dict[str, Any]]:
    """``count`` JSON lines from a pipe, or fail after ``limit`` seconds."""
    lines: list[dict[str, Any]] = []
    buffer = b""
    deadline = time.monotonic() + limit
    while len(lines) < count:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"only {len(lines)} of {count} reports in {limit} s: {lines}"
        chunk = os.read(fd, 65536)
        assert chunk, f"the pipe closed after {len(lines)} of {count} reports: {lines}"
        buffer += chunk
        *done, buffer = buffer.split(b"\n")
        lines.extend(json.loads(line) for line in done)
    return lines


# -- Celery ------------------------------------------------------------------------------

REPORTS = '''
"""The recipe's work, for the test: each run records itself in Redis."""
import os
import time

import redis
from celery import current_task

_redis = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])


def run_work(events: str) -> str:
    _redis.rpush(events, f"enter {os.getpid()}")
    time.sleep(0.05)  # the work: long enough that unguarded runs overlap
    _redis.rpush(events, f"exit {os.getpid()}")
    return f"report by {os.getpid()}"


def build_nightly_report() -> str:
    return run_work("events")


def send_due_invoices() -> int:
    _redis.rpush("invoices", "entered")
    sent = 0
    while not _redis.lpop("invoices-done"):  # one invoice a step, until told to stop
        sent += 1
        time.sleep(0.01)
    _redis.rpush("invoices", "ran to the end")
    return sent


def sync_customer_account(customer_id: int) -> str:
    _redis.rpush("entered", current_task.request.id)
    _redis.blpop(["release"], timeout=60)  # held until the test says so
    return f"synced {customer_id}"
'''

CELERY_HARNESS = '''
"""Test-only additions to the recipe's worker (--include)."""
from celery.signals import worker_init

import reports
import tasks


@tasks.app.task
def unguarded() -> str:
    return reports.run_work("unguarded")  # the recipe's work, without the lock


@worker_init.connect
def use_it_before_the_pool_forks(**_: object) -> None:
    # As an app that warms up at start: the main process makes its client now, and the
    # pool's processes, forked after this, inherit it (each must make its own).
    tasks.nightly_report()
'''


@dataclass
class CeleryRig:
    app: Any
    redis: Any
    log: Path


@pytest.fixture(scope="module")
def celery_rig(
    zk_server: ZooKeeperServer,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CeleryRig]:
    """A Celery worker on the run's redis-server (``conftest.py``), in databases of its
    own (2: broker, 3: results): the fence tests' keys, in database 0, never meet these."""
    import redis
    from celery import Celery

    broker = f"redis://127.0.0.1:{redis_server.port}/2"
    backend = f"redis://127.0.0.1:{redis_server.port}/3"

    directory = tmp_path_factory.mktemp("celery")
    files = recipe_files()
    write(directory, {"tasks.py": files["tasks.py"]})
    write(directory, {"reports.py": REPORTS, "harness.py": CELERY_HARNESS})
    env = environment(
        zk_server,
        directory,
        CELERY_BROKER_URL=broker,
        CELERY_RESULT_BACKEND=backend,
    )
    log = directory / "worker.log"
    with open(log, "wb") as output:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "prefork",
             "--concurrency", "4", "--include", "harness", "--prefetch-multiplier", "1",
             "--without-gossip", "--without-mingle", "--without-heartbeat",
             "--loglevel", "WARNING", "--hostname", f"zklocks-{os.getpid()}@%h"],
            cwd=directory,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    app = Celery("sender", broker=broker, backend=backend)
    store = redis.Redis.from_url(broker)
    store.flushdb()  # a database of this fixture's own: start from nothing
    try:
        yield CeleryRig(app, store, log)
    finally:
        try:
            assert stop_group(worker) == 0, log.read_text()
        finally:
            app.close()
            store.close()


def events(rig: CeleryRig, key: str) -> list[str]:
    return [event.decode() for event in rig.redis.lrange(key, 0, -1)]


def test_celery_prefork_runs_twenty_same_key_tasks_one_at_a_time(celery_rig: CeleryRig) -> None:
    rig = celery_rig
    results = [rig.app.send_task("tasks.nightly_report") for _ in range(20)]
    reports = [result.get(timeout=60) for result in results]
    assert all(report.startswith("report by") for report in reports), rig.log.read_text()
    runs = events(rig, "events")
    assert len(runs) == 2 * 21  # the 20 tasks, and the main process's run before the fork
    assert overlaps(runs) == 0, runs
    task_pids = {report.split()[-1] for report in reports}
    main_pid = runs[0].split()[1]  # worker_init ran first, before any task
    assert main_pid not in task_pids and len(task_pids) >= 2, (main_pid, task_pids)

    unguarded = [rig.app.send_task("harness.unguarded") for _ in range(8)]
    for result in unguarded:
        result.get(timeout=60)
    assert overlaps(events(rig, "unguarded")) > 0  # the same work, unlocked, overlaps


def test_celery_on_loss_cancel_stops_the_task_when_its_lock_is_broken(
    celery_rig: CeleryRig, kazoo: Any
) -> None:
    """``zklocks break`` (here: the holder's node deleted) while ``send_invoices`` runs:
    the task stops at once and fails with LockLost; it never runs to its end."""
    rig = celery_rig
    result = rig.app.send_task("tasks.send_invoices")
    entered = rig.redis.blpop(["invoices"], timeout=60)
    assert entered is not None and entered[1] == b"entered", rig.log.read_text()
    for child in kazoo.get_children("/jobs/send-invoices"):
        kazoo.delete(f"/jobs/send-invoices/{child}")
    with pytest.raises(Exception) as failed:
        result.get(timeout=30)
    assert type(failed.value).__name__ == "LockLost", failed.value
    rig.redis.rpush("invoices-done", 1)  # (had it not stopped, this would end it)
    assert rig.redis.lrange("invoices", 0, -1) == [], "the task ran on after the loss"


def test_celery_skip_mode_skips_instead_of_overlapping(celery_rig: CeleryRig) -> None:
    rig = celery_rig
    results = [rig.app.send_task("tasks.sync_customer", args=[42]) for _ in range(20)]
    entered = rig.redis.blpop(["entered"], timeout=60)
    assert entered is not None, rig.log.read_text()
    holder = entered[1].decode()  # the one task inside, holding customer 42 until released
    try:
        others = [result for result in results if result.id != holder]
        assert len(others) == 19
        assert [result.get(timeout=60) for result in others] == [None] * 19
        assert rig.redis.llen("entered") == 0  # none of them ran the work
        # another customer's lock is another lock: it runs beside the held one
        other = rig.app.send_task("tasks.sync_customer", args=[43])
        entered = rig.redis.blpop(["entered"], timeout=60)
        assert entered is not None and entered[1].decode() == other.id
    finally:
        rig.redis.rpush("release", 1, 1)
    (holding,) = [result for result in results if result.id == holder]
    assert holding.get(timeout=60) == "synced 42"
    assert other.get(timeout=60) == "synced 43"


# -- gunicorn --preload -------------------------------------------------------------------

GUNICORN_HARNESS = '''
"""Served as harness:app. The recipe's app, and what a preloaded app may also do in the
master: make a client at import, and hold a lock with it."""
import json
import os

import zklocks
from app import HOSTS, app  # noqa: F401  (the recipe's app, served as it is)

master = zklocks.Client(HOSTS).start()
master_lock = master.lock(os.environ["MASTER_LOCK"])
master_lease = master_lock.acquire(timeout=10)


def report(**fields: object) -> None:
    os.write(int(os.environ["REPORT_FD"]), (json.dumps(fields) + "\\n").encode())


report(role="master", pid=os.getpid(), token=master_lease.token)
'''

GUNICORN_HARNESS_CONF = """
import os
import time

import zklocks

import app
import gunicorn_conf as recipe
import harness

worker_exit = recipe.worker_exit


def post_fork(server, worker):
    started = time.monotonic()
    try:  # the master's client, inherited: refused at once
        harness.master_lock.try_acquire()
        inherited = "returned"
    except zklocks.ClientClosed as error:
        inherited = str(error)
    took = time.monotonic() - started
    recipe.post_fork(server, worker)  # the recipe: this worker's own client
    with app.client.lock(os.environ["WORKER_LOCK"]).acquire(timeout=10) as lease:
        harness.report(
            role="worker", pid=os.getpid(), inherited=inherited, took=took, token=lease.token
        )


def on_exit(server):
    harness.master.stop()
"""


def test_gunicorn_preload_workers_each_lock_and_none_hangs(
    zk_server: ZooKeeperServer, tmp_path: Path
) -> None:
    files = recipe_files()
    write(tmp_path, {name: files[name] for name in ("app.py", "gunicorn_conf.py")})
    write(tmp_path, {"harness.py": GUNICORN_HARNESS, "harness_conf.py": GUNICORN_HARNESS_CONF})
    stamp = time.monotonic_ns()
    master_lock, worker_lock = f"/gunicorn/master-{stamp}", f"/gunicorn/workers-{stamp}"
    port = free_port()
    read_end, write_end = os.pipe()
    env = environment(
        zk_server,
        tmp_path,
        MASTER_LOCK=master_lock,
        WORKER_LOCK=worker_lock,
        REPORT_FD=str(write_end),
    )
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--preload", "--workers", "3", "--bind",
             f"127.0.0.1:{port}", "--timeout", "20", "-c", "harness_conf.py", "harness:app"],
            cwd=tmp_path,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            start_new_session=True,
        )  # fmt: skip
    os.close(write_end)
    try:
        reports = read_lines(read_end, 4, 60)
        (master,) = [r for r in reports if r["role"] == "master"]
        workers = [r for r in reports if r["role"] == "worker"]
        assert len({w["pid"] for w in workers}) == 3 and master["pid"] not in {
            w["pid"] for w in workers
        }
        for worker in workers:
            assert "inherited across fork" in worker["inherited"], worker
            assert worker["took"] < 2.0, worker
        assert len({w["token"] for w in workers}) == 3  # each locked, in turn
        assert min(w["token"] for w in workers) > master["token"]

        served = set()
        for _ in range(6):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=20) as reply:
                body = reply.read().decode()
                assert reply.status == 200 and "under token" in body, body
                served.add(body.split()[3])
        assert served <= {str(w["pid"]) for w in workers}

        with zklocks.Client(zk_server.hosts) as observer:
            (holder,) = observer.lock(master_lock).contenders()  # the master's, unaffected
            assert holder.holder and holder.token == master["token"]
            assert holder.pid == master["pid"]
            assert observer.lock(worker_lock).contenders() == []
    finally:
        os.close(read_end)
        assert stop_group(server) == 0, log.read_text()
    with zklocks.Client(zk_server.hosts) as observer:  # the master stopped its session
        assert observer.lock(master_lock).contenders() == []


# -- FastAPI ------------------------------------------------------------------------------


# Starlette's newest TestClient prefers httpx2; the oldest FastAPI the dev extra allows
# needs httpx. Both work: only the note about that choice is silenced.
@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_fastapi_lifespan_client_locks_per_request_and_stops_at_shutdown(
    zk_server: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    write(tmp_path, {"main.py": recipe_files()["main.py"]})
    monkeypatch.setenv("ZKLOCKS_HOSTS", zk_server.hosts)
    spec = importlib.util.spec_from_file_location("recipe_main", tmp_path / "main.py")
    assert spec is not None and spec.loader is not None
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    order = time.monotonic_ns() % 10**9
    with TestClient(main.app) as http, zklocks.Client(zk_server.hosts) as observer:
        client = main.app.state.zk
        assert isinstance(client, zklocks.AsyncClient) and client.connected
        first = http.post(f"/orders/{order}/ship")
        second = http.post(f"/orders/{order}/ship")
        assert first.status_code == second.status_code == 200, first.text
        assert first.json()["order"] == order
        assert second.json()["token"] > first.json()["token"]
        assert observer.lock(f"/orders/{order}").contenders() == []  # released each time
        with observer.lock(f"/orders/{order}"):  # another holder: the request gives up
            busy = http.post(f"/orders/{order}/ship")
        assert busy.status_code == 409, busy.text
        assert observer.lock(f"/orders/{order}").contenders() == []  # its node went too
    assert not client.connected and "stopped" in repr(client)  # the lifespan stopped it


# -- multiprocessing -----------------------------------------------------------------------

STORAGE = '''
"""The recipe's work, for the test: each run records itself in a log."""
import os
import time


def compact_shard(shard: int) -> str:
    fd = os.open(os.environ["COMPACT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"enter {shard} {os.getpid()}\\n".encode())
        time.sleep(0.1)  # the work
        os.write(fd, f"exit {shard} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)
    return f"compacted {shard}"
'''


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_pool_compacts_each_shard_once_at_a_time(
    zk_server: ZooKeeperServer, tmp_path: Path, method: str
) -> None:
    write(tmp_path, {"compact.py": recipe_files()["compact.py"], "storage.py": STORAGE})
    log = tmp_path / "compact.log"
    done = subprocess.run(
        [sys.executable, "compact.py", method],
        cwd=tmp_path,
        env=environment(zk_server, tmp_path, COMPACT_LOG=str(log)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([f"compacted {s}" for s in [1, 2, 3, 1, 2, 3]])
    lines = log.read_text().splitlines()
    assert len(lines) == 12
    for shard in "123":
        assert overlaps([line for line in lines if line.split()[1] == shard]) == 0
    assert overlaps(lines) > 0  # different shards did run side by side
    assert len({line.split()[2] for line in lines}) >= 2  # in several processes
