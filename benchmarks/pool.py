"""Worker processes (spawned once, reused) and the message protocol with them.

The coordinator sends a worker ``(module, function, kwargs, recycle)``; the worker calls
``function(ctl, **kwargs)``. Inside, ``ctl.sync(payload)`` sends a message and blocks
for the coordinator's answer: that is the start barrier (every worker reports "ready",
the coordinator reads the server's counters, then answers all with the same start
time) and the end barrier (results in, counters read, then "close"). ``ctl.send`` posts
an event without waiting (a waiter thread saying it acquired). The function's return
value ends the call. A worker started with ``recycle`` exits afterwards, so threads a
scenario left blocked never leak into the next one.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import logging
import multiprocessing
import multiprocessing.connection as mpc
import os
import signal
import threading
import time
import traceback
from typing import Any


class WorkerError(RuntimeError):
    """A worker raised, died, or did not answer in time."""


class Ctl:
    """The worker's side of the conversation."""

    def __init__(self, conn: mpc.Connection) -> None:
        self.conn = conn
        self._mutex = threading.Lock()

    def send(self, kind: str, payload: Any = None) -> None:
        with self._mutex:
            self.conn.send((kind, payload))

    def recv(self) -> Any:
        return self.conn.recv()

    def sync(self, payload: Any = None) -> Any:
        self.send("sync", payload)
        return self.recv()


def _worker_main(conn: mpc.Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator decides when we stop
    # Connection chatter while a scenario tears sessions down is not a result; failures
    # reach the coordinator as exceptions.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    logging.getLogger("zklocks").setLevel(logging.CRITICAL)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        module, function, kwargs, recycle = message
        ctl = Ctl(conn)
        try:
            result = getattr(importlib.import_module(module), function)(ctl, **kwargs)
            ctl.send("result", result)
        except BaseException:
            with contextlib.suppress(Exception):
                ctl.send("error", traceback.format_exc())
        if recycle:
            os._exit(0)  # threads left blocked die with us


class _Worker:
    def __init__(self, context: Any) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.process = context.Process(target=_worker_main, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.backlog: collections.deque[tuple[str, Any]] = collections.deque()
        self.busy = False
        self.recycle = False

    @property
    def alive(self) -> bool:
        return self.process.is_alive()


class Pool:
    """Worker processes indexed 0..n-1; dead or recycled ones are replaced on demand."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.workers: list[_Worker | None] = []

    def ensure(self, count: int) -> None:
        while len(self.workers) < count:
            self.workers.append(None)
        for i in range(count):
            worker = self.workers[i]
            if worker is None or not worker.alive:
                self.workers[i] = _Worker(self._context)

    def _worker(self, i: int) -> _Worker:
        worker = self.workers[i]
        if worker is None:
            raise WorkerError(f"worker {i} is not running")
        return worker

    def start(self, i: int, function: str, *, recycle: bool = False, **kwargs: Any) -> None:
        self.ensure(i + 1)
        worker = self._worker(i)
        worker.backlog.clear()
        worker.busy = True
        worker.recycle = recycle
        worker.conn.send(("benchmarks.workers", function, kwargs, recycle))

    def send(self, i: int, message: Any) -> None:
        self._worker(i).conn.send(message)

    def _read(self, i: int, timeout: float) -> tuple[str, Any]:
        worker = self._worker(i)
        if not worker.conn.poll(max(0.0, timeout)):
            raise WorkerError(f"worker {i} did not answer within the time allowed")
        try:
            kind, payload = worker.conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkerError(f"worker {i} died ({exc!r})") from exc
        if kind == "error":
            worker.busy = False
            raise WorkerError(f"worker {i} failed:\n{payload}")
        if kind == "result":
            self._finished(i)
        return kind, payload

    def expect(self, i: int, kind: str, timeout: float = 120.0) -> Any:
        """The next message of ``kind`` from worker ``i`` (others are kept for later)."""
        worker = self._worker(i)
        for n, (k, payload) in enumerate(worker.backlog):
            if k == kind:
                del worker.backlog[n]
                return payload
        deadline = time.monotonic() + timeout
        while True:
            k, payload = self._read(i, deadline - time.monotonic())
            if k == kind:
                return payload
            worker.backlog.append((k, payload))

    def next(self, i: int, timeout: float = 120.0) -> tuple[str, Any]:
        """The next message of any kind from worker ``i``."""
        worker = self._worker(i)
        if worker.backlog:
            return worker.backlog.popleft()
        return self._read(i, timeout)

    def expect_any(self, indices: list[int], kind: str, timeout: float = 120.0) -> tuple[int, Any]:
        """The next message of ``kind`` from any of ``indices``."""
        deadline = time.monotonic() + timeout
        while True:
            for i in indices:
                worker = self._worker(i)
                for n, (k, payload) in enumerate(worker.backlog):
                    if k == kind:
                        del worker.backlog[n]
                        return i, payload
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerError(f"no {kind!r} from workers {indices} in time")
            ready = mpc.wait([self._worker(i).conn for i in indices], remaining)
            for conn in ready:
                i = next(i for i in indices if self._worker(i).conn is conn)
                k, payload = self._read(i, 0)
                self._worker(i).backlog.append((k, payload))

    def sync_all(self, indices: list[int], timeout: float = 120.0) -> list[Any]:
        return [self.expect(i, "sync", timeout) for i in indices]

    def answer_all(self, indices: list[int], message: Any) -> None:
        for i in indices:
            self.send(i, message)

    def results(self, indices: list[int], timeout: float = 120.0) -> list[Any]:
        return [self.expect(i, "result", timeout) for i in indices]

    def _finished(self, i: int) -> None:
        worker = self._worker(i)
        worker.busy = False
        if worker.recycle:  # it exits by itself; wait, so its sessions are closed
            worker.process.join(10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(5)

    def reset(self) -> None:
        """Kill every worker (after a failure: their state is unknown)."""
        for worker in self.workers:
            if worker is not None and worker.alive:
                worker.process.kill()
        for worker in self.workers:
            if worker is not None:
                worker.process.join(10)
                worker.conn.close()
        self.workers = []

    def close(self) -> None:
        for worker in self.workers:
            if worker is not None and worker.alive and not worker.busy:
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
        deadline = time.monotonic() + 5
        for worker in self.workers:
            if worker is not None:
                worker.process.join(max(0.0, deadline - time.monotonic()))
        self.reset()
