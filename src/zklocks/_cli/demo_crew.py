"""The demo's worker processes and the stream of their events.

Each worker (``demo_worker``) is a real process with its own ZooKeeper session. A reader
thread per worker turns its stdout lines into ``Event``s on one queue; ``expect`` waits
for a given event with a deadline, and fails the scenario at once when a *forbidden*
event comes first (say, the wrong worker acquiring) or the worker dies. Nothing here
sleeps to order the story.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

WORKER_MODULE = "zklocks._cli.demo_worker"


class ScenarioFailed(Exception):
    """An expectation of the story did not hold."""


@dataclass(frozen=True)
class Event:
    worker: str
    kind: str
    data: dict[str, Any]
    at: float  # time.monotonic() when the demo read it


@dataclass
class Worker:
    name: str
    kind: str
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)
    wakeups: int = 0
    token: int | None = None
    stopped: bool = False  # SIGSTOPped by the demo

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError) as error:
            raise ScenarioFailed(f"{self.name} is gone; cannot send {line!r}") from error

    def alive(self) -> bool:
        return self.process.poll() is None


class Crew:
    """Starts workers, reads their events, and stops every one of them at the end."""

    def __init__(self, hosts: str, on_event: Callable[[Event], None] | None = None) -> None:
        self.hosts = hosts
        self.workers: dict[str, Worker] = {}
        self._events: queue.Queue[Event] = queue.Queue()
        self._backlog: list[Event] = []
        self._on_event = on_event

    def spawn(
        self,
        name: str,
        path: str,
        *,
        kind: str = "lock",
        session_timeout: float = 3.0,
        store: str | None = None,
    ) -> Worker:
        args = [
            sys.executable,
            "-m",
            WORKER_MODULE,
            "--hosts",
            self.hosts,
            "--path",
            path,
            "--kind",
            kind,
            "--name",
            name,
            "--session-timeout",
            str(session_timeout),
        ]
        if store is not None:
            args += ["--store", store]
        process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        worker = Worker(name, kind, process)
        self.workers[name] = worker
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(
            target=self._read_events, args=(worker, process.stdout), daemon=True
        ).start()
        threading.Thread(
            target=self._read_errors, args=(worker, process.stderr), daemon=True
        ).start()
        return worker

    def _read_events(self, worker: Worker, stream: IO[str]) -> None:
        for line in stream:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            kind = str(data.pop("event", "?"))
            self._events.put(Event(worker.name, kind, data, time.monotonic()))
        self._events.put(Event(worker.name, "exited", {}, time.monotonic()))

    def _read_errors(self, worker: Worker, stream: IO[str]) -> None:
        for line in stream:
            worker.stderr.append(line.rstrip("\n"))
            del worker.stderr[:-20]

    # -- events -------------------------------------------------------------------------

    def pump(self) -> None:
        """Take in every event that has arrived (updates wake-up counts and tokens)."""
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            self._take(event)

    def _take(self, event: Event) -> None:
        worker = self.workers.get(event.worker)
        if worker is None:
            return  # from a worker already stopped
        if event.kind == "woke":
            worker.wakeups += 1
        elif event.kind == "acquired":
            worker.token = int(event.data["token"])
        self._backlog.append(event)
        if self._on_event is not None:
            self._on_event(event)

    def expect(
        self,
        name: str,
        kind: str | tuple[str, ...],
        *,
        timeout: float = 30.0,
        forbid: Iterable[str] = (),
        tick: Callable[[], None] | None = None,
    ) -> Event:
        """The next ``kind`` event (or one of several kinds) from ``name``.

        Fails if it does not come within ``timeout``, if the worker exits or reports an
        error first, or if another worker reports one of the ``forbid`` kinds first.
        """
        kinds = (kind,) if isinstance(kind, str) else kind
        wanted = "/".join(kinds)
        forbidden = set(forbid)
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            self.pump()
            for index in range(seen, len(self._backlog)):
                event = self._backlog[index]
                if event.worker == name and event.kind in kinds:
                    del self._backlog[index]
                    return event
                if event.worker != name and event.kind in forbidden:
                    raise ScenarioFailed(
                        f"expected {name} to be {wanted} next, "
                        f"but {event.worker} was {event.kind} first"
                    )
                if event.worker == name and event.kind in ("exited", "error"):
                    raise ScenarioFailed(
                        f"{name} {event.kind} while we waited for it to be {wanted}: "
                        f"{event.data.get('message', '')} {self._tail(name)}".rstrip()
                    )
            seen = len(self._backlog)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ScenarioFailed(f"{name} was not {wanted} within {timeout:g} s")
            try:
                event = self._events.get(timeout=min(remaining, 0.1 if tick else remaining))
            except queue.Empty:
                if tick is not None:
                    tick()
                continue
            self._take(event)

    def count(self, kind: str, name: str | None = None) -> int:
        """How many ``kind`` events (from ``name``, or anyone) arrived so far."""
        self.pump()
        return sum(1 for e in self._backlog if e.kind == kind and name in (None, e.worker))

    def _tail(self, name: str) -> str:
        lines = self.workers[name].stderr[-5:]
        return ("; stderr: " + " | ".join(lines)) if lines else ""

    # -- signals and the end ------------------------------------------------------------

    def signal(self, name: str, sig: signal.Signals) -> None:
        worker = self.workers[name]
        os.kill(worker.pid, sig)
        if sig == signal.SIGSTOP:
            worker.stopped = True
            _wait_for_state(worker.pid, "Tt")
        elif sig == signal.SIGCONT:
            worker.stopped = False

    def stop_all(self, grace: float = 5.0) -> None:
        """Ask every worker to exit (releasing its lock); kill those that do not."""
        for worker in self.workers.values():
            if worker.stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGCONT)
            if worker.alive():
                with contextlib.suppress(ScenarioFailed):
                    worker.send("exit")
            with contextlib.suppress(OSError, ValueError):
                assert worker.process.stdin is not None
                worker.process.stdin.close()
        deadline = time.monotonic() + grace
        for worker in self.workers.values():
            try:
                worker.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
        self.workers.clear()
        self._backlog.clear()
        self.pump_discard()

    def pump_discard(self) -> None:
        while True:
            try:
                self._events.get_nowait()
            except queue.Empty:
                return


def _wait_for_state(pid: int, states: str, timeout: float = 2.0) -> None:
    """SIGSTOP lands asynchronously: wait until the kernel shows the process stopped."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return  # no procfs: trust the signal
        if state in states:
            return
        time.sleep(0.005)
