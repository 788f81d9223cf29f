"""A contender in its own process, for the contract tests (run as a script).

worker.py HOSTS PATH KIND count ITERATIONS COUNTER_FILE
    increment the number in COUNTER_FILE non-atomically, ITERATIONS times, each
    time under the lock: only mutual exclusion keeps the final count exact.
worker.py HOSTS PATH KIND hold SESSION_TIMEOUT
    acquire, print "HELD <token>", then hold until stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import zklocks


def make_lock(client: zklocks.Client, path: str, kind: str) -> zklocks.Lock:
    if kind == "fair":
        return client.lock(path)
    if kind == "unfair":
        return client.lock(path, fair=False)
    if kind in ("read", "write"):
        rw = client.read_write_lock(path)
        return rw.read if kind == "read" else rw.write
    if kind.startswith("semaphore"):
        return client.semaphore(path, permits=int(kind.removeprefix("semaphore") or 1))
    if kind == "election":
        return client.election(path)
    raise SystemExit(f"unknown kind {kind}")


def main() -> None:
    hosts, path, kind, mode, *rest = sys.argv[1:]
    if mode == "count":
        iterations, counter = int(rest[0]), Path(rest[1])
        with zklocks.Client(hosts) as client:
            lock = make_lock(client, path, kind)
            for _ in range(iterations):
                with lock:
                    value = int(counter.read_text())
                    counter.write_text(str(value + 1))
        return
    if mode == "hold":
        with zklocks.Client(hosts, session_timeout=float(rest[0])) as client:
            lease = make_lock(client, path, kind).acquire()
            print(f"HELD {lease.token}", flush=True)
            sys.stdin.read()
        return
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
