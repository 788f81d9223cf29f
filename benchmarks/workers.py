"""What runs inside the worker processes: one function per scenario role.

Each takes ``ctl`` (see ``benchmarks.pool``) first. The pattern is always: connect and
warm up, ``ctl.sync("ready")`` (the coordinator reads the server's counters, then answers
with the start and end instants), run, ``ctl.sync(results)`` (the coordinator reads the
counters again), close. Clients connect before the first reading and close after the
second, so session setup and teardown never count as a cycle's requests.

Instants are ``time.monotonic()``: one clock for every process on the machine, so the
coordinator can merge events from all workers into one timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import gc
import os
import pstats
import random
import resource
import threading
import time
from typing import Any

from benchmarks import libs, wire
from benchmarks.pool import Ctl

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def rss() -> int:
    """Resident memory of this process, bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def cpu() -> float:
    """CPU seconds (user + system) of this process, all threads."""
    t = os.times()
    return t.user + t.system


def switches() -> int:
    """Context switches of this process so far (all threads, voluntary and not)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def thread_cpu() -> dict[int, float]:
    """CPU seconds per thread (Linux /proc; 1/CLK_TCK resolution)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _sleep_until(instant: float) -> None:
    delay = instant - time.monotonic()
    if delay > 0:
        time.sleep(delay)


# -- 1. uncontended cycle -------------------------------------------------------------------


def uncontended(
    ctl: Ctl,
    lib: str,
    hosts: str,
    path: str,
    cycles: int,
    warmup: int,
    redis_port: int | None,
    jvm_warmup: int = 0,
) -> dict[str, Any]:
    conn = libs.connect(lib, hosts, redis_port, jvm_warmup=jvm_warmup)
    try:
        lock = conn.mutex(path)
        if isinstance(lock, libs.CuratorHandle):
            return _curator_uncontended(ctl, conn, lock, cycles, warmup)
        for _ in range(warmup):
            lock.acquire()
            lock.release()
        ctl.sync("ready")
        samples = []
        perf = time.perf_counter
        cpu0 = cpu()
        for _ in range(cycles):
            t0 = perf()
            lock.acquire()
            lock.release()
            samples.append(perf() - t0)
        used = cpu() - cpu0
        ctl.sync("done")  # counters are read now, before the session closes
        return {"samples": samples, "cpu": used, "transport": conn.transport()}
    finally:
        conn.close()


def _curator_uncontended(
    ctl: Ctl, conn: libs.Connection, lock: libs.CuratorHandle, cycles: int, warmup: int
) -> dict[str, Any]:
    """The same cycle, timed inside the JVM (a pipe round trip per call would be ours)."""
    assert isinstance(conn, libs.CuratorConnection)
    lock.cycles(warmup)
    ctl.sync("ready")
    cpu0 = conn.cpu()
    samples = lock.cycles(cycles)
    used = conn.cpu() - cpu0
    ctl.sync("done")
    return {"samples": samples, "cpu": used, "transport": conn.transport()}


# -- 2, 3. contention: one hot lock, read/write mix, semaphore ------------------------------


def contend(
    ctl: Ctl,
    lib: str,
    hosts: str,
    path: str,
    kind: str,
    seed: int,
    read_ratio: float = 0.8,
    permits: int = 3,
    redis_port: int | None = None,
    jvm_warmup: int = 0,
) -> dict[str, Any]:
    conn = libs.connect(lib, hosts, redis_port, jvm_warmup=jvm_warmup)
    try:
        if isinstance(conn, libs.CuratorConnection):
            if kind != "mutex":
                raise ValueError(f"the Curator row has a mutex only, not {kind!r}")
            return _curator_contend(ctl, conn, conn.mutex(path))
        if kind == "mutex":
            handles = [conn.mutex(path)]
        elif kind == "rw":
            handles = [conn.read_lock(path), conn.write_lock(path)]
        elif kind == "semaphore":
            handles = [conn.semaphore(path, permits)]
        else:
            raise ValueError(kind)
        for handle in handles:  # creates the lock path; contended, but outside the window
            handle.acquire()
            handle.release()
        go = ctl.sync("ready")
        rng = random.Random(seed)
        start, end = go["start"], go["end"]
        acquired: list[float] = []
        released: list[float] = []
        kinds: list[int] = []
        mono = time.monotonic
        _sleep_until(start)
        cpu0 = cpu()
        while mono() < end:
            which = 0 if len(handles) == 1 or rng.random() < read_ratio else 1
            handle = handles[which]
            handle.acquire()
            acquired.append(mono())
            released.append(mono())
            handle.release()
            kinds.append(which)
        used = cpu() - cpu0
        ctl.sync("done")
        return {"acquired": acquired, "released": released, "kinds": kinds, "cpu": used}
    finally:
        conn.close()


def _curator_contend(
    ctl: Ctl, conn: libs.CuratorConnection, lock: libs.CuratorHandle
) -> dict[str, Any]:
    """The contention loop run inside the JVM; its instants come back on our clock."""
    lock.acquire()  # creates the lock path; contended, but outside the window
    lock.release()
    go = ctl.sync("ready")
    cpu0 = conn.cpu()
    events = lock.contend(go["start"], go["end"])  # the JVM waits for the start itself
    used = conn.cpu() - cpu0
    ctl.sync("done")
    return {
        "acquired": [acquired for acquired, _ in events],
        "released": [releasing for _, releasing in events],
        "kinds": [0] * len(events),
        "cpu": used,
    }


# -- 4a. a long queue drained --------------------------------------------------------------


def drain_holder(ctl: Ctl, lib: str, hosts: str, path: str) -> dict[str, Any]:
    conn = libs.connect(lib, hosts)
    try:
        lock = conn.mutex(path)
        lock.acquire()
        ctl.sync("holding")
        released = time.monotonic()
        lock.release()
        ctl.sync({"released": released})
        return {}
    finally:
        conn.close()


def drain_waiters(ctl: Ctl, lib: str, hosts: str, path: str, threads: int) -> dict[str, Any]:
    counting = libs.count_zklocks_wakeups() if lib == "zklocks" else lib == "kazoo"
    conn = libs.connect(lib, hosts, count_wakeups=True)
    events: list[tuple[float, float]] = []
    errors: list[str] = []
    mutex = threading.Lock()
    try:
        gc.collect()
        rss0 = rss()

        def waiter() -> None:
            try:
                lock = conn.mutex(path)
                lock.acquire()
                acquired = time.monotonic()
                lock.release()
                with mutex:
                    events.append((acquired, time.monotonic()))
            except Exception as exc:
                with mutex:
                    errors.append(repr(exc))

        pool = [threading.Thread(target=waiter, daemon=True) for _ in range(threads)]
        for thread in pool:
            thread.start()
        ctl.sync("started")  # answered once the server shows every waiter queued
        gc.collect()
        rss1 = rss()
        wake0 = libs.WAKEUPS.value
        ctl.sync("measured")  # answered when the holder lets go
        for thread in pool:
            thread.join()
        ctl.sync(
            {
                "events": events,
                "errors": errors[:5],
                "wakeups": libs.WAKEUPS.value - wake0 if counting else None,
                "rss_per_waiter": (rss1 - rss0) / threads,
            }
        )
        return {}
    finally:
        conn.close()


# -- 4b. the herd: wake-ups per release against queue length ---------------------------------


def herd(ctl: Ctl, design: str, hosts: str, path: str, threads: int, index: int) -> dict[str, Any]:
    """``threads`` contenders of ``design`` in this process; the coordinator releases them.

    Designs: ``zklocks``, ``kazoo`` (their fair locks), ``one-node`` (seed 000: everyone
    races to create ``lock`` and watches it) and ``child-list`` (everyone watches the
    whole child list, the textbook herd of seed 002). The naive two are written here
    with kazoo; each waiter counts its own wake-ups.
    """
    from kazoo.exceptions import NodeExistsError

    counting = True
    if design == "zklocks":
        counting = libs.count_zklocks_wakeups()
        conn: libs.Connection = libs.connect("zklocks", hosts)
    else:
        conn = libs.KazooConnection(hosts, count_wakeups=True)
    kazoo = getattr(conn, "client", None) if design != "zklocks" else None
    stop = threading.Event()
    watch_go = threading.Event()
    releases = [threading.Event() for _ in range(threads)]
    sleepers: set[threading.Event] = set()
    handles: list[Any] = []
    errors: list[str] = []
    mutex = threading.Lock()

    def acquired(tid: int) -> None:
        ctl.send("acquired", {"worker": index, "tid": tid, "t": time.monotonic()})

    def sleep_until_woken() -> threading.Event:
        woke = threading.Event()
        with mutex:
            sleepers.add(woke)
        if stop.is_set():
            woke.set()
        return woke

    def one_node(tid: int) -> None:
        assert kazoo is not None
        node = path + "/lock"
        while not stop.is_set():
            try:
                kazoo.create(node, ephemeral=True)
                break
            except NodeExistsError:
                woke = sleep_until_woken()
                if kazoo.exists(node, watch=lambda event, woke=woke: woke.set()):
                    woke.wait()
                    if not stop.is_set():
                        libs.WAKEUPS.hit()  # a waiter woke up to try again
        if stop.is_set():
            return
        acquired(tid)
        releases[tid].wait()
        kazoo.delete(node)

    def child_list(tid: int) -> None:
        assert kazoo is not None
        mine = kazoo.create(path + "/n-", ephemeral=True, sequence=True).rsplit("/", 1)[1]
        watch_go.wait()
        while not stop.is_set():
            woke = sleep_until_woken()
            children = kazoo.get_children(path, watch=lambda event, woke=woke: woke.set())
            if min(children, key=lambda name: name[-10:]) == mine:
                break
            woke.wait()
            if not stop.is_set():
                libs.WAKEUPS.hit()  # a waiter woke up to look at the list again
        if stop.is_set():
            return
        acquired(tid)
        releases[tid].wait()
        kazoo.delete(f"{path}/{mine}")

    def fair(tid: int) -> None:
        lock = conn.mutex(path)
        with mutex:
            handles.append(lock)
        lock.acquire()
        if stop.is_set():
            return
        acquired(tid)
        releases[tid].wait()
        lock.release()

    body = {"zklocks": fair, "kazoo": fair, "one-node": one_node, "child-list": child_list}[design]
    if kazoo is not None:
        kazoo.ensure_path(path)

    def run(tid: int) -> None:
        try:
            body(tid)
        except Exception as exc:
            if not stop.is_set():
                with mutex:
                    errors.append(f"{type(exc).__name__}: {exc}")

    pool = [threading.Thread(target=run, args=(tid,), daemon=True) for tid in range(threads)]
    for thread in pool:
        thread.start()
    ctl.send("started", {"counting": counting})
    try:
        while True:
            command = ctl.recv()
            if command[0] == "release":
                releases[command[1]].set()
            elif command[0] == "watch":
                watch_go.set()
            elif command[0] == "stats":
                with mutex:
                    ctl.send("stats", {"wakeups": libs.WAKEUPS.value, "errors": list(errors)})
            elif command[0] == "stop":
                break
    finally:
        stop.set()
        with mutex:
            for event in [*sleepers, *releases]:
                event.set()
            for handle in handles:
                if hasattr(handle, "cancel"):
                    with contextlib.suppress(Exception):
                        handle.cancel()
        watch_go.set()
        with contextlib.suppress(Exception):
            conn.close()
    return {"errors": errors[:5]}


# -- 5. many locks from one process -------------------------------------------------------


def many_threads(ctl: Ctl, lib: str, hosts: str, base: str, concurrency: int) -> dict[str, Any]:
    conn = libs.connect(lib, hosts)
    try:
        handles = [conn.mutex(f"{base}/p{i}") for i in range(concurrency)]
        for handle in handles:
            handle.acquire()
            handle.release()
        go = ctl.sync("ready")
        counts = [0] * concurrency
        errors: list[str] = []
        begin = threading.Event()
        end = go["end"]

        def loop(i: int) -> None:
            handle = handles[i]
            mono = time.monotonic
            begin.wait()
            try:
                while mono() < end:
                    handle.acquire()
                    handle.release()
                    counts[i] += 1
            except Exception as exc:
                errors.append(repr(exc))

        threads = [
            threading.Thread(target=loop, args=(i,), daemon=True) for i in range(concurrency)
        ]
        for thread in threads:
            thread.start()
        _sleep_until(go["start"])
        t0, cpu0, switched = time.monotonic(), cpu(), switches()
        begin.set()
        for thread in threads:
            thread.join()
        elapsed, used = time.monotonic() - t0, cpu() - cpu0
        switched = switches() - switched
        ctl.sync("done")
        return {
            "cycles": sum(counts),
            "elapsed": elapsed,
            "cpu": used,
            "switches": switched,
            "errors": errors[:5],
        }
    finally:
        conn.close()


def _async_client(hosts: str) -> Any:
    import zklocks

    factory = getattr(zklocks, "AsyncClient", None)
    if factory is None:
        raise RuntimeError("zklocks.AsyncClient is not in this tree yet")
    return factory(hosts, session_timeout=libs.SESSION_TIMEOUT)


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value


def many_asyncio(ctl: Ctl, hosts: str, base: str, concurrency: int) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        async with _async_client(hosts) as client:
            locks = [client.lock(f"{base}/p{i}") for i in range(concurrency)]
            for lock in locks:
                await lock.acquire()
                await _maybe_await(lock.release())
            go = await loop.run_in_executor(None, ctl.sync, "ready")
            end = go["end"]
            counts = [0] * concurrency

            async def cycle(i: int) -> None:
                lock = locks[i]
                while time.monotonic() < end:
                    await lock.acquire()
                    await _maybe_await(lock.release())
                    counts[i] += 1

            await asyncio.sleep(max(0.0, go["start"] - time.monotonic()))
            t0, cpu0, switched = time.monotonic(), cpu(), switches()
            await asyncio.gather(*(cycle(i) for i in range(concurrency)))
            elapsed, used = time.monotonic() - t0, cpu() - cpu0
            switched = switches() - switched
            await loop.run_in_executor(None, ctl.sync, "done")
            return {
                "cycles": sum(counts),
                "elapsed": elapsed,
                "cpu": used,
                "switches": switched,
                "errors": [],
            }

    return asyncio.run(main())


def async_memory(ctl: Ctl, hosts: str, path: str, waiters: int, budget: float) -> dict[str, Any]:
    """RSS per asyncio task queued on one held lock. Ends the process itself: letting
    asyncio cancel thousands of queued acquires would make each delete its node first."""

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, _context: None)  # a dropped session's tasks
        client = _async_client(hosts)
        await client.start()
        holder = client.lock(path)
        await holder.acquire()
        gc.collect()
        rss0 = rss()
        started = time.monotonic()
        failures: list[str] = []

        async def waiter() -> None:
            try:
                lock = client.lock(path)
                await lock.acquire()
                await _maybe_await(lock.release())
            except Exception as exc:
                if len(failures) < 3:
                    failures.append(f"{type(exc).__name__}: {exc}")

        tasks = [asyncio.create_task(waiter()) for _ in range(waiters)]
        queued = 0
        while time.monotonic() - started < budget and not failures:
            await asyncio.sleep(0.25)
            queued = await loop.run_in_executor(None, ctl.sync, "count")
            if queued >= waiters:
                break
        elapsed = time.monotonic() - started
        gc.collect()
        rss1 = rss()
        del tasks
        return {
            "queued": queued,
            "asked": waiters,
            "rss_per_waiter": (rss1 - rss0) / max(1, queued),
            "enqueue_seconds": elapsed,
            "failures": failures,
        }

    result = asyncio.new_event_loop().run_until_complete(main())
    ctl.send("result", result)
    os._exit(0)


# -- 6. where the time goes --------------------------------------------------------------


_TRANSPORT = (
    "/zklocks/_protocol/",
    "/zklocks/_transport/",
    "/zklocks/_sync/native_carrier",
    "/kazoo/",
)
_BLOCKING = ("acquire' of '_thread", "select.", "poll", "'wait'", "epoll", "sleep")


def _own_bucket(filename: str, function: str) -> str | None:
    """The bucket a function belongs to by itself, or None: then its callers decide."""
    if any(part in filename for part in _TRANSPORT):
        return "transport"
    if "/zklocks/" in filename:
        return "zklocks"
    if filename == "~" and any(word in function for word in _BLOCKING):
        return "blocked"
    return None


def _profile_buckets(profile: cProfile.Profile, top: int = 12) -> dict[str, Any]:
    """Self time per bucket. Library and builtin functions (json, threading, socket
    calls) count toward whoever called them: their time is split over their callers
    in proportion to the calls' own time, up the stack to the nearest function of ours
    or of the transport, so ``sock.send`` called by the transport is transport time."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    memo: dict[Any, dict[str, float]] = {}

    def shares(func: Any, depth: int = 0) -> dict[str, float]:
        if func in memo:
            return memo[func]
        own = _own_bucket(func[0], func[2])
        if own is not None:
            result = {own: 1.0}
        else:
            callers = stats.get(func, (0, 0, 0, 0, {}))[4]
            weights = {c: v[2] for c, v in callers.items() if v[2] > 0} or {c: 1.0 for c in callers}
            total = sum(weights.values())
            result = {}
            if depth > 30 or not total:
                result = {"other": 1.0}
            else:
                memo[func] = {"other": 1.0}  # breaks recursion cycles
                for caller, weight in weights.items():
                    for bucket, share in shares(caller, depth + 1).items():
                        result[bucket] = result.get(bucket, 0.0) + share * weight / total
        memo[func] = result
        return result

    buckets: dict[str, float] = {"zklocks": 0.0, "transport": 0.0, "blocked": 0.0, "other": 0.0}

    def name(func: Any) -> str:
        filename, line, function = func
        short = filename.rsplit("site-packages/", 1)[-1].rsplit("/src/", 1)[-1]
        short = short.rsplit("/lib/python3.", 1)[-1].split("/", 1)[-1]
        return f"{short}:{line}({function})" if filename != "~" else function

    rows = []
    for func, (_cc, calls, tottime, _ct, callers) in stats.items():
        for bucket, share in shares(func).items():
            buckets[bucket] = buckets.get(bucket, 0.0) + tottime * share
        main = max(shares(func).items(), key=lambda kv: kv[1])[0]
        caller = max(callers.items(), key=lambda kv: kv[1][2])[0] if callers else None
        rows.append((tottime, calls, name(func), main, name(caller) if caller else ""))
    rows.sort(reverse=True)
    return {"buckets": buckets, "top": rows[:top]}


def profile(ctl: Ctl, hosts: str, base: str, cycles: int) -> dict[str, Any]:
    """The wire floor, our unprofiled cycles with per-thread CPU, then a cProfile run."""
    raw = wire.RawClient.connect(hosts)
    floor_paths = {name: f"{base}/floor{i}" for i, name in enumerate(wire.FLOORS)}
    for p in floor_paths.values():
        raw.ensure_path(p)
    ours = {
        "zklocks": libs.connect("zklocks", hosts),
        "zklocks-unfair": libs.connect("zklocks-unfair", hosts),
        "kazoo": libs.connect("kazoo", hosts),
    }
    try:
        locks = {lib: conn.mutex(f"{base}/{lib}") for lib, conn in ours.items()}
        for lock in locks.values():
            for _ in range(20):
                lock.acquire()
                lock.release()
        for name, fn in wire.FLOORS.items():
            for _ in range(20):
                fn(raw, floor_paths[name])
        samples: dict[str, list[float]] = {name: [] for name in [*wire.FLOORS, *locks]}
        threads: dict[str, dict[str, float]] = {lib: {"main": 0.0, "other": 0.0} for lib in locks}
        perf = time.perf_counter
        main_tid = threading.get_native_id()
        chunk = max(1, cycles // 10)
        for _ in range(0, cycles, chunk):  # interleaved chunks: drift hits all alike
            for name, fn in wire.FLOORS.items():
                out, p = samples[name], floor_paths[name]
                for _ in range(chunk):
                    t0 = perf()
                    fn(raw, p)
                    out.append(perf() - t0)
            for lib, lock in locks.items():
                out = samples[lib]
                before = thread_cpu()
                for _ in range(chunk):
                    t0 = perf()
                    lock.acquire()
                    lock.release()
                    out.append(perf() - t0)
                after = thread_cpu()
                for tid, seconds in after.items():
                    spent = seconds - before.get(tid, 0.0)
                    threads[lib]["main" if tid == main_tid else "other"] += spent
        profiles = {}
        for lib, lock in locks.items():
            prof = cProfile.Profile()
            n = max(1, cycles // 2)
            t0 = perf()
            prof.enable()
            for _ in range(n):
                lock.acquire()
                lock.release()
            prof.disable()
            profiles[lib] = {**_profile_buckets(prof), "cycles": n, "wall": perf() - t0}
        transport = ours["zklocks"].transport()
    finally:
        raw.close()
        for conn in ours.values():
            conn.close()
    measured = len(samples["zklocks"])
    return {
        "samples": samples,
        "thread_cpu": {lib: {k: v / measured for k, v in d.items()} for lib, d in threads.items()},
        "profiles": profiles,
        "transport": transport,
    }
