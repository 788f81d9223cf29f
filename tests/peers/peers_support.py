"""What the peer tests share: contenders of each client on threads, waiting for the
queue to grow (child watches), and stepping through hand-offs."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

from interop.curator import harness

import helpers

WAIT = 30.0

# Peers' recipes may keep extra nodes beside the queue: at least ``n`` children.
wait_for_children = functools.partial(helpers.wait_for_children, timeout=WAIT, at_least=True)


class ZkContender:
    """A zklocks contender on a thread: acquires, says so, holds until told to release."""

    def __init__(self, lock: Any, label: str) -> None:
        self.lock, self.label = lock, label
        self.granted = threading.Event()
        self._release = threading.Event()
        self.error: BaseException | None = None
        self.lease: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.lease = self.lock.acquire(timeout=WAIT * 4)
            self.granted.set()
            self._release.wait()
            self.lock.release()
        except BaseException as exc:
            self.error = exc
            self.granted.set()

    def start(self) -> None:
        self.thread.start()

    def holds(self, timeout: float = 0.0) -> bool:
        self.granted.wait(timeout)
        if self.error is not None:
            raise AssertionError(f"{self.label} failed: {self.error!r}")
        return self.granted.is_set()

    def release(self) -> None:
        self._release.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), f"{self.label} did not release"
        if self.error is not None:
            raise AssertionError(f"{self.label} failed: {self.error!r}")


class CuratorContender:
    """A Curator contender held on a worker thread of its own (``begin``/``held``/``end``)."""

    def __init__(self, worker: harness.CuratorWorker, name: str) -> None:
        self.worker, self.label = worker, name

    def start(self) -> None:
        self.worker.begin(self.label)

    def holds(self, timeout: float = 0.0) -> bool:
        return self.worker.held(self.label, timeout)

    def release(self) -> None:
        self.worker.end(self.label)


class KazooContender(ZkContender):
    """A kazoo recipe (``Lock``, ``ReadLock``, ``WriteLock``) on a thread."""

    def _run(self) -> None:
        try:
            assert self.lock.acquire(timeout=WAIT * 4)
            self.granted.set()
            self._release.wait()
            self.lock.release()
        except BaseException as exc:
            self.error = exc
            self.granted.set()


def enqueue(kazoo: Any, path: str, contenders: list[Any]) -> None:
    """Start ``contenders`` one after another, each once the one before is in line."""
    before = len(kazoo.get_children(path)) if kazoo.exists(path) else 0
    for n, contender in enumerate(contenders, start=before + 1):
        contender.start()
        wait_for_children(kazoo, path, n)


def step_through(stages: list[tuple[list[Any], list[Any]]]) -> None:
    """For each stage: ``holders`` all hold (waited for), ``waiters`` none (at that
    moment, and after a short grace: a wrongful grant is usually quick); then the holders
    release."""
    for holders, waiters in stages:
        for c in holders:
            assert c.holds(WAIT), f"{c.label} should hold now"
        for c in waiters:
            assert not c.holds(0.3), f"{c.label} holds while {[h.label for h in holders]} do"
        for c in holders:
            c.release()


def add_one(kazoo: Any, counter: str) -> None:
    """The non-atomic update the lock must protect: read, pause, write + 1."""
    value = int(kazoo.get(counter)[0] or b"0")
    time.sleep(0.002)  # widen the window between read and write
    kazoo.set(counter, str(value + 1).encode())


def step_through_rw_timeline(line: list[Any]) -> None:
    """R1 R2 R3 W4 W5 R6 W7, queued in that order: the three readers share, each writer
    holds alone, R6 waits for W5 and W7 for R6."""
    r1, r2, r3, w4, w5, r6, w7 = line
    step_through(
        [
            ([r1, r2, r3], [w4, w5, r6, w7]),
            ([w4], [w5, r6, w7]),
            ([w5], [r6, w7]),
            ([r6], [w7]),
            ([w7], []),
        ]
    )
