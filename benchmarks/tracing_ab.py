"""What the OpenTelemetry hooks cost when no tracer provider is configured (issue 36).

``python -m benchmarks.tracing_ab`` (``make bench-tracing``) runs the uncontended fair
cycle (sync and asyncio) and the many-locks row (threads, one lock each) on one local
ZooKeeper, in alternating rounds inside one process: round A with the hooks uninstalled
(as without the ``otel`` extra: one ``is None`` test per acquire), round B with them
installed and no provider (what a user with the extra and no SDK pays). Alternating in
one run is what makes the ratio worth quoting on a shared, noisy machine: both sides see
the same load. It prints, per row, the median wall time and the median client CPU time
per cycle (``time.process_time``: every thread of this process, so the loop thread's
share counts) of each side, and B/A.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
from collections.abc import Callable

import zklocks
from zklocks import tracing
from zklocks.server import ZooKeeperServer


def _round(cycle: Callable[[], int]) -> tuple[float, float]:
    """Run one round; (wall seconds, CPU seconds) per cycle."""
    wall, cpu = time.perf_counter(), time.process_time()
    cycles = cycle()
    return (time.perf_counter() - wall) / cycles, (time.process_time() - cpu) / cycles


def _uncontended(client: zklocks.Client, cycles: int) -> Callable[[], int]:
    lock = client.lock("/bench/tracing/uncontended")

    def run() -> int:
        for _ in range(cycles):
            with lock:
                pass
        return cycles

    return run


def _many_locks(client: zklocks.Client, threads: int, cycles: int) -> Callable[[], int]:
    locks = [client.lock(f"/bench/tracing/many/{n}") for n in range(threads)]

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


def _asyncio_uncontended(
    loop: asyncio.AbstractEventLoop, client: zklocks.AsyncClient, cycles: int
) -> Callable[[], int]:
    lock = client.lock("/bench/tracing/async")

    async def cycle() -> int:
        for _ in range(cycles):
            async with lock:
                pass
        return cycles

    return lambda: loop.run_until_complete(cycle())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds per side (default 15)")
    parser.add_argument("--cycles", type=int, default=150, help="cycles per round")
    parser.add_argument("--threads", type=int, default=50, help="many-locks threads")
    args = parser.parse_args()
    if not tracing.install():
        raise SystemExit('opentelemetry-api is not installed: pip install "zklocks[otel]"')
    loop = asyncio.new_event_loop()
    with (
        ZooKeeperServer(tick_time=2000, max_session_timeout=60_000) as zk,
        zklocks.Client(zk.hosts) as client,
    ):
        async_client = zklocks.AsyncClient(zk.hosts)
        loop.run_until_complete(async_client.start())
        rows = {
            "uncontended (sync)": _uncontended(client, args.cycles),
            "uncontended (asyncio)": _asyncio_uncontended(loop, async_client, args.cycles),
            f"many locks ({args.threads} threads)": _many_locks(
                client, args.threads, max(1, args.cycles // args.threads * 4)
            ),
        }
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"{'row':<26} {'wall A µs':>10} {'wall B µs':>10} {'B/A':>6}"
            f" {'cpu A µs':>10} {'cpu B µs':>10} {'B/A':>6}"
        )
        for name, cycle in rows.items():
            cycle()  # warm: connections, nodes, caches
            sides: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
            for _ in range(args.rounds):
                for side in ("A", "B"):
                    if side == "A":
                        tracing.uninstall()
                    else:
                        tracing.install()
                    sides[side].append(_round(cycle))
            wall = {s: statistics.median(w for w, _ in v) * 1e6 for s, v in sides.items()}
            cpu = {s: statistics.median(c for _, c in v) * 1e6 for s, v in sides.items()}
            print(
                f"{name:<26} {wall['A']:>10.0f} {wall['B']:>10.0f} "
                f"{wall['B'] / wall['A']:>6.3f} {cpu['A']:>10.0f} {cpu['B']:>10.0f} "
                f"{cpu['B'] / cpu['A']:>6.3f}"
            )
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        loop.run_until_complete(async_client.stop())
    loop.close()


if __name__ == "__main__":
    main()
