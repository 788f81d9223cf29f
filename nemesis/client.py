"""One client process of a nemesis run: ``python -m nemesis.client SPEC``.

``SPEC`` is a JSON object (``Spec``). The process makes one ``zklocks.Client`` and loops:
acquire (a planned hold drawn from its seed: mostly short, often a few session timeouts
long), hold, release. While it holds it looks at ``lease.lost`` every ``POLL`` seconds
and records what the lease said (``held`` at most every ``HELD_EVERY`` seconds and
always the last one, the first ``lost``), and a second thread reads the lock's
contenders every ``READ_EVERY`` seconds: a busy holder, whose member keeps answering it
(the answers a lease rule may or may not trust). In the guarded-set workload each turn
of the hold loop is: look at the lease, then add one element to the set kept in each
store (``register.py``: ZooKeeper, PostgreSQL, Redis) by a read-modify-write: read every
store's set, work a while, write each back with the element, without looking at the
lease again (the gap fencing is for); guarded, unless the plant is ``unguarded``.
With a ``lock_delay`` every lock has it; the process then records ``queued`` (its
acquire's first listing had come back) and ``session-lost`` (its session expired), and
after a lost lease releases only once the expiry is heard (or three session timeouts
passed): what the checker's lock-delay rule needs to prove a loss abnormal.

Every event goes to stdout as one JSON line (``nemesis.history``). The process stops
on a ``stop`` line or EOF on stdin, on SIGTERM, when its ``lifetime`` is over, or when
the runner dies (``PR_SET_PDEATHSIG``): it never outlives the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import zklocks
from nemesis import plants
from nemesis.history import dumps
from nemesis.register import Refused, Store, Where, close_stores, open_stores

POLL = 0.02  # seconds between two looks at lease.lost while holding
HELD_EVERY = 0.1  # at most this often a "held" record (and always the last one)
READ_EVERY = 0.05  # x session timeout: how often a holder reads the lock's contenders
Turn = Generator[None, None, None]  # a store's read-modify-write: read, yield, write


@dataclass(frozen=True)
class Spec:
    id: int
    hosts: str
    home: int | None  # the member it talks to, or None for all of them
    workload: str  # lock, rwlock, semaphore, guarded-set
    path: str
    permits: int
    session_timeout: float
    tick_time: float | None  # None: the client learns it (the stock profile)
    acquire_timeout: float
    seed: int
    lifetime: float  # stop by itself after this many seconds
    parent: int  # the runner's pid
    plant: str | None = None
    stores: dict[str, Any] | None = None  # guarded-set: where the set lives (a Where)
    long_share: float = 0.4  # share of holds a few session timeouts long
    lock_delay: float | None = None  # every lock's lock_delay (--lock-delay)


class Emitter:
    """JSON lines to stdout, one writer at a time; a closed pipe means the run is over."""

    def __init__(self, client: int, stop: threading.Event) -> None:
        self._client = client
        self._stop = stop
        self._mutex = threading.Lock()

    def __call__(self, ev: str, t: float | None = None, **fields: Any) -> None:
        event = {"c": self._client, "ev": ev, "t": time.monotonic() if t is None else t}
        event.update(fields)
        line = dumps(event) + "\n"
        with self._mutex:
            try:
                sys.stdout.write(line)
                sys.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._stop.set()


class Worker:
    def __init__(self, spec: Spec, emit: Emitter, stop: threading.Event) -> None:
        self.spec = spec
        self.emit = emit
        self.stop = stop
        self.rng = random.Random(spec.seed)
        self.deadline = time.monotonic() + spec.lifetime
        self.holding = threading.Event()
        self.client: zklocks.Client | None = None
        self.stores: list[Store] = []
        self._writes = 0
        self.acquiring: int | None = None  # the acquisition whose acquire runs now
        self.expired = threading.Event()  # the session expired since the last grant

    # -- the client ---------------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"session_timeout": self.spec.session_timeout}
        # tickTime lets the lease rule know how long a cut-off member goes on answering;
        # passed once the library takes it (until then it learns it from `conf`, or not).
        if (
            self.spec.tick_time is not None
            and "tick_time" in inspect.signature(zklocks.Client).parameters
        ):
            options["tick_time"] = self.spec.tick_time
        return options

    def start_client(self) -> zklocks.Client | None:
        options = self._options()
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            client = zklocks.Client(self.spec.hosts, connect_timeout=10.0, **options)
            try:
                client.start()
            except Exception as exc:
                self.emit("client-error", error=f"start: {type(exc).__name__}: {exc}")
                client.stop()
                self.stop.wait(0.5)
                continue
            self.emit(
                "client-start",
                pid=os.getpid(),
                home=self.spec.home,
                hosts=self.spec.hosts,
                session_timeout=client.session_timeout,
                tick_time=options.get("tick_time"),
                plant=self.spec.plant,
                lock_delay=self.spec.lock_delay,
            )
            client.add_listener(self._heard)
            return client
        return None

    def _heard(self, state: zklocks.ConnectionState) -> None:
        """The session expired: the checker's proof that a hold's node went abnormally."""
        if state is zklocks.ConnectionState.LOST:
            self.emit("session-lost")
            self.expired.set()

    def _locks(self, client: zklocks.Client) -> dict[str, zklocks.Lock]:
        spec = self.spec
        ignored = spec.lock_delay is None or spec.plant == "no-lock-delay"
        delay: dict[str, Any] = {} if ignored else {"lock_delay": spec.lock_delay}
        if spec.workload == "rwlock":
            rw = client.read_write_lock(spec.path, **delay)
            return {"read": rw.read, "write": rw.write}
        if spec.workload == "semaphore":
            return {"permit": client.semaphore(spec.path, permits=spec.permits, **delay)}
        return {"lock": client.lock(spec.path, **delay)}

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        client = self.client = self.start_client()
        if client is None:
            return
        try:
            if self.spec.workload == "guarded-set":
                assert self.spec.stores is not None
                where = Where(**self.spec.stores)
                guarded = self.spec.plant != "unguarded"
                self.stores = open_stores(client, self.spec.hosts, where, guarded=guarded)
            locks = self._locks(client)
            reader = next(iter(self._locks(client).values()))  # its own lock object
            threading.Thread(target=self._read_while_holding, args=(reader,), daemon=True).start()
            n = 0
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                n += 1
                self.cycle(n, locks)
        finally:
            self.stop.set()
            close_stores(self.stores)
            client.stop()
            self.emit("client-stop")

    def _kind(self, locks: dict[str, zklocks.Lock]) -> str:
        if "read" in locks:
            return "read" if self.rng.random() < 0.6 else "write"
        return next(iter(locks))

    def _planned_hold(self) -> float:
        session = self.spec.session_timeout
        if self.rng.random() < self.spec.long_share:
            return self.rng.uniform(2.0, 3.0) * session
        return self.rng.uniform(0.01, 0.1) * session

    def cycle(self, n: int, locks: dict[str, zklocks.Lock]) -> None:
        kind = self._kind(locks)
        lock = locks[kind]
        planned = self._planned_hold()
        asked = time.monotonic()
        self.emit("invoke", asked, op="acquire", n=n, kind=kind, hold=planned)
        self.acquiring = n
        try:
            lease = lock.acquire(timeout=self.spec.acquire_timeout)
        except Exception as exc:
            self.acquiring = None
            self.emit("fail", op="acquire", n=n, error=f"{type(exc).__name__}: {exc}")
            self.stop.wait(self.rng.uniform(0.0, 0.05) * self.spec.session_timeout)
            return
        granted = time.monotonic()
        self.acquiring = None
        self.expired.clear()
        early = self.spec.plant == "early-grant"
        # the early-grant plant: report the grant, and the lease held, from the ask
        self.emit("ok", asked if early else granted, op="acquire", n=n, **_lease_fields(lease))
        if early:
            self.emit("held", asked, n=n)

        def told(lost: Any) -> None:
            self.emit("told", n=n, reason=lost.lost_reason)

        lease.add_lost_callback(told)
        self.hold(n, lease, granted + planned)
        if lease.lost and self.spec.lock_delay is not None:
            self._await_expiry()
        self.emit("invoke", op="release", n=n)
        try:
            lock.release()
        except Exception as exc:
            self.emit("fail", op="release", n=n, error=f"{type(exc).__name__}: {exc}")
        else:
            self.emit("ok", op="release", n=n)
        self.stop.wait(self.rng.uniform(0.0, 0.05) * self.spec.session_timeout)

    def _await_expiry(self) -> None:
        """A lost lease: release only once the session's expiry is heard (or a while has
        passed). The checker's proof that the node went abnormally, not by our release,
        is an expiry heard *before* the release was invoked (``checker.py``, lock-delay).
        """
        deadline = time.monotonic() + 3 * self.spec.session_timeout
        while not self.stop.is_set() and time.monotonic() < deadline:
            if self.expired.wait(min(0.1, max(deadline - time.monotonic(), 0.0))):
                return

    def hold(self, n: int, lease: zklocks.Lease, until: float) -> None:
        """Look at the lease until the planned end, a loss, or the run's end."""
        last_held: float | None = None
        emitted: float | None = None
        self.holding.set()
        try:
            while True:
                looked = time.monotonic()  # read *before* the look: held at this instant
                if lease.lost:
                    self.emit("lost", looked, n=n, reason=lease.lost_reason)
                    return
                last_held = looked
                if emitted is None or looked - emitted >= HELD_EVERY:
                    self.emit("held", looked, n=n)
                    emitted = looked
                if self.stores:
                    self._add_to_set(n, lease, self.stores)
                left = until - time.monotonic()
                if left <= 0 or self.stop.is_set():
                    return
                lease.wait_lost(min(POLL, left))
        finally:
            self.holding.clear()
            if last_held is not None and last_held != emitted:
                self.emit("held", last_held, n=n)

    def _add_to_set(self, n: int, lease: zklocks.Lease, stores: list[Store]) -> None:
        # Read every store's set, work on what the lock protects, write each back: no
        # second look at the lease in between, as in most real code. A pause there is
        # what fencing must catch.
        self._writes += 1
        w, token = self._writes, lease.token
        element = f"{token}:c{self.spec.id}:{w}"
        turns: list[tuple[dict[str, Any], Turn]] = []
        try:
            for store in stores:
                key: dict[str, Any] = {"n": n, "w": w, "store": store.name}
                self.emit("invoke", op="write", token=token, element=element, **key)
                turn = store.turn(lease, element)
                if self._step(key, turn):
                    turns.append((key, turn))
            time.sleep(self.rng.uniform(0.02, 0.1) * self.spec.session_timeout)
            for key, turn in turns:
                if self._step(key, turn, last=True):
                    self.emit("ok", op="write", **key)
        finally:
            for _, turn in turns:
                turn.close()  # a turn left at its read writes nothing (a rollback)

    def _step(self, key: dict[str, Any], turn: Turn, *, last: bool = False) -> bool:
        """Run a turn to its next step: False (and the failure recorded) if it raised."""
        try:
            next(turn, None) if last else next(turn)
        except Refused as exc:
            self.emit("fail", op="write", error=str(exc), **key)
        except Exception as exc:
            self.emit("fail", op="write", error=f"unknown: {type(exc).__name__}: {exc}", **key)
        else:
            return True
        return False

    def _read_while_holding(self, lock: zklocks.Lock) -> None:
        every = READ_EVERY * self.spec.session_timeout
        while not self.stop.is_set():
            if not self.holding.wait(0.5):
                continue
            with contextlib.suppress(Exception):
                lock.contenders()
            self.stop.wait(every)


class QueuedRecorder(logging.Handler):
    """Records ``queued`` when the library logs that our acquire waits.

    ``zklocks.lock`` logs ``<path>: <kind> queued at position N`` (INFO) when the acquire
    first waits, after the reply of the listing that came with our node's create: the
    listing a lock-delay's count starts from (docs/locks.md, "Lock-delay"). The time read
    here is after that reply: a sound "it had listed by then" for the checker. Records
    of WARNING and above go on to the root logger's handlers (the client's log).
    """

    QUEUED = "%s: %s queued at position %d"

    def __init__(self, worker: Worker) -> None:
        super().__init__(logging.INFO)
        self._worker = worker

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            logging.getLogger().handle(record)
            return
        n = self._worker.acquiring
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg == self.QUEUED and args[:1] == (self._worker.spec.path,) and n is not None:
            self._worker.emit("queued", n=n)


def _record_queued(worker: Worker) -> None:
    lock_log = logging.getLogger("zklocks.lock")
    lock_log.setLevel(logging.INFO)
    lock_log.propagate = False  # the INFO records are ours; the rest goes on by hand
    lock_log.addHandler(QueuedRecorder(worker))


def _lease_fields(lease: zklocks.Lease) -> dict[str, Any]:
    return {"token": lease.token, "node": lease.node, "owner": lease.owner}


def _die_with_parent(parent: int) -> None:
    """SIGKILL us when the runner dies, even while we are SIGSTOPped (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)  # it died before we could ask


def _watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def main(argv: list[str]) -> int:
    spec = Spec(**json.loads(argv[0]))
    _die_with_parent(spec.parent)
    logging.basicConfig(
        level=logging.WARNING, format="%(relativeCreated)9.0f %(name)s %(levelname)s %(message)s"
    )
    stop = threading.Event()
    emit = Emitter(spec.id, stop)
    try:
        plants.apply_in_client(spec.plant)
    except Exception as exc:
        emit("client-error", error=f"plant {spec.plant}: {type(exc).__name__}: {exc}")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    worker = Worker(spec, emit, stop)
    if spec.lock_delay is not None:
        _record_queued(worker)
    ended = threading.Event()

    def work() -> None:
        try:
            worker.run()
        except BaseException as exc:
            emit("client-error", error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            ended.set()

    threading.Thread(target=work, daemon=True).start()
    # Asked to stop while an acquire waits: give it a moment, then stop the client, which
    # ends the acquire (the flow deletes its node on the way out).
    while not ended.wait(0.2):
        if stop.is_set() and not ended.wait(2.0):
            if worker.client is not None:
                worker.client.stop()
            ended.wait(10.0)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
