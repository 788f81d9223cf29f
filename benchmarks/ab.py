"""A/B in one run: what both ``tracing_ab.py`` and ``caller_reads_ab.py`` compare with.

Sides alternate round by round (A, B, A, B...) in one process, so both see the same load
on a shared, noisy machine; per row, the median wall time and the median client CPU time
per cycle (``time.process_time``: every thread of this process, loop threads included)
of each side, and B/A.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable

import zklocks

Cycle = Callable[[], int]  # runs some cycles, returns how many


def uncontended(client: zklocks.Client, path: str, cycles: int) -> Cycle:
    """The uncontended fair cycle on one lock, ``cycles`` times."""
    lock = client.lock(path)

    def run() -> int:
        for _ in range(cycles):
            with lock:
                pass
        return cycles

    return run


def many_locks(client: zklocks.Client, base: str, threads: int, cycles: int) -> Cycle:
    """``threads`` threads, one lock each under ``base``, ``cycles`` cycles each."""
    locks = [client.lock(f"{base}/{n}") for n in range(threads)]

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


def _round(cycle: Cycle) -> tuple[float, float]:
    """Run one round; (wall seconds, CPU seconds) per cycle."""
    wall, cpu = time.perf_counter(), time.process_time()
    cycles = cycle()
    return (time.perf_counter() - wall) / cycles, (time.process_time() - cpu) / cycles


def compare(
    rows: dict[str, dict[str, Cycle]],
    rounds: int,
    before: Callable[[str], object] = lambda _side: None,
) -> None:
    """Print the table: each row's sides ``"A"`` and ``"B"`` in alternating rounds;
    ``before(side)`` runs before each round (to switch what the side measures)."""
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'row':<26} {'wall A µs':>10} {'wall B µs':>10} {'B/A':>6}"
        f" {'cpu A µs':>10} {'cpu B µs':>10} {'B/A':>6}"
    )
    for name, cycles in rows.items():
        for side, cycle in cycles.items():
            before(side)
            cycle()  # warm: connections, nodes, caches
        sides: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for _ in range(rounds):
            for side in ("A", "B"):
                before(side)
                sides[side].append(_round(cycles[side]))
        wall = {s: statistics.median(w for w, _ in v) * 1e6 for s, v in sides.items()}
        cpu = {s: statistics.median(c for _, c in v) * 1e6 for s, v in sides.items()}
        print(
            f"{name:<26} {wall['A']:>10.0f} {wall['B']:>10.0f} "
            f"{wall['B'] / wall['A']:>6.3f} {cpu['A']:>10.0f} {cpu['B']:>10.0f} "
            f"{cpu['B'] / cpu['A']:>6.3f}"
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
