"""Functions decorated with ``zklocks.exclusive`` at import, for the multi-process tests:
importable by a spawned child, inherited by a forked one.

Each call is made unique to its test by its first argument (``key=``), so one decorator
serves every test. ``critical`` writes "enter PID" and "exit PID" lines to a log with
``O_APPEND`` (one write each, so lines never interleave): in a run where only one call
ran at a time, the lines alternate enter, exit, enter, exit.
"""

from __future__ import annotations

import os
import time

import zklocks


def record(log: str, event: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{event} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


@zklocks.exclusive("/exclusive/critical", key=lambda run, log, seconds: run)
def critical(run: str, log: str, seconds: float) -> int:
    record(log, "enter")
    time.sleep(seconds)  # the work: long enough that unguarded calls would overlap
    record(log, "exit")
    return os.getpid()


def unguarded(run: str, log: str, seconds: float) -> int:
    """``critical`` without the lock: shows that the log catches an overlap."""
    return critical.__wrapped__(run, log, seconds)  # type: ignore[attr-defined,no-any-return]


@zklocks.exclusive("/exclusive/skip", key=lambda run: run, on_busy="skip")
def skipping(run: str) -> int:
    return os.getpid()


@zklocks.exclusive("/exclusive/raise", key=lambda run: run, on_busy="raise")
def raising(run: str) -> int:
    return os.getpid()


def outcome(name: str, run: str) -> str:
    """What calling ``name`` did in this process: "ran", "skipped" or the error's name."""
    try:
        result = {"skipping": skipping, "raising": raising}[name](run)
    except zklocks.LockError as error:
        return type(error).__name__
    return "skipped" if result is None else "ran"


def overlaps(log: str) -> int:
    """How many times a call entered while another was inside, by the log's lines."""
    inside = found = 0
    with open(log) as lines:
        for line in lines:
            if line.startswith("enter"):
                found += inside > 0
                inside += 1
            else:
                inside -= 1
    return found
