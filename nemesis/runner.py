"""One nemesis run: an ensemble behind proxies, client processes, faults, the verdict.

Everything started here is stopped here, on every way out (Ctrl-C included): the
nemesis undoes its fault, the clients are resumed and asked to stop (killed if they do
not), the ensemble is stopped and the proxies closed. The clients also die with us
(``PR_SET_PDEATHSIG``) and stop by themselves after the run's length and a margin; the
members have the watchdogs of ``zklocks.server``. The guarded-set workload's PostgreSQL
cluster and redis-server (``fence_servers.py``) are the run's own, started before the
ensemble and stopped after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from nemesis import plants, register, report
from nemesis.checker import Model, check, model_for
from nemesis.client import Spec
from nemesis.faults import Live, Nemesis
from nemesis.fence_servers import PostgresServer, RedisServer
from nemesis.history import Event, dumps, parse
from nemesis.links import Links
from nemesis.timing import TIMINGS, Timing
from zklocks.server import ZooKeeperEnsemble

ROOT = Path(__file__).resolve().parent.parent
CHECK_EVERY = 2.0  # seconds between two looks at the history with --stop-on-violation
EXIT_CLEAN, EXIT_VIOLATION, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class Options:
    minutes: float
    members: int
    workload: str
    out: Path
    seed: int
    timing: str = "sample"
    plant: str | None = None
    clients: int | None = None
    permits: int = 2
    stop_on_violation: bool = False
    lock_delay: float | None = None  # every client's lock_delay; the checker judges it

    @property
    def client_count(self) -> int:
        return self.clients or 6

    def command(self) -> str:
        """The command line that repeats this run (same seed, same schedule)."""
        words = [
            "python -m nemesis run",
            f"--minutes {self.minutes:g}",
            f"--members {self.members}",
            f"--workload {self.workload}",
            f"--timing {self.timing}",
            f"--seed {self.seed}",
        ]
        if self.plant:
            words.append(f"--plant {self.plant}")
        if self.clients:
            words.append(f"--clients {self.clients}")
        if self.lock_delay is not None:
            words.append(f"--lock-delay {self.lock_delay:g}")
        return " ".join([*words, f"--out {self.out}"])


def _log(message: str) -> None:
    print(f"[nemesis {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Recorder:
    """The history as it arrives: kept, appended to ``history.jsonl``, shown to ``Live``."""

    def __init__(self, path: Path, live: Live) -> None:
        self._mutex = threading.Lock()
        self._events: list[Event] = []
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self._live = live

    def __call__(self, event: Event) -> None:
        with self._mutex:
            self._events.append(event)
            if not self._file.closed:
                self._file.write(dumps(event) + "\n")
                self._file.flush()
        self._live.observe(event)

    def wake(self) -> None:
        self._live.poke()

    def snapshot(self) -> list[Event]:
        with self._mutex:
            return list(self._events)

    def close(self) -> None:
        with self._mutex:
            self._file.close()


class ClientProcess:
    def __init__(self, spec: Spec, out: Path, record: Recorder) -> None:
        self.spec = spec
        self._log: IO[bytes] = open(out / f"client-{spec.id}.log", "wb")  # noqa: SIM115
        python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nemesis.client", json.dumps(asdict(spec))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": python_path},
            start_new_session=True,  # a terminal's Ctrl-C reaches the runner alone
        )
        self._reader = threading.Thread(target=self._read, args=(record,), daemon=True)
        self._reader.start()

    def _read(self, record: Recorder) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("c") == self.spec.id:
                record(event)
        self.process.wait()
        record.wake()  # whoever waits on the clients sees this one gone

    @property
    def exited(self) -> bool:
        return self.process.poll() is not None

    def ask_to_stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGCONT)  # a stopped process reads nothing
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.write(b"stop\n")
            self.process.stdin.close()

    def finish(self, deadline: float) -> None:
        try:
            self.process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(5)
        self._log.close()


def _client_specs(
    options: Options,
    timing: Timing,
    ensemble: ZooKeeperEnsemble,
    where: register.Where | None,
) -> list[Spec]:
    """One client per member in turn, each on that member alone; the last on all of them."""
    seeds = random.Random(options.seed)
    specs = []
    for i in range(options.client_count):
        last = i == options.client_count - 1
        member = ensemble.members[i % len(ensemble.members)]
        specs.append(
            Spec(
                id=i,
                hosts=ensemble.hosts if last else member.hosts,
                home=None if last else member.myid,
                workload=options.workload,
                path=f"/nemesis/{options.workload}",
                permits=options.permits,
                session_timeout=timing.session_timeout,
                tick_time=timing.client_tick,
                acquire_timeout=4 * timing.session_timeout,
                seed=seeds.getrandbits(32),
                lifetime=options.minutes * 60 + 60,
                parent=os.getpid(),
                plant=options.plant,
                stores=asdict(where) if where is not None else None,
                lock_delay=options.lock_delay,
            )
        )
    return specs


def run(options: Options) -> int:
    """One run; the exit status: 0 clean, 1 violation, 2 could not run, 130 Ctrl-C."""
    if options.plant in plants.LEASE_PLANTS and not plants.lease_plant_available():
        print(
            f"nemesis: --plant {options.plant} needs {plants.LEASE_RULE_MODULE}.plant, "
            "which this zklocks does not have",
            file=sys.stderr,
        )
        return EXIT_ERROR
    timing = TIMINGS[options.timing]
    model = model_for(options.workload, options.permits)
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    for stale in (*out.glob("client-*.log"), *out.glob("member-*.log")):
        stale.unlink(missing_ok=True)
    live = Live()
    record = Recorder(out / "history.jsonl", live)
    params: dict[str, Any] = {
        **asdict(options),
        "out": str(out),
        "clients": options.client_count,
        "tick_ms": timing.tick_ms,
        "sync_limit": timing.sync_limit,
        "session_timeout": timing.session_timeout,
        "command": options.command(),
    }
    began = time.monotonic()
    record({"c": "runner", "ev": "start", "t": began, "params": params})
    _log(f"{options.command()}")
    status = EXIT_CLEAN
    error: str | None = None
    links = Links()
    try:
        _run(options, timing, model, links, live, record)
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
        _log("interrupted: everything started was stopped; judging what was recorded")
    except Exception as exc:
        status = EXIT_ERROR
        error = f"{type(exc).__name__}: {exc}"
        _log(f"the run failed: {error}")
    finally:
        links.close()
        record({"c": "runner", "ev": "end", "t": time.monotonic()})
        record.close()
    history = parse(record.snapshot())
    if history.final_errors and status == EXIT_CLEAN:  # an unread set judges nothing
        status, error = EXIT_ERROR, "a final set was not read: " + "; ".join(history.final_errors)
        _log(error)
    verdict = check(history, model)
    summary = report.write(out, history, verdict, model, error=error)
    print(summary, flush=True)
    if status != EXIT_CLEAN:
        return status
    return EXIT_CLEAN if verdict.ok else EXIT_VIOLATION


def _run(
    options: Options,
    timing: Timing,
    model: Model,
    links: Links,
    live: Live,
    record: Recorder,
) -> None:
    servers = contextlib.ExitStack()
    try:
        postgres = redis = None
        if options.workload == "guarded-set":
            postgres = servers.enter_context(PostgresServer())
            redis = servers.enter_context(RedisServer())
            assert redis.process is not None
            record({"c": "runner", "ev": "stores", "t": time.monotonic(), "pg_port": postgres.port,
                    "redis_port": redis.port, "redis_pid": redis.process.pid})  # fmt: skip
        _run_ensemble(options, timing, model, links, live, record, postgres, redis)
    finally:
        with _uninterrupted():
            servers.close()


def _run_ensemble(
    options: Options,
    timing: Timing,
    model: Model,
    links: Links,
    live: Live,
    record: Recorder,
    postgres: PostgresServer | None,
    redis: RedisServer | None,
) -> None:
    ensemble = ZooKeeperEnsemble(
        options.members,
        tick_time=timing.tick_ms,
        sync_limit=timing.sync_limit,
        force_sync=False,
        peer_route=links.route,
        four_letter_words=timing.four_letter_words,
    )
    clients: list[ClientProcess] = []
    nemesis: Nemesis | None = None
    thread: threading.Thread | None = None
    where: register.Where | None = None
    ensemble.start()
    try:
        if postgres is not None and redis is not None:
            where = register.Where(ensemble.hosts, "/nemesis/set", postgres.dsn, redis.port)
            register.prepare(where)
        _log(f"{options.members} members serve ({timing.name} timing); starting clients")
        for spec in _client_specs(options, timing, ensemble, where):
            clients.append(ClientProcess(spec, options.out, record))  # each one stopped

        def up_or_gone() -> bool:
            return len(live.pids) == len(clients) or any(c.exited for c in clients)

        live.wait_for(up_or_gone, timeout=60)
        if len(live.pids) != len(clients):
            errors = "; ".join(text for _, text in parse(record.snapshot()).errors)
            raise RuntimeError(f"the clients did not all start: {errors or 'see client-*.log'}")
        faults_begin = time.monotonic()
        until = faults_begin + options.minutes * 60
        record({"c": "runner", "ev": "faults-begin", "t": faults_begin})
        nemesis = Nemesis(ensemble, links, live, timing, options.workload, options.seed, record)
        thread = threading.Thread(target=nemesis.run, args=(until,), daemon=True)
        thread.start()
        _log(f"clients hold and the nemesis runs for {options.minutes:g} min")
        pause = threading.Event()
        while time.monotonic() < until:
            pause.wait(min(CHECK_EVERY, max(until - time.monotonic(), 0.0)))
            if options.stop_on_violation and not check(parse(record.snapshot()), model).ok:
                _log("a violation: stopping early (--stop-on-violation)")
                break
    finally:
        with _uninterrupted():
            if nemesis is not None:
                nemesis.stop()
            if thread is not None:
                thread.join(120)  # a restart in progress finishes first
            _stop_all(ensemble, nemesis, clients, options, timing, where, record)


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C waits while we stop what we started (a second one would leave it running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop_all(
    ensemble: ZooKeeperEnsemble,
    nemesis: Nemesis | None,
    clients: list[ClientProcess],
    options: Options,
    timing: Timing,
    where: register.Where | None,
    record: Recorder,
) -> None:
    try:
        if nemesis is not None:
            nemesis.restore()
    finally:
        try:
            for client in clients:
                client.ask_to_stop()
            deadline = time.monotonic() + 4 * timing.session_timeout + 10
            for client in clients:
                client.finish(deadline)
            if where is not None and clients:
                _read_finals(where, record)
        finally:
            for member in ensemble.members:
                log = member.log_path
                if log is not None and log.exists():
                    with contextlib.suppress(OSError):
                        shutil.copyfile(log, options.out / f"member-{member.myid}.log")
            ensemble.stop()


def _read_finals(where: register.Where, record: Recorder) -> None:
    """Each store's set, once no client writes any more (the set check's evidence)."""
    for store in register.STORES:
        event: dict[str, Any] = {"c": "runner", "ev": "final", "store": store}
        try:
            event["elements"] = register.read_final(where, store)
        except Exception as exc:
            event["error"] = f"{type(exc).__name__}: {exc}"
        record({**event, "t": time.monotonic()})
