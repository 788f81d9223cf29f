"""``python -m nemesis run ...`` (a run on a real ensemble) and ``python -m nemesis check DIR``.

Exit status: 0 no violation found, 1 a violation found, 2 the run could not be made (or
bad arguments), 130 interrupted (what was recorded is still judged and reported).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from nemesis import plants, report
from nemesis.checker import check, model_for
from nemesis.history import load, parse
from nemesis.runner import EXIT_CLEAN, EXIT_ERROR, EXIT_VIOLATION, Options, run
from nemesis.timing import TIMINGS

WORKLOADS = ("lock", "rwlock", "semaphore", "guarded-set")


def _minutes(text: str) -> float:
    value = float(text)
    if not 0 < value <= 24 * 60:
        raise argparse.ArgumentTypeError(f"minutes must be above 0 and at most a day: {text}")
    return value


def _lock_delay(text: str) -> float:
    value = float(text)
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(f"a lock-delay is above 0 and at most 60 s: {text}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m nemesis", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("run", help="a run on a real ensemble, judged at the end")
    r.add_argument("--minutes", type=_minutes, required=True, help="how long (e.g. 1.5)")
    r.add_argument("--members", type=int, choices=(3, 5), default=3)
    r.add_argument("--workload", choices=WORKLOADS, default="lock")
    r.add_argument("--out", type=Path, required=True, help="directory for the report")
    r.add_argument("--seed", type=int, help="the fault schedule's seed (default: random)")
    r.add_argument("--timing", choices=sorted(TIMINGS), default="sample")
    r.add_argument("--plant", choices=plants.PLANTS, help="plant a bug the run must catch")
    r.add_argument("--clients", type=int, help="client processes (default 6)")
    r.add_argument("--permits", type=int, default=2, help="the semaphore's permits")
    r.add_argument(
        "--lock-delay",
        type=_lock_delay,
        metavar="SECONDS",
        help="every lock's lock_delay; the checker then judges the lock-delay rule",
    )
    r.add_argument(
        "--stop-on-violation",
        action="store_true",
        help="end the run as soon as the history shows a violation",
    )
    c = commands.add_parser("check", help="judge a recorded history.jsonl again")
    c.add_argument("dir", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "check":
        return _check(args.dir)
    if args.clients is not None and not 2 <= args.clients <= 12:
        print("nemesis: --clients must be between 2 and 12", file=sys.stderr)
        return EXIT_ERROR
    if args.plant == "unguarded" and args.workload != "guarded-set":
        print("nemesis: --plant unguarded needs --workload guarded-set", file=sys.stderr)
        return EXIT_ERROR
    if args.plant == "no-lock-delay" and args.lock_delay is None:
        print("nemesis: --plant no-lock-delay needs --lock-delay", file=sys.stderr)
        return EXIT_ERROR
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    return run(
        Options(
            minutes=args.minutes,
            members=args.members,
            workload=args.workload,
            out=args.out,
            seed=seed,
            timing=args.timing,
            plant=args.plant,
            clients=args.clients,
            permits=args.permits,
            stop_on_violation=args.stop_on_violation,
            lock_delay=args.lock_delay,
        )
    )


def _check(directory: Path) -> int:
    history = parse(load(directory / "history.jsonl"))
    params = history.params
    model = model_for(str(params.get("workload", "lock")), int(params.get("permits", 2)))
    verdict = check(history, model)
    print(report.write(directory, history, verdict, model))
    return EXIT_CLEAN if verdict.ok else EXIT_VIOLATION


if __name__ == "__main__":
    sys.exit(main())
