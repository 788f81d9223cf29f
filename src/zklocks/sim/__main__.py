"""``python -m zklocks.sim``: explore many seeded schedules, or replay one.

    python -m zklocks.sim --schedules 100000 --workers 2     # the long run
    python -m zklocks.sim --seed 133 --plan 'drop:...' --trace  # replay a failure

Exit status 0 when every schedule kept every invariant (violations that match a known,
reported issue are counted, not failed, unless ``--strict``), 1 on a violation.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Iterator, Sequence

from zklocks.sim.faults import format_plan, parse_plan
from zklocks.sim.runner import (
    KNOWN_ISSUES,
    ExploreStats,
    KnownIssue,
    Options,
    SimulationFailure,
    explore_chunk,
    plan_for,
    quiet_simulated_clients,
    replay,
)
from zklocks.sim.scenario import FAMILIES, MORE_FAMILIES
from zklocks.sim.scheduler import DecideFn

CHUNK = 500


def main(argv: Sequence[str] | None = None, *, decide: DecideFn | None = None) -> int:
    """The command line; ``decide`` replays with a planted strategy (for a test that
    checks a failure's replay command reproduces it)."""
    quiet_simulated_clients()
    parser = argparse.ArgumentParser(prog="python -m zklocks.sim", description=__doc__)
    parser.add_argument("--schedules", type=int, default=10_000, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--workers", type=int, default=1, help="processes to spread seeds on")
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("--plan", help="with --seed: this fault plan (default: the seed's)")
    parser.add_argument("--trace", action="store_true", help="with --seed: print every step")
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"lock kinds to draw scenarios from (default {','.join(FAMILIES)}; "
        f"also: {','.join(MORE_FAMILIES)})",
    )
    parser.add_argument(
        "--layout",
        choices=("zklocks", "curator", "kazoo"),
        default="zklocks",
        help="whose queue the contenders stand in (a peer's: mutex and rw scenarios only)",
    )
    parser.add_argument(
        "--operations",
        action="store_true",
        help="leases bounded by max_hold, and revokes in the fault plans",
    )
    parser.add_argument(
        "--lock-delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="every queued contender's lock_delay; the invariants check both halves",
    )
    parser.add_argument(
        "--strict", action="store_true", help="fail on known, already reported issues too"
    )
    args = parser.parse_args(argv)
    families = tuple(f.strip() for f in args.families.split(",") if f.strip())
    unknown = set(families) - set(FAMILIES + MORE_FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; choose from {FAMILIES + MORE_FAMILIES}")
    options = Options(
        families=families,
        layout=args.layout,
        operations=args.operations,
        lock_delay=args.lock_delay,
    )
    if args.seed is not None:
        return _replay(args.seed, args.plan, args.trace, options, decide)
    known = () if args.strict else KNOWN_ISSUES
    return _explore(args.start, args.schedules, max(1, args.workers), options, known)


def _replay(
    seed: int, plan_text: str | None, trace: bool, options: Options, decide: DecideFn | None
) -> int:
    plan = plan_for(seed, options) if plan_text is None else parse_plan(plan_text)
    print(f"seed {seed}, plan: {format_plan(plan) or '(none)'}")
    try:
        result = replay(seed, plan, trace=trace, options=options, decide=decide)
    except SimulationFailure as failure:
        if trace:
            print("\n".join(failure.trace))
        print(failure, file=sys.stderr)
        return 1
    if result.trace:
        print("\n".join(result.trace))
    outcomes = ", ".join(f"c{o.client} {o.kind} {o.result}" for o in result.outcomes)
    print(f"ok: {result.steps} steps, {result.virtual_time:.3f}s virtual; {outcomes}")
    return 0


def _explore(
    start: int, count: int, workers: int, options: Options, known: Sequence[KnownIssue]
) -> int:
    started = time.perf_counter()
    chunks = [
        (s, min(CHUNK, start + count - s), options, tuple(known))
        for s in range(start, start + count, CHUNK)
    ]
    total = ExploreStats()
    failure: str | None = None
    results: Iterator[tuple[ExploreStats, str | None]]
    if workers == 1:
        results = map(explore_chunk, chunks)
    else:
        pool = multiprocessing.get_context("spawn").Pool(workers)
        results = pool.imap(explore_chunk, chunks)
    try:
        for stats, problem in results:
            total.merge(stats)
            if problem is not None:
                failure = problem
                break
            elapsed = time.perf_counter() - started
            print(
                f"\r{total.schedules}/{count} schedules, {total.schedules / elapsed:.0f}/s",
                end="",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if workers > 1:
            pool.terminate()
    print(file=sys.stderr)
    total.seconds = time.perf_counter() - started
    print(total.summary())
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
