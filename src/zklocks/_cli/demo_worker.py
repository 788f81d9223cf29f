"""One contender of ``zklocks demo``, in its own process (``python -m ...demo_worker``).

It takes commands on stdin, one per line, and reports events on stdout as JSON lines,
so the demo orders its story by events, never by sleeping::

    acquire                 -> {"event": "acquired", "token", "node", "wakeups"}
    release                 -> {"event": "released", "wakeups"}
    write KEY VALUE         -> {"event": "wrote"} | {"event": "refused", "highest"}
                               (to the FencedStore given with --store, with our token)
    resume KEY VALUE        -> after a pause: {"event": "lease", "lost", "reason"}, then
                               the write above with our old token, as a holder that
                               does not know better would do
    exit                    -> releases if held, closes the session, exits

and, unasked: {"event": "ready"} once connected; {"event": "watching", "nodes"} once its
deletion watches are set and it sleeps; {"event": "woke", "node"} each time a watched
node's deletion wakes it. Wake-ups are counted by the carrier this process's client
runs on (``_sync/watch_tap.py``), passed in as its ``session_factory``: it sees every
watch the lock flows set and every event those watches fire, and a ZooKeeper deletion
watch firing while the acquire flow waits is exactly one wake-up.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from zklocks import Client, Lease, Lock, LockError
from zklocks._sync.watch_tap import tapped_carrier
from zklocks._vocabulary import DEFAULT_SESSION_TIMEOUT
from zklocks.fencing import FencedStore, StaleToken

_print_lock = threading.Lock()
_wakeups = 0


def report(event: str, **fields: Any) -> None:
    with _print_lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def _woken(node: str) -> None:
    global _wakeups
    with _print_lock:
        _wakeups += 1
    report("woke", node=node)


def _watching(nodes: list[str]) -> None:
    report("watching", nodes=nodes)


def _die_with_parent() -> None:
    """Linux: SIGKILL us when the demo dies, even while we are SIGSTOPped."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl
            os._exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zklocks-demo-worker")
    parser.add_argument("--hosts", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--kind", choices=("lock", "read", "write"), default="lock")
    parser.add_argument("--name", required=True)
    parser.add_argument("--session-timeout", type=float, default=DEFAULT_SESSION_TIMEOUT)
    parser.add_argument("--store")
    args = parser.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the demo's to handle
    store = FencedStore(args.store) if args.store else None
    client = Client(
        args.hosts,
        session_timeout=args.session_timeout,
        session_factory=tapped_carrier(watching=_watching, woken=_woken),
    )
    with client:
        if args.kind == "lock":
            lock = client.lock(args.path, identifier=args.name)
        else:
            rw = client.read_write_lock(args.path, identifier=args.name)
            lock = rw.read if args.kind == "read" else rw.write
        report("ready", pid=os.getpid(), session_timeout=client.session_timeout)
        _serve(lock, store)
    return 0


def _serve(lock: Lock, store: FencedStore | None) -> None:
    lease: Lease | None = None
    for line in sys.stdin:
        command, *words = line.split()
        try:
            if command == "acquire":
                lease = lock.acquire(timeout=60)
                report("acquired", token=lease.token, node=lease.node, wakeups=_wakeups)
            elif command == "release":
                lock.release()
                lease = None
                report("released", wakeups=_wakeups)
            elif command == "write" and lease is not None and store is not None:
                _write(store, words[0], words[1], lease.token)
            elif command == "resume" and lease is not None and store is not None:
                lost = lease.wait_lost(timeout=30)  # the clock rule answers at once
                report("lease", lost=lost, reason=lease.lost_reason)
                _write(store, words[0], words[1], lease.token)
            elif command == "exit":
                break
            else:
                report("error", message=f"cannot {line.strip()!r} now")
        except LockError as error:
            report("error", message=f"{type(error).__name__}: {error}")
    if lease is not None:
        with contextlib.suppress(LockError):
            lock.release()


def _write(store: FencedStore, key: str, value: str, token: int) -> None:
    try:
        store.write(key, value, token)
    except StaleToken as refused:
        report("refused", token=token, highest=refused.highest, message=str(refused))
    else:
        report("wrote", token=token, key=key, value=value)


if __name__ == "__main__":
    sys.exit(main())
