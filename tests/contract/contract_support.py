"""Helpers for the contract suite: a wake-up probe and worker processes."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")


@dataclass
class WakeProbe:
    """Counts, per thread, how often a waiter was woken by a deletion, and who waits."""

    wakeups: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, threading.Event] = field(default_factory=dict)
    mutex: threading.Lock = field(default_factory=threading.Lock)

    def waiting_event(self, name: str) -> threading.Event:
        with self.mutex:
            return self.waiting.setdefault(name, threading.Event())

    def total(self) -> int:
        with self.mutex:
            return sum(self.wakeups.values())


def run_worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
