"""``python -m benchmarks.run``: every scenario, zklocks against its peers, in one run.

Starts its own ZooKeeper (fsync on unless ``--no-fsync``) and, for the Redis row, a
``redis-server``; for the Curator row installs Curator and a JDK when missing
(``scripts/ensure-curator.sh``) and compiles the Java worker; runs the scenarios with
the libraries alternating round by round; writes ``latest.md`` (tables, ratios,
targets met or missed), PNG plots and the raw figures (``raw.json``) to ``--out``;
prints the headline table.

    python -m benchmarks.run                     # full run (< 10 min on 2 cores)
    python -m benchmarks.run --quick             # a few minutes, fewer rounds
    python -m benchmarks.run --smoke --out /tmp/b  # seconds: CI's check that it still runs
    python -m benchmarks.run --only ensemble     # 3 members, delayed links (not in the default)
    python -m benchmarks.run --only all          # the default scenarios and the ensemble
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks import env
from benchmarks.scenarios import MODES, Bench

SCENARIOS = ("uncontended", "hot", "mix", "drain", "herd", "many", "profile", "ensemble")
# The ensemble scenario (three JVMs, every link delayed, three round-trip times) adds
# several minutes to a full run, so it runs when asked: --only ensemble, or --only all.
DEFAULT_SCENARIOS = SCENARIOS[:-1]
DEFAULT_OUT = Path(__file__).resolve().parent / "results"


_T0 = time.monotonic()


def _log(message: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f}s] {message}", flush=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_const", const="quick", dest="mode")
    mode.add_argument("--smoke", action="store_const", const="smoke", dest="mode")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="where latest.md and plots go"
    )
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT_SCENARIOS),
        help=(
            f"comma-separated scenarios to run, from {','.join(SCENARIOS)}; 'all' is every "
            f"one (default: all but ensemble)"
        ),
    )
    parser.add_argument(
        "--no-fsync", action="store_true", help="forceSync=no (say so when quoting)"
    )
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis row")
    parser.add_argument(
        "--no-curator", action="store_true", help="skip the Curator (Java) row: no apt, no JVM"
    )
    parser.add_argument("--no-plots", action="store_true", help="tables only")
    parser.set_defaults(mode="full")
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    if "all" in args.only:
        args.only = list(SCENARIOS)
    unknown = set(args.only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from zklocks.server import ZooKeeperServer

    params = MODES[args.mode]
    started = time.monotonic()
    facts = env.machine_facts()
    results: dict[str, Any] = {
        "meta": {
            **facts,
            "mode": args.mode,
            "force_sync": not args.no_fsync,
            "scenarios": args.only,
            "params": params.__dict__,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
    }
    _log(
        f"benchmarks ({args.mode}): {facts['nproc']} cores, fsync "
        f"{'off' if args.no_fsync else 'on'}, "
        f"load average {facts['loadavg_start'][0]:.2f}"
    )
    redis: env.RedisServer | None = None
    redis_error: str | None = "skipped (--no-redis)" if args.no_redis else None
    args.out.mkdir(parents=True, exist_ok=True)
    with ZooKeeperServer(
        tick_time=2000, max_session_timeout=60_000, force_sync=not args.no_fsync
    ) as zk:
        results["meta"]["zookeeper"] = zk.four_letter("srvr").splitlines()[0]
        if not args.no_redis:
            try:
                redis = env.RedisServer().start()
                results["meta"]["redis_server"] = redis.version
            except Exception as exc:
                redis, redis_error = None, str(exc)
                _log(f"  redis row unavailable: {exc}")
        curator_error = prepare_curator(args, results)
        bench = Bench(zk, redis, redis_error, params, _log, curator_error)
        try:
            run_scenarios(bench, args.only, results)
        finally:
            bench.close()
            if redis is not None:
                redis.stop()
    results["meta"]["seconds"] = time.monotonic() - started
    results["meta"]["loadavg_end"] = os.getloadavg()

    from benchmarks import report

    (args.out / "raw.json").write_text(json.dumps(_jsonable(results), indent=1))
    _text, headline = report.write(results, args.out, plots=not args.no_plots)
    every_default = set(DEFAULT_SCENARIOS) <= set(args.only)
    if args.mode == "full" and args.out.resolve() == DEFAULT_OUT and every_default:
        report.update_readme(Path(__file__).resolve().parent / "README.md", headline)
    print("\n" + headline, flush=True)
    _log(f"wrote {args.out / 'latest.md'} in {results['meta']['seconds']:.0f} s")
    return 0


def prepare_curator(args: argparse.Namespace, results: dict[str, Any]) -> str | None:
    """Install Curator and a JDK if missing, compile the worker, read its versions.

    Returns why the Curator row cannot run, or None. Only the uncontended, hot-lock and ensemble
    scenarios have a Curator row; a run without them installs nothing."""
    if args.no_curator:
        return "skipped (--no-curator)"
    if not {"uncontended", "hot", "ensemble"} & set(args.only):
        return "not in the scenarios run"
    started = time.monotonic()
    try:
        from interop import curator

        curator.ensure_installed()
        curator.compiled()
        with curator.CuratorWorker() as jvm:
            info = jvm.info()
    except Exception as exc:
        _log(f"  Curator row unavailable: {exc}")
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    seconds = time.monotonic() - started
    results["meta"]["curator"] = {
        **info,
        "setup_seconds": seconds,
        "jvm_warmup": MODES[args.mode].jvm_warmup,
    }
    _log(
        f"Curator {info.get('curator')} (ZooKeeper client {info.get('zookeeper')}, Java "
        f"{info.get('java')}): checked, compiled and started in {seconds:.1f} s"
    )
    return None


def run_scenarios(bench: Bench, only: list[str], results: dict[str, Any]) -> None:
    p = bench.params

    def guarded(key: str, title: str, fn: Any) -> None:
        """A scenario that crashes is reported as failed; the run goes on."""
        _log(title)
        try:
            results[key] = fn()
        except Exception as exc:
            _log(f"  ! {key} failed: {exc!r}")
            _log(traceback.format_exc())
            lines = str(exc).strip().splitlines()
            results[key] = {"error": f"{type(exc).__name__}: {lines[-1] if lines else ''}"}
            bench.pool.reset()

    if "uncontended" in only:

        def uncontended() -> dict[str, Any]:
            bench.warm_up()
            return bench.uncontended()

        guarded("uncontended", "1. uncontended acquire+release", uncontended)
    if "hot" in only:

        def hot() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for n in p.hot_ns:
                # The peers beyond kazoo (Curator: one JVM per process) at 8 processes only.
                with_peers = n == 8 or len(p.hot_ns) == 1
                libs = (
                    ("zklocks", "kazoo", "curator", "redis") if with_peers else ("zklocks", "kazoo")
                )
                census = n == 8 or len(p.hot_ns) == 1
                out[str(n)] = bench.contention(
                    "hot", libs, n, p.hot_rounds, p.hot_duration, "mutex", census=census
                )
            return out

        guarded("hot", "2. one hot lock", hot)
    if "mix" in only:
        n = p.mix_procs
        guarded(
            "rw",
            f"3a. read/write mix, {n} processes",
            lambda: bench.contention(
                "rw",
                ("zklocks", "kazoo"),
                n,
                p.mix_rounds,
                p.mix_duration,
                "rw",
                census=True,
                read_ratio=0.8,
            ),
        )
        guarded(
            "semaphore",
            f"3b. semaphore, {n} processes",
            lambda: bench.contention(
                "sem",
                ("zklocks", "kazoo"),
                n,
                p.mix_rounds,
                p.mix_duration,
                "semaphore",
                census=True,
                permits=3,
            ),
        )
    if "drain" in only:
        guarded("drain", f"4a. {p.drain_waiters} waiters drained", bench.drain)
    if "herd" in only:
        guarded("herd", "4b. the herd: wake-ups per release", bench.herd)
    if "many" in only:
        guarded(
            "many",
            f"5. many locks from one process ({p.many_concurrency} concurrent cycles)",
            bench.many,
        )
    if "profile" in only:
        guarded("profile", "6. where the time goes", bench.profile)
    if "ensemble" in only:
        from benchmarks import ensemble

        guarded(
            "ensemble",
            f"7. a {ensemble.MEMBERS}-member ensemble, every link delayed",
            lambda: ensemble.run(bench),
        )
    if "many" in only:
        guarded(
            "memory",
            "5b. memory per waiting asyncio task (on a server of its own)",
            bench.async_memory,
        )


if __name__ == "__main__":
    sys.exit(main())
