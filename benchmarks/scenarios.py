"""The coordinator's side of each scenario: start workers, read counters, compute figures.

Every scenario alternates the libraries round by round (A B A B, the order reversed on
odd rounds so neither side always goes first) and keeps per-round figures, so the report
can give medians over rounds and paired ratios (each round's ours/theirs). A library
that fails or is missing is recorded with its error and shown as such, never dropped.
"""

from __future__ import annotations

import itertools
import math
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any

from benchmarks.env import RedisServer, ZkCounters
from benchmarks.pool import Pool, WorkerError
from benchmarks.proxy import DelayProxy
from benchmarks.stats import median, percentile


@dataclass(frozen=True)
class Params:
    rounds: int  # uncontended rounds
    cycles: int  # uncontended cycles per round
    rt_cycles: int  # cycles through the delaying proxy
    rt_delay: float
    hot_ns: tuple[int, ...]
    hot_rounds: int
    hot_duration: float
    mix_procs: int
    mix_rounds: int
    mix_duration: float
    drain_waiters: int
    drain_procs: int
    drain_rounds: int
    herd_ns: tuple[int, ...]
    herd_procs: int
    many_concurrency: int
    many_rounds: int
    many_duration: float
    async_waiters: tuple[int, ...]
    async_budget: float
    profile_cycles: int
    jvm_warmup: int  # unrecorded cycles a Curator JVM runs before its first timed one (JIT)
    # 7. the ensemble scenario (benchmarks/ensemble.py): per round-trip time
    ens_rtts: tuple[float, ...]  # client and member round trips, seconds
    ens_rounds: int  # uncontended rounds (each on the next member)
    ens_cycles: int
    ens_hot_procs: int
    ens_hot_rounds: int
    ens_hot_duration: float
    ens_drain_waiters: int
    ens_floor_handoffs: int  # raw-wire hand-offs timed for the floor


MODES = {
    "full": Params(
        rounds=5,
        cycles=400,
        rt_cycles=10,
        rt_delay=0.02,
        hot_ns=(2, 8, 32),
        hot_rounds=3,
        hot_duration=3.0,
        mix_procs=8,
        mix_rounds=3,
        mix_duration=3.0,
        drain_waiters=1000,
        drain_procs=4,
        drain_rounds=2,
        herd_ns=(1, 3, 10, 30, 100, 300, 1000),
        herd_procs=4,
        many_concurrency=200,
        many_rounds=3,
        many_duration=3.0,
        async_waiters=(2000, 10_000),
        async_budget=75.0,
        profile_cycles=2000,
        jvm_warmup=4000,
        ens_rtts=(0.0002, 0.001, 0.005),
        ens_rounds=3,
        ens_cycles=150,
        ens_hot_procs=8,
        ens_hot_rounds=2,
        ens_hot_duration=2.0,
        ens_drain_waiters=1000,
        ens_floor_handoffs=180,
    ),
    "quick": Params(
        rounds=3,
        cycles=200,
        rt_cycles=6,
        rt_delay=0.02,
        hot_ns=(2, 8),
        hot_rounds=2,
        hot_duration=1.5,
        mix_procs=8,
        mix_rounds=2,
        mix_duration=1.5,
        drain_waiters=300,
        drain_procs=3,
        drain_rounds=1,
        herd_ns=(1, 10, 100, 300),
        herd_procs=3,
        many_concurrency=200,
        many_rounds=2,
        many_duration=1.5,
        async_waiters=(2000,),
        async_budget=20.0,
        profile_cycles=600,
        jvm_warmup=3000,
        ens_rtts=(0.0002, 0.001, 0.005),
        ens_rounds=3,
        ens_cycles=60,
        ens_hot_procs=8,
        ens_hot_rounds=1,
        ens_hot_duration=1.5,
        ens_drain_waiters=200,
        ens_floor_handoffs=90,
    ),
    "smoke": Params(
        rounds=1,
        cycles=10,
        rt_cycles=2,
        rt_delay=0.02,
        hot_ns=(2,),
        hot_rounds=1,
        hot_duration=0.3,
        mix_procs=2,
        mix_rounds=1,
        mix_duration=0.4,
        drain_waiters=8,
        drain_procs=2,
        drain_rounds=1,
        herd_ns=(3,),
        herd_procs=2,
        many_concurrency=8,
        many_rounds=1,
        many_duration=0.4,
        async_waiters=(50,),
        async_budget=5.0,
        profile_cycles=40,
        jvm_warmup=20,
        ens_rtts=(0.001,),
        ens_rounds=1,
        ens_cycles=10,
        ens_hot_procs=3,
        ens_hot_rounds=1,
        ens_hot_duration=0.3,
        ens_drain_waiters=6,
        ens_floor_handoffs=18,
    ),
}

UNCONTENDED_LIBS = ("zklocks", "zklocks-unfair", "curator", "kazoo", "tooz", "redis")
HERD_DESIGNS = ("zklocks", "kazoo", "one-node", "child-list")


def rounds_order(libs: tuple[str, ...] | list[str], r: int) -> list[str]:
    return list(libs) if r % 2 == 0 else list(reversed(libs))


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    last = text.splitlines()[-1] if text else type(exc).__name__
    return last[:300]


class Bench:
    """Everything the scenarios share: servers, counters, worker pool, parameters."""

    def __init__(
        self,
        zk: Any,
        redis: RedisServer | None,
        redis_error: str | None,
        params: Params,
        log: Callable[[str], None],
        curator_error: str | None = None,
        pool: Pool | None = None,
    ) -> None:
        """``pool``: another Bench's workers, reused (the Curator JVMs stay warm)."""
        self.zk = zk
        self.curator_error = curator_error
        self.counters = ZkCounters(zk)
        self.redis = redis
        self.redis_error = redis_error
        self.params = params
        self.pool = pool if pool is not None else Pool()
        self.log = log

    @property
    def hosts(self) -> str:
        return str(self.zk.hosts)

    @property
    def redis_port(self) -> int | None:
        return self.redis.port if self.redis is not None else None

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def attempt(self, record: dict[str, Any], what: str) -> Iterator[None]:
        """Record a failure into ``record['error']`` instead of aborting the run."""
        try:
            yield
        except Exception as exc:  # a library failing is a result, not a crash
            record["error"] = _error_text(exc)
            self.log(f"    ! {what} failed: {record['error']}")
            if not isinstance(exc, WorkerError):
                self.log(traceback.format_exc())
            self.pool.reset()

    def missing(self, lib: str) -> str | None:
        if lib == "redis" and self.redis is None:
            return f"missing: {self.redis_error}"
        if lib == "curator" and self.curator_error is not None:
            return f"missing: {self.curator_error}"
        if lib == "tooz":
            try:
                import tooz.coordination  # noqa: F401
            except ImportError as exc:
                return f"missing: tooz import failed ({exc})"
        return None

    def children(self, path: str, hosts: str | None = None) -> int:
        """How many children ``path`` has, asked by a short-lived session of our own.

        Only used while no counter window is open (its requests are not a library's)."""
        from kazoo.client import KazooClient

        inspector = KazooClient(hosts=hosts or self.hosts, timeout=30)
        inspector.start(timeout=30)
        try:
            stat = inspector.exists(path)
            return int(stat.numChildren) if stat is not None else 0
        finally:
            inspector.stop()
            inspector.close()

    def wait_children(self, path: str, count: int, timeout: float) -> None:
        from kazoo.client import KazooClient

        inspector = KazooClient(hosts=self.hosts, timeout=30)
        inspector.start(timeout=30)
        deadline = time.monotonic() + timeout
        try:
            while True:
                stat = inspector.exists(path)
                have = int(stat.numChildren) if stat is not None else 0
                if have >= count:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path} has {have} of {count} contenders after {timeout} s")
                time.sleep(0.05)
        finally:
            inspector.stop()
            inspector.close()

    # -- 1. uncontended ------------------------------------------------------------------

    def uncontended(self) -> dict[str, Any]:
        p = self.params
        out: dict[str, Any] = {lib: {"rounds": [], "samples": []} for lib in UNCONTENDED_LIBS}
        for lib in UNCONTENDED_LIBS:
            reason = self.missing(lib)
            if reason:
                out[lib]["error"] = reason
        for r in range(p.rounds):
            for lib in rounds_order(UNCONTENDED_LIBS, r):
                record = out[lib]
                if "error" in record:
                    continue
                with self.attempt(record, f"uncontended {lib}"):
                    res, requests = self._uncontended_once(lib, f"/bench/u/{lib}/r{r}", p.cycles)
                    samples = res["samples"]
                    record["samples"].extend(samples)
                    record["transport"] = res["transport"]
                    record["rounds"].append(cycle_round(samples, requests, res["cpu"]))
            self.log(
                f"  round {r + 1}/{p.rounds}: "
                + ", ".join(
                    f"{lib} {out[lib]['rounds'][-1]['median'] * 1e3:.3f} ms"
                    for lib in UNCONTENDED_LIBS
                    if out[lib]["rounds"] and "error" not in out[lib]
                )
            )
        for lib in UNCONTENDED_LIBS:
            record = out[lib]
            if "error" in record or not record["rounds"]:
                continue
            with self.attempt(record, f"round trips {lib}"):
                record["round_trips"] = self._round_trips(lib, median(record["samples"]))
        return out

    def warm_up(self) -> None:
        """Unrecorded cycles first, so the server's JIT warm-up lands on no library."""
        for lib in ("zklocks", "kazoo"):
            record: dict[str, Any] = {}
            with self.attempt(record, f"warm-up {lib}"):
                self._uncontended_once(lib, f"/bench/warm/{lib}", self.params.cycles)

    def _uncontended_once(
        self,
        lib: str,
        path: str,
        cycles: int,
        hosts: str | None = None,
        proxy: DelayProxy | None = None,
    ) -> tuple[dict[str, Any], int]:
        redis = lib == "redis"
        port = self.redis_port
        if redis and proxy is not None:
            port = proxy.port
        self.pool.start(
            0,
            "uncontended",
            lib=lib,
            hosts=hosts or self.hosts,
            path=path,
            cycles=cycles,
            warmup=10,
            redis_port=port,
            jvm_warmup=self.params.jvm_warmup,
        )
        self.pool.expect(0, "sync")
        if proxy is not None:
            proxy.delay = self.params.rt_delay
            proxy.reset_counts()
        a = self.redis.snap() if redis and self.redis else self.counters.snap()
        self.pool.send(0, "go")
        self.pool.expect(0, "sync", timeout=300)
        b = self.redis.snap() if redis and self.redis else self.counters.snap()
        if proxy is not None:
            proxy.delay = 0.0
        self.pool.send(0, "close")
        result = self.pool.expect(0, "result")
        requests = (
            self.redis.requests(a, b) if redis and self.redis else self.counters.requests(a, b)
        )
        return result, requests

    def _round_trips(self, lib: str, base_median: float) -> dict[str, Any]:
        """Cycles through a proxy that delays each request by ``rt_delay``."""
        p = self.params
        if lib == "redis":
            assert self.redis is not None
            upstream, parse = ("127.0.0.1", self.redis.port), None
        else:
            upstream, parse = ("127.0.0.1", self.zk.port), "zookeeper"
        with DelayProxy(upstream, parse=parse) as proxy:
            res, requests = self._uncontended_once(
                lib, f"/bench/rt/{lib}", p.rt_cycles, hosts=proxy.hosts, proxy=proxy
            )
            counts = proxy.counts()
        delayed = median(res["samples"])
        trips = (delayed - base_median) / p.rt_delay
        ops = {
            name: n / p.rt_cycles
            for name, n in counts.items()
            if name not in ("connect", "ping", "closeSession")
        }
        return {
            "delayed_median": delayed,
            "round_trips": trips,
            "ops": ops,
            "pings": counts.get("ping", 0),
            "server_requests": requests / p.rt_cycles,
        }

    # -- 2, 3. contention -----------------------------------------------------------------

    def contention(
        self,
        scenario: str,
        libs: tuple[str, ...],
        n: int,
        rounds: int,
        duration: float,
        kind: str,
        census: bool = False,
        **options: Any,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {lib: {"rounds": []} for lib in libs}
        for lib in libs:
            reason = self.missing(lib)
            if reason:
                out[lib]["error"] = reason
        self.pool.ensure(n)
        for r in range(rounds):
            for lib in rounds_order(libs, r):
                record = out[lib]
                if "error" in record:
                    continue
                with self.attempt(record, f"{scenario} {lib} n={n}"):
                    path = f"/bench/{scenario}/{lib}/n{n}/r{r}"
                    figures = self._contend_once(lib, path, n, duration, kind, r, options)
                    record["rounds"].append(figures)
                    self.log(
                        f"  {scenario} n={n} round {r + 1}/{rounds} {lib}: "
                        f"{figures['rate']:.0f} acq/s, {figures['requests']:.2f} req/acq, "
                        f"fairness {figures['fairness']:.2f}"
                    )
        if census:
            for lib in libs:
                record = out[lib]
                if lib == "redis" or "error" in record:
                    continue
                result: dict[str, Any] = {}
                with self.attempt(result, f"{scenario} {lib} request census"):
                    record["census"] = self._census(scenario, lib, n, kind, options)
        return out

    def _census(
        self, scenario: str, lib: str, n: int, kind: str, options: dict[str, Any]
    ) -> dict[str, float]:
        """Which requests an acquisition costs: one short extra run through the parsing
        proxy (no delay). Its timing is not used; only the request names are."""
        upstream = ("127.0.0.1", self.zk.port)
        with DelayProxy(upstream, parse="zookeeper") as proxy:
            path = f"/bench/{scenario}/{lib}/n{n}/census"
            figures = self._contend_once(
                lib,
                path,
                n,
                min(1.0, self.params.hot_duration),
                kind,
                99,
                options,
                hosts=proxy.hosts,
                on_start=proxy.reset_counts,
            )
            counts = proxy.counts()
        acquisitions = figures["total"]
        return {
            name: count / max(1, acquisitions)
            for name, count in counts.most_common()
            if name not in ("connect", "closeSession")
        }

    def _contend_once(
        self,
        lib: str,
        path: str,
        n: int,
        duration: float,
        kind: str,
        r: int,
        options: dict[str, Any],
        hosts: str | None = None,
        on_start: Callable[[], None] | None = None,
        spread: Sequence[str] = (),
    ) -> dict[str, Any]:
        """``spread``: connect strings dealt round-robin to the workers (one per member)."""
        workers = list(range(n))
        redis = lib == "redis"
        for i in workers:
            self.pool.start(
                i,
                "contend",
                lib=lib,
                hosts=spread[i % len(spread)] if spread else hosts or self.hosts,
                path=path,
                kind=kind,
                seed=r * 1000 + i,
                redis_port=self.redis_port,
                jvm_warmup=self.params.jvm_warmup,
                **options,
            )
        self.pool.sync_all(workers)
        counter = self.redis if redis and self.redis else self.counters
        if on_start is not None:
            on_start()
        a = counter.snap()
        start = time.monotonic() + 0.1
        end = start + duration
        self.pool.answer_all(workers, {"start": start, "end": end})
        watches = []
        if not redis:
            for fraction in (0.25, 0.5, 0.75):
                delay = start + duration * fraction - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                watches.append(self.counters.snap()["zk_watch_count"])
        self.pool.sync_all(workers, timeout=duration + 120)
        b = counter.snap()
        fires = self.counters.watch_fires(a, b) if not redis else None  # type: ignore[arg-type]
        self.pool.answer_all(workers, "close")
        results = self.pool.results(workers)
        requests = counter.requests(a, b)  # type: ignore[arg-type]
        return contention_figures(results, start, end, requests, watches, fires, kind)

    # -- 4a. a long queue drained ------------------------------------------------------------

    def drain(self) -> dict[str, Any]:
        p = self.params
        libs = ("zklocks", "kazoo")
        out: dict[str, Any] = {lib: {"rounds": []} for lib in libs}
        for r in range(p.drain_rounds):
            for lib in rounds_order(libs, r):
                record = out[lib]
                if "error" in record:
                    continue
                with self.attempt(record, f"drain {lib}"):
                    figures = self._drain_once(lib, f"/bench/drain/{lib}/r{r}")
                    record["rounds"].append(figures)
                    self.log(
                        f"  drain {p.drain_waiters} round {r + 1}/{p.drain_rounds} {lib}: "
                        f"{figures['handoffs_per_s']:.0f} handoffs/s, "
                        f"{figures['requests_per_handoff']:.2f} req/handoff"
                    )
        return out

    def _drain_once(
        self, lib: str, path: str, waiting: int | None = None, spread: Sequence[str] = ()
    ) -> dict[str, Any]:
        """``waiting`` waiters (default the mode's); ``spread`` as for :meth:`_contend_once`,
        the holder taking the first connect string."""
        p = self.params
        count = p.drain_waiters if waiting is None else waiting
        procs = p.drain_procs
        holder = procs
        waiters = list(range(procs))
        share = [count // procs + (1 if i < count % procs else 0) for i in waiters]

        def hosts_of(i: int) -> str:
            return spread[i % len(spread)] if spread else self.hosts

        self.pool.start(holder, "drain_holder", recycle=True, lib=lib, hosts=hosts_of(0), path=path)
        self.pool.expect(holder, "sync")
        for i in waiters:
            self.pool.start(
                i,
                "drain_waiters",
                recycle=True,
                lib=lib,
                hosts=hosts_of(i),
                path=path,
                threads=share[i],
            )
        self.pool.sync_all(waiters, timeout=300)
        t0 = time.monotonic()
        self.wait_children(path, count + 1, timeout=600)
        self.counters.settle()
        enqueue = time.monotonic() - t0
        self.pool.answer_all(waiters, "measure")
        self.pool.sync_all(waiters)
        a = self.counters.snap()
        self.pool.answer_all(waiters, "go")
        self.pool.send(holder, "go")
        released = self.pool.expect(holder, "sync")["released"]
        results = self.pool.sync_all(waiters, timeout=600)
        b = self.counters.snap()
        self.pool.answer_all([holder, *waiters], "close")
        self.pool.results([holder, *waiters])
        events = [e for res in results for e in res["events"]]
        errors = [e for res in results for e in res["errors"]]
        if errors or len(events) != count:
            raise RuntimeError(f"{len(events)} of {count} waiters acquired; errors: {errors[:3]}")
        last = max(t for _, t in events)
        drain = last - released
        wakeups = [res["wakeups"] for res in results]
        handoffs = count
        return {
            "drain_seconds": drain,
            "handoffs_per_s": handoffs / drain,
            "requests_per_handoff": self.counters.requests(a, b) / handoffs,
            "watch_fires_per_release": self.counters.watch_fires(a, b) / (handoffs + 1),
            "wakeups_per_handoff": (
                None if any(w is None for w in wakeups) else sum(wakeups) / handoffs
            ),
            "enqueue_seconds": enqueue,
            "rss_per_waiter": median([res["rss_per_waiter"] for res in results]),
        }

    # -- 4b. the herd ------------------------------------------------------------------------

    def herd(self) -> dict[str, Any]:
        p = self.params
        out: dict[str, Any] = {design: {"points": {}} for design in HERD_DESIGNS}
        for j, n in enumerate(p.herd_ns):
            for design in rounds_order(HERD_DESIGNS, j):
                record = out[design]
                point: dict[str, Any] = {}
                with self.attempt(point, f"herd {design} n={n}"):
                    point.update(self._herd_once(design, n, f"/bench/herd/{design}/n{n}"))
                    self.log(
                        f"  herd {design} waiters={n}: {point['wakeups']:.1f} wake-ups/release, "
                        f"{point['requests']:.1f} req/release"
                    )
                record["points"][n] = point
        return out

    def _herd_once(self, design: str, waiters: int, path: str) -> dict[str, Any]:
        contenders = waiters + 1
        procs = min(self.params.herd_procs, contenders)
        workers = list(range(procs))
        share = [contenders // procs + (1 if i < contenders % procs else 0) for i in workers]
        releases = max(1, min(10, waiters // 10, 3000 // waiters))  # the queue barely shrinks
        for i in workers:
            self.pool.start(
                i,
                "herd",
                recycle=True,
                design=design,
                hosts=self.hosts,
                path=path,
                threads=share[i],
                index=i,
            )
        started = [self.pool.expect(i, "started", timeout=120) for i in workers]
        counting = all(s["counting"] for s in started)
        try:
            if design == "child-list":
                self.wait_children(path, contenders, timeout=600)
                self.pool.answer_all(workers, ("watch",))
            holder = self.pool.expect_any(workers, "acquired", timeout=600)[1]
            if design in ("zklocks", "kazoo"):
                self.wait_children(path, contenders, timeout=600)
            self.counters.settle()
            per_release = []
            for _ in range(releases):
                a = self.counters.snap()
                w0 = self._herd_wakeups(workers)
                self.pool.send(holder["worker"], ("release", holder["tid"]))
                holder = self.pool.expect_any(workers, "acquired", timeout=600)[1]
                b = self.counters.settle()
                w1 = self._herd_wakeups(workers)
                per_release.append(
                    {
                        "wakeups": (w1 - w0) if counting else math.nan,
                        "requests": self.counters.requests(a, b),
                        "fires": self.counters.watch_fires(a, b),
                    }
                )
        finally:
            for i in workers:
                with suppress(OSError):
                    self.pool.send(i, ("stop",))
        results = self.pool.results(workers, timeout=120)
        errors = [e for res in results for e in res["errors"]]
        if errors:
            raise RuntimeError(f"waiters failed: {errors[:3]}")
        return {
            "releases": releases,
            "wakeups": median([x["wakeups"] for x in per_release]),
            "requests": median([x["requests"] for x in per_release]),
            "fires": median([x["fires"] for x in per_release]),
            "counting": counting,
            "sessions": procs,
        }

    def _herd_wakeups(self, workers: list[int]) -> int:
        for i in workers:
            self.pool.send(i, ("stats",))
        total = 0
        for i in workers:
            stats = self.pool.expect(i, "stats")
            total += stats["wakeups"]
        return total

    # -- 5. many locks from one process ------------------------------------------------------

    def many(self) -> dict[str, Any]:
        p = self.params
        import zklocks

        variants = ["zklocks threads", "kazoo threads"]
        has_async = hasattr(zklocks, "AsyncClient")
        if has_async:
            variants.append("zklocks asyncio")
        out: dict[str, Any] = {v: {"rounds": []} for v in variants}
        if not has_async:
            out["zklocks asyncio"] = {
                "rounds": [],
                "error": "n/a: zklocks.AsyncClient not in this tree",
            }
        for r in range(p.many_rounds):
            for variant in rounds_order(variants, r):
                record = out[variant]
                if "error" in record:
                    continue
                with self.attempt(record, f"many {variant}"):
                    figures = self._many_once(
                        variant, f"/bench/many/{variant.replace(' ', '-')}/r{r}"
                    )
                    record["rounds"].append(figures)
                    self.log(
                        f"  many round {r + 1}/{p.many_rounds} {variant}: "
                        f"{figures['rate']:.0f} cycles/s, "
                        f"{figures['cpu_per_request'] * 1e6:.0f} µs CPU/request"
                    )
        return out

    def _many_once(self, variant: str, base: str) -> dict[str, Any]:
        p = self.params
        lib, style = variant.split()
        if style == "threads":
            self.pool.start(
                0,
                "many_threads",
                recycle=True,
                lib=lib,
                hosts=self.hosts,
                base=base,
                concurrency=p.many_concurrency,
            )
        else:
            self.pool.start(
                0,
                "many_asyncio",
                recycle=True,
                hosts=self.hosts,
                base=base,
                concurrency=p.many_concurrency,
            )
        self.pool.expect(0, "sync", timeout=300)
        a = self.counters.snap()
        start = time.monotonic() + 0.1
        self.pool.send(0, {"start": start, "end": start + p.many_duration})
        self.pool.expect(0, "sync", timeout=p.many_duration + 120)
        b = self.counters.snap()
        self.pool.send(0, "close")
        res = self.pool.expect(0, "result")
        if res["errors"]:
            raise RuntimeError(f"cycles failed: {res['errors'][:3]}")
        requests = self.counters.requests(a, b)
        return {
            "rate": res["cycles"] / res["elapsed"],
            "cpu_per_cycle": res["cpu"] / max(1, res["cycles"]),
            "cpu_per_request": res["cpu"] / max(1, requests),
            "requests_per_cycle": requests / max(1, res["cycles"]),
            # thread switches: what a blocking call costs beyond the shared Python
            "switches_per_request": res.get("switches", math.nan) / max(1, requests),
        }

    def async_memory(self) -> dict[str, Any]:
        """RSS per asyncio task queued on one held lock, at each queue length asked.

        Long queues run on a ZooKeeper of their own (2 GiB heap): a queue this long makes
        every waiter's create+getChildren return the whole list, O(n²) bytes in all, and a
        server that runs out of heap must not take the other scenarios down with it.
        """
        import zklocks
        from zklocks.server import ZooKeeperServer

        if not hasattr(zklocks, "AsyncClient"):
            return {"error": "n/a: zklocks.AsyncClient not in this tree"}
        out: dict[str, Any] = {}
        for count in self.params.async_waiters:
            record: dict[str, Any] = {"asked": count}
            own_server = (
                ZooKeeperServer(
                    tick_time=2000,
                    max_session_timeout=60_000,
                    force_sync=self.zk.force_sync,
                    heap="2g",
                )
                if count > 1000  # a short queue cannot hurt the shared server
                else nullcontext(self.zk)
            )
            with own_server as server:
                with self.attempt(record, f"asyncio memory, {count} waiters"):
                    record.update(self._async_memory_once(server, count, record))
                log = server.log_path
                if (
                    "error" in record
                    and log is not None
                    and log.exists()
                    and "OutOfMemoryError" in log.read_text(errors="replace")
                ):
                    record["error"] = (
                        f"ZooKeeper (2 GiB heap) ran out of memory with "
                        f"{record.get('peak', 0):,} of {count:,} waiters queued"
                    )
            self.log(
                f"  {count} asyncio waiters: "
                + (
                    record["error"]
                    if "error" in record
                    else f"{record['rss_per_waiter'] / 1024:.1f} KiB per waiter, "
                    f"{record['queued']:,} queued in {record['enqueue_seconds']:.1f} s"
                )
            )
            out[str(count)] = record
        return out

    def _async_memory_once(self, server: Any, count: int, record: dict[str, Any]) -> dict[str, Any]:
        p = self.params
        path = "/bench/memory"
        self.pool.start(
            0,
            "async_memory",
            recycle=True,
            hosts=server.hosts,
            path=path,
            waiters=count,
            budget=p.async_budget,
        )
        while True:
            kind, payload = self.pool.next(0, timeout=p.async_budget + 120)
            if kind == "sync":
                # mntr on a server of its own: every ephemeral node is the holder's or a
                # waiter's. A server too busy to answer counts as "no more than before".
                try:
                    queued = max(0, int(server.mntr()["zk_ephemerals_count"]) - 1)
                except (OSError, KeyError, ValueError):
                    queued = record.get("peak", 0)
                record["peak"] = max(record.get("peak", 0), queued)
                self.pool.send(0, queued)
            elif kind == "result":
                result = dict(payload)
                if result["queued"] < count:
                    why = result["failures"][0] if result["failures"] else "time ran out"
                    result["error"] = (
                        f"only {result['queued']:,} of {count:,} waiters queued in "
                        f"{result['enqueue_seconds']:.0f} s ({why})"
                    )
                return result

    # -- 6. where the time goes --------------------------------------------------------------

    def profile(self) -> dict[str, Any]:
        self.pool.start(
            0,
            "profile",
            recycle=True,
            hosts=self.hosts,
            base="/bench/profile",
            cycles=self.params.profile_cycles,
        )
        res: dict[str, Any] = self.pool.expect(0, "result", timeout=600)
        res["medians"] = {name: median(s) for name, s in res["samples"].items()}
        return res


def contention_figures(
    results: list[dict[str, Any]],
    start: float,
    end: float,
    requests: int,
    watches: list[int],
    fires: int | None,
    kind: str,
) -> dict[str, Any]:
    """Rates, fairness, hand-off latency and costs from every worker's event list."""
    duration = end - start
    per_process = [sum(1 for t in res["acquired"] if start <= t <= end) for res in results]
    total_all = sum(len(res["acquired"]) for res in results)
    in_window = sum(per_process)
    timeline = sorted(
        (t_acq, t_rel, proc, kind_code)
        for proc, res in enumerate(results)
        for t_acq, t_rel, kind_code in zip(
            res["acquired"], res["released"], res["kinds"], strict=True
        )
    )
    handoffs: list[float] = []
    same = 0
    pairs = 0
    if kind == "mutex":
        for prev, cur in itertools.pairwise(timeline):
            if start <= cur[0] <= end and cur[0] >= prev[1]:
                handoffs.append(cur[0] - prev[1])
                pairs += 1
                same += prev[2] == cur[2]
    kinds = Counter(code for t_acq, _t_rel, _proc, code in timeline if start <= t_acq <= end)
    return {
        "rate": in_window / duration,
        "per_process": per_process,
        "fairness": (min(per_process) / max(per_process)) if max(per_process) else 0.0,
        "requests": requests / max(1, total_all),
        "handoff_median": median(handoffs) if handoffs else math.nan,
        "handoff_p99": percentile(handoffs, 99) if handoffs else math.nan,
        "same_process": same / pairs if pairs else math.nan,
        "watches": max(watches) if watches else None,
        "watch_fires": (fires / max(1, total_all)) if fires is not None else None,
        "cpu_per_acq": sum(res["cpu"] for res in results) / max(1, total_all),
        "total": total_all,
        "reads": kinds.get(0, 0),
        "writes": kinds.get(1, 0),
    }


def cycle_round(samples: list[float], requests: float, cpu: float) -> dict[str, float]:
    """One round of timed cycles: median and p99 seconds, server requests and client CPU
    per cycle (the uncontended scenario's record; the ensemble's adds its member)."""
    return {
        "median": median(samples),
        "p99": percentile(samples, 99),
        "requests": requests / len(samples),
        "cpu": cpu / len(samples),
    }


def uncontended_summary(record: dict[str, Any]) -> dict[str, Any]:
    rounds = record.get("rounds", [])
    samples = record.get("samples", [])
    return {
        "median": median(samples),
        "p99": percentile(samples, 99),
        "round_medians": [x["median"] for x in rounds],
        "requests": median([x["requests"] for x in rounds]),
        "cpu": median([x["cpu"] for x in rounds]),
    }
