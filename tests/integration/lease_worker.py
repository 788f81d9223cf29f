"""A holder that gets paused (run as a script by test_lock_family.py).

    lease_worker.py HOSTS PATH STORE

Acquires PATH with a 1 s session, writes balance=100 to the fenced store with its
token, prints "HELD <token>", then waits for a line on stdin. After it (the test has
paused and resumed this process meanwhile) it reports, *before* doing anything else,
whether its lease is lost on its own clock, then tries its stale write.
"""

from __future__ import annotations

import sys

import zklocks
from zklocks.fencing import FencedStore, StaleToken


def main() -> None:
    hosts, path, store_path = sys.argv[1:4]
    store = FencedStore(store_path)
    with zklocks.Client(hosts, session_timeout=1.0) as client:
        lock = client.lock(path)
        lease = lock.acquire()
        store.write("balance", "100", lease.token)
        print(f"HELD {lease.token}", flush=True)
        sys.stdin.readline()
        lost = lease.lost  # the clock rule: no need to hear from ZooKeeper first
        try:
            store.write("balance", "150", lease.token)
            outcome = "accepted"
        except StaleToken:
            outcome = "refused"
        print(f"lost={lost} write={outcome}", flush=True)
        lock.release()


if __name__ == "__main__":
    main()
