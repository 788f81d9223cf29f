"""What the waiting caller reading its own reply saves (issue 38): an A/B in one run.

``python -m benchmarks.caller_reads_ab`` runs the uncontended fair cycle and the
many-locks row (threads, one lock each) on one local ZooKeeper with two sync clients
side by side: A, whose loop thread reads every reply (the transport before issue 38),
and B, whose waiting callers read their own (``_transport/caller_reads.py``). Rounds
alternate A, B, A, B... in one process, so both sides see the same load on a shared,
noisy machine. It prints, per row, the median wall time and the median client CPU time
per cycle (``time.process_time``: every thread of this process, the loop threads
included) of each side, and B/A. The shape is ``tracing_ab.py``'s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable

import zklocks
from zklocks._frontend.options import ClientOptions
from zklocks._sync.native_carrier import NativeSyncCarrier
from zklocks.server import ZooKeeperServer


def _loop_reads(options: ClientOptions) -> NativeSyncCarrier:
    """Side A: the native carrier with the loop thread reading every reply."""
    carrier = NativeSyncCarrier(options)
    carrier._connection.thread_reads = False
    return carrier


def _round(cycle: Callable[[], int]) -> tuple[float, float]:
    """Run one round; (wall seconds, CPU seconds) per cycle."""
    wall, cpu = time.perf_counter(), time.process_time()
    cycles = cycle()
    return (time.perf_counter() - wall) / cycles, (time.process_time() - cpu) / cycles


def _uncontended(client: zklocks.Client, name: str, cycles: int) -> Callable[[], int]:
    lock = client.lock(f"/bench/reads/{name}/uncontended")

    def run() -> int:
        for _ in range(cycles):
            with lock:
                pass
        return cycles

    return run


def _many_locks(client: zklocks.Client, name: str, threads: int, cycles: int) -> Callable[[], int]:
    locks = [client.lock(f"/bench/reads/{name}/many/{n}") for n in range(threads)]

    def worker(lock: zklocks.Lock) -> None:
        for _ in range(cycles):
            with lock:
                pass

    def run() -> int:
        crew = [threading.Thread(target=worker, args=(lock,)) for lock in locks]
        for thread in crew:
            thread.start()
        for thread in crew:
            thread.join()
        return threads * cycles

    return run


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
                "A": _uncontended(a, "a", args.cycles),
                "B": _uncontended(b, "b", args.cycles),
            },
            f"many locks ({args.threads} threads)": {
                "A": _many_locks(a, "a", args.threads, many),
                "B": _many_locks(b, "b", args.threads, many),
            },
        }
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"{'row':<26} {'wall A µs':>10} {'wall B µs':>10} {'B/A':>6}"
            f" {'cpu A µs':>10} {'cpu B µs':>10} {'B/A':>6}"
        )
        for name, cycles in rows.items():
            for cycle in cycles.values():
                cycle()  # warm: connections, nodes, caches
            sides: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
            for _ in range(args.rounds):
                for side in ("A", "B"):
                    sides[side].append(_round(cycles[side]))
            wall = {s: statistics.median(w for w, _ in v) * 1e6 for s, v in sides.items()}
            cpu = {s: statistics.median(c for _, c in v) * 1e6 for s, v in sides.items()}
            print(
                f"{name:<26} {wall['A']:>10.0f} {wall['B']:>10.0f} "
                f"{wall['B'] / wall['A']:>6.3f} {cpu['A']:>10.0f} {cpu['B']:>10.0f} "
                f"{cpu['B'] / cpu['A']:>6.3f}"
            )
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
