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
from collections.abc import Callable

import zklocks
from benchmarks import ab
from zklocks import tracing
from zklocks.server import ZooKeeperServer


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
        asyncio_cycle = _asyncio_uncontended(loop, async_client, args.cycles)
        sync_cycle = ab.uncontended(client, "/bench/tracing/uncontended", args.cycles)
        many_cycle = ab.many_locks(
            client, "/bench/tracing/many", args.threads, max(1, args.cycles // args.threads * 4)
        )
        rows = {
            "uncontended (sync)": {"A": sync_cycle, "B": sync_cycle},
            "uncontended (asyncio)": {"A": asyncio_cycle, "B": asyncio_cycle},
            f"many locks ({args.threads} threads)": {"A": many_cycle, "B": many_cycle},
        }
        # A: the hooks uninstalled; B: installed, with no provider
        ab.compare(
            rows,
            args.rounds,
            lambda side: (tracing.install if side == "B" else tracing.uninstall)(),
        )
        loop.run_until_complete(async_client.stop())
    loop.close()


if __name__ == "__main__":
    main()
