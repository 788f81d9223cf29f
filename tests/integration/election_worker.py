"""Election and multi-lock processes for test_election.py (run as scripts).

election_worker.py candidate HOSTS PATH IDENTIFIER STORE
    campaign with a 1 s session; when leader write balance=<identifier> to the fenced
    store with the term's token and print "LEADER <token>"; then wait for a line on
    stdin, report (before anything else) whether the term is lost on our own clock,
    try a stale write, print "lost=... write=..." and resign.

election_worker.py terms HOSTS PATH MARKER N
    N times: campaign, create MARKER exclusively (it must not exist: another leader
    would hold it), remove it, resign. Prints "TERMS <n>".

election_worker.py multi HOSTS ROUNDS PATH...
    ROUNDS times: take every PATH at once with multi_lock (in the order given) with
    a 30 s timeout, release. Prints "ROUNDS <n>".
"""

from __future__ import annotations

import os
import sys
import time

import zklocks
from zklocks.fencing import FencedStore, StaleToken


def candidate(hosts: str, path: str, identifier: str, store_path: str) -> None:
    store = FencedStore(store_path)
    with zklocks.Client(hosts, session_timeout=1.0) as client:
        election = client.election(path, identifier=identifier)
        term = election.campaign()
        store.write("balance", identifier, term.token)
        print(f"LEADER {term.token}", flush=True)
        sys.stdin.readline()
        lost = term.lost  # the clock rule: no need to hear from ZooKeeper first
        try:
            store.write("balance", f"{identifier}-late", term.token)
            outcome = "accepted"
        except StaleToken:
            outcome = "refused"
        print(f"lost={lost} write={outcome}", flush=True)
        election.resign()


def terms(hosts: str, path: str, marker: str, count: int) -> None:
    with zklocks.Client(hosts) as client:
        election = client.election(path, identifier=f"pid-{os.getpid()}")
        for _ in range(count):
            with election:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # two leaders: fails
                os.close(fd)
                time.sleep(0.01)  # a term long enough for a second leader to collide with
                os.unlink(marker)
        print(f"TERMS {count}", flush=True)


def multi(hosts: str, rounds: int, paths: list[str]) -> None:
    with zklocks.Client(hosts) as client:
        multi_lock = client.multi_lock([client.lock(path) for path in paths])
        for _ in range(rounds):
            multi_lock.acquire(timeout=30)
            multi_lock.release()
        print(f"ROUNDS {rounds}", flush=True)


def main() -> None:
    mode, hosts, *rest = sys.argv[1:]
    if mode == "candidate":
        candidate(hosts, rest[0], rest[1], rest[2])
    elif mode == "terms":
        terms(hosts, rest[0], rest[1], int(rest[2]))
    else:
        multi(hosts, int(rest[0]), rest[1:])


if __name__ == "__main__":
    main()
