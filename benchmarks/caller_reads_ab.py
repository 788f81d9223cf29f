"""What the waiting caller reading its own reply saves (issue 38): an A/B in one run.

``python -m benchmarks.caller_reads_ab`` runs the uncontended fair cycle and the
many-locks row (threads, one lock each) on one local ZooKeeper with two sync clients
side by side: A, whose loop thread reads every reply (the transport before issue 38),
and B, whose waiting callers read their own (``_transport/caller_reads.py``). Rounds
alternate A, B, A, B... in one process, so both sides see the same load on a shared,
noisy machine. It prints, per row, the median wall time and the median client CPU time
per cycle (``time.process_time``: every thread of this process, the loop threads
included) of each side, and B/A (``ab.py``, which ``tracing_ab.py`` uses too).
"""

from __future__ import annotations

import argparse

import zklocks
from benchmarks import ab
from zklocks._frontend.options import ClientOptions
from zklocks._sync.native_carrier import NativeSyncCarrier
from zklocks.server import ZooKeeperServer


def _loop_reads(options: ClientOptions) -> NativeSyncCarrier:
    """Side A: the native carrier with the loop thread reading every reply."""
    carrier = NativeSyncCarrier(options)
    carrier._connection.thread_reads = False
    return carrier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds per side (default 15)")
    parser.add_argument("--cycles", type=int, default=150, help="cycles per round")
    parser.add_argument("--threads", type=int, default=50, help="many-locks threads")
    args = parser.parse_args()
    with (
        ZooKeeperServer(tick_time=2000, max_session_timeout=60_000) as zk,
        zklocks.Client(zk.hosts, session_factory=_loop_reads) as a,
        zklocks.Client(zk.hosts) as b,
    ):
        many = max(1, args.cycles // args.threads * 4)
        rows = {
            "uncontended": {
                "A": ab.uncontended(a, "/bench/reads/a/uncontended", args.cycles),
                "B": ab.uncontended(b, "/bench/reads/b/uncontended", args.cycles),
            },
            f"many locks ({args.threads} threads)": {
                "A": ab.many_locks(a, "/bench/reads/a/many", args.threads, many),
                "B": ab.many_locks(b, "/bench/reads/b/many", args.threads, many),
            },
        }
        ab.compare(rows, args.rounds)


if __name__ == "__main__":
    main()
