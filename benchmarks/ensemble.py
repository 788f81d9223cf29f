"""7. The ensemble scenario: three members, every link delayed, the libraries and the floor.

Production runs ZooKeeper as a quorum across a network, where a write travels from the
client's member to the leader, out to the followers and back before anyone hears of it;
a standalone server on loopback hides exactly the round trips zklocks saves. Here a
3-member ensemble (``ZooKeeperEnsemble``) runs with every client↔member and
member↔member link through a :class:`~benchmarks.proxy.DelayProxy` that delays both
directions by half the round-trip time asked (so a round trip through any link costs
about that time, plus the proxy's own hop: the floor's ``rtt`` column measures what a
read through a client link really took). The proxies run in a process of their own.
Workers are dealt round-robin over the members, so most of them talk to a follower.

Per round-trip time it measures the uncontended cycle (one process, each round on the
next member), the hot lock (``ens_hot_procs`` processes) and a queue of waiters drained,
for zklocks, Curator and kazoo (the drain has no Curator row: its worker runs a thread per
waiter, which the Java worker does not offer). The **floor** is timed on the same links
in the same run by raw-socket clients (``wire.RawClient``): a holder on one member
deletes its node while a watcher on another (or the same) member waits for the
notification; the time from sending the delete to the notification is a delete's commit
plus the notification's half round trip. With the read the new holder sends to confirm
(``rtt``; docs/locks.md says why it stays) that is the least a hand-off can cost.

The phases run in turn over every round-trip time (all uncontended runs, then all hot
lock runs, then the drains), shortest first. Curator's JVMs warm their JIT first, on the
run's standalone server (uncontended cycles, then an untimed hot-lock run), so thousands
of warm-up cycles never run over a slow link nor through the ensemble's three fsyncs.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

from benchmarks.proxy import ProxyProcess
from benchmarks.scenarios import Bench, cycle_round, rounds_order
from benchmarks.stats import median, percentile
from benchmarks.wire import EPHEMERAL, RawClient, ZkWireError

ENSEMBLE_LIBS = ("zklocks", "curator", "kazoo")
DRAIN_LIBS = ("zklocks", "kazoo")
MEMBERS = 3


def rtt_key(rtt: float) -> str:
    """How a round-trip time names its results: milliseconds, ``"0.2"``, ``"1"``, ``"5"``."""
    return f"{rtt * 1e3:g}"


class DelayedEnsemble:
    """A 3-member ensemble whose every link runs through a proxy delaying both directions.

    ``client_hosts[i]`` is the connect string of member ``i`` through its client proxy;
    ``hosts`` reaches the members directly (for inspection only, never a library's
    session). ``mntr()`` sums every member's counters, so ``ZkCounters`` counts the
    requests all members received, whichever a client talked to.
    """

    def __init__(self, *, force_sync: bool = True) -> None:
        from zklocks.server import ZooKeeperEnsemble

        self.force_sync = force_sync
        self._proxies = ProxyProcess()
        self.links = 0
        self.client_hosts: list[str] = []
        self.ensemble = ZooKeeperEnsemble(
            MEMBERS,
            tick_time=2000,
            max_session_timeout=60_000,
            force_sync=force_sync,
            startup_timeout=180.0,
            peer_route=self._route,
        )

    def _proxy(self, port: int) -> int:
        self.links += 1
        return self._proxies.add(port)

    def _route(self, _from_myid: int, _to_myid: int, port: int) -> int:
        return self._proxy(port)

    @property
    def hosts(self) -> str:
        return str(self.ensemble.hosts)

    def set_rtt(self, rtt: float) -> None:
        """Every link, both ways: half the round trip each direction."""
        self._proxies.set_delay(rtt / 2)

    def timer_lateness(self) -> float:
        return self._proxies.lateness()

    def mntr(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for member in self.ensemble.members:
            for key, value in member.mntr().items():
                if isinstance(value, int):
                    total[key] = total.get(key, 0) + value
        return total

    def __enter__(self) -> DelayedEnsemble:
        try:
            self.ensemble.start()
            for member in self.ensemble.members:
                self.client_hosts.append(f"127.0.0.1:{self._proxy(member.port)}")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self.ensemble.stop()
        self._proxies.close()


# -- the floor ------------------------------------------------------------------------------


def _watch_until_deleted(watcher: RawClient, node: str) -> None:
    """Leave an exists watch on ``node`` once the watcher's member has it (a follower may
    apply the create a moment after the holder's member answered)."""
    while True:
        err, _ = watcher.batch([watcher.exists(node, watch=True)])[0]
        if err == 0:
            return
        if err != -101:  # NoNode: wait for its creation to reach this member
            raise ZkWireError("exists", err)
        watcher.next_notification()


def measure_floor(client_hosts: list[str], base: str, handoffs: int) -> dict[str, Any]:
    """Raw-wire hand-offs over every (holder member, watcher member) pair in turn.

    ``handoff``: delete sent → the watcher's notification read (the floor);
    ``delete``: the delete's own round trip; ``rtt``: a read served by the watcher's member.
    """
    holders = [RawClient.connect(hosts) for hosts in client_hosts]
    watchers = [RawClient.connect(hosts) for hosts in client_hosts]
    samples: dict[str, list[float]] = {"handoff": [], "delete": [], "rtt": []}
    try:
        holders[0].ensure_path(base)
        perf = time.perf_counter
        for i in range(handoffs):
            holder = holders[i % len(holders)]
            watcher = watchers[(i // len(holders)) % len(watchers)]
            node = f"{base}/h{i}"
            err, _ = holder.batch([holder.create(node, EPHEMERAL)])[0]
            if err != 0:
                raise ZkWireError("create", err)
            t0 = perf()
            watcher.batch([watcher.exists("/")])
            samples["rtt"].append(perf() - t0)
            _watch_until_deleted(watcher, node)
            notified: list[float] = []

            def listen(watcher: RawClient = watcher, notified: list[float] = notified) -> None:
                watcher.next_notification()
                notified.append(perf())

            listener = threading.Thread(target=listen, daemon=True)
            listener.start()
            t0 = perf()
            err, _ = holder.batch([holder.delete(node)])[0]
            samples["delete"].append(perf() - t0)
            listener.join(30)
            if err != 0 or not notified:
                raise ZkWireError("delete", err or -1)
            samples["handoff"].append(notified[0] - t0)
        holders[0].batch([holders[0].delete(base)])
    finally:
        for client in (*holders, *watchers):
            client.close()
    return {
        "samples": samples,
        **{name: median(values) for name, values in samples.items()},
        "handoff_p99": percentile(samples["handoff"], 99),
    }


# -- the scenario ---------------------------------------------------------------------------


def run(main: Bench) -> dict[str, Any]:
    """Start the delayed ensemble, run every phase at every round-trip time, stop it."""
    p = main.params
    rtts = sorted(p.ens_rtts)
    out: dict[str, Any] = {
        "members": MEMBERS,
        "rtts": {rtt_key(rtt): {"rtt": rtt} for rtt in rtts},
        "hot_procs": p.ens_hot_procs,
        "drain_waiters": p.ens_drain_waiters,
    }
    started = time.monotonic()
    with DelayedEnsemble(force_sync=main.zk.force_sync) as links:
        out["startup_seconds"] = time.monotonic() - started
        out["links"] = links.links
        main.log(
            f"  ensemble of {MEMBERS} up in {out['startup_seconds']:.1f} s, "
            f"{links.links} delayed links"
        )
        bench = Bench(links, None, "n/a", p, main.log, main.curator_error, pool=main.pool)
        _warm_curator(main)
        for rtt in rtts:
            links.set_rtt(rtt)
            out["rtts"][rtt_key(rtt)]["uncontended"] = _uncontended(bench, links, rtt)
        for rtt in rtts:
            links.set_rtt(rtt)
            at = out["rtts"][rtt_key(rtt)]
            at["floor"] = measure_floor(
                links.client_hosts, f"/bench/ens/floor/{rtt_key(rtt)}", p.ens_floor_handoffs
            )
            at["timer_lateness"] = links.timer_lateness()
            main.log(
                f"  {rtt_key(rtt)} ms: floor hand-off {at['floor']['handoff'] * 1e3:.2f} ms, "
                f"delete {at['floor']['delete'] * 1e3:.2f} ms, "
                f"read {at['floor']['rtt'] * 1e3:.2f} ms"
            )
            at["hot"] = _hot(bench, links, rtt)
        for rtt in rtts:
            links.set_rtt(rtt)
            out["rtts"][rtt_key(rtt)]["drain"] = _drain(bench, links, rtt)
        links.set_rtt(0.0)
    return out


def _warm_curator(bench: Bench) -> None:
    """Warm the hot-lock workers' JVMs on ``bench``'s own server: their JIT warm-up (a JVM
    warm from an earlier scenario skips it), then one untimed contended run. Without that
    run, a trial's first timed Curator round (8 JVMs, 2 busy cores) burnt 52 ms of JVM CPU
    per acquisition and managed 3 acquisitions/s, against 39 in the next round."""
    if bench.missing("curator"):
        return
    p = bench.params
    bench.pool.ensure(p.ens_hot_procs)
    record: dict[str, Any] = {}
    with bench.attempt(record, "Curator warm-up for the ensemble"):
        bench._contend_once(
            "curator", "/bench/ens/warm", p.ens_hot_procs, p.ens_hot_duration, "mutex", 0, {}
        )


def _records(bench: Bench, libs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {lib: {"rounds": []} for lib in libs}
    for lib in libs:
        reason = bench.missing(lib)
        if reason:
            out[lib]["error"] = reason
    return out


def _uncontended(bench: Bench, links: DelayedEnsemble, rtt: float) -> dict[str, Any]:
    p = bench.params
    out = _records(bench, ENSEMBLE_LIBS)
    for r in range(p.ens_rounds):
        member = r % MEMBERS
        for lib in rounds_order(ENSEMBLE_LIBS, r):
            record = out[lib]
            if "error" in record:
                continue
            with bench.attempt(record, f"ensemble {rtt_key(rtt)} ms uncontended {lib}"):
                res, requests = bench._uncontended_once(
                    lib,
                    f"/bench/ens/u/{rtt_key(rtt)}/{lib}/r{r}",
                    p.ens_cycles,
                    hosts=links.client_hosts[member],
                )
                samples = res["samples"]
                record["rounds"].append(
                    {"member": member, **cycle_round(samples, requests, res["cpu"])}
                )
        bench.log(
            f"  {rtt_key(rtt)} ms uncontended round {r + 1}/{p.ens_rounds} (member {member}): "
            + ", ".join(
                f"{lib} {out[lib]['rounds'][-1]['median'] * 1e3:.2f} ms"
                for lib in ENSEMBLE_LIBS
                if out[lib]["rounds"] and "error" not in out[lib]
            )
        )
    return out


def _hot(bench: Bench, links: DelayedEnsemble, rtt: float) -> dict[str, Any]:
    p = bench.params
    n = p.ens_hot_procs
    out = _records(bench, ENSEMBLE_LIBS)
    bench.pool.ensure(n)
    for r in range(p.ens_hot_rounds):
        for lib in rounds_order(ENSEMBLE_LIBS, r):
            record = out[lib]
            if "error" in record:
                continue
            with bench.attempt(record, f"ensemble {rtt_key(rtt)} ms hot {lib}"):
                figures = bench._contend_once(
                    lib,
                    f"/bench/ens/hot/{rtt_key(rtt)}/{lib}/r{r}",
                    n,
                    p.ens_hot_duration,
                    "mutex",
                    r,
                    {},
                    spread=links.client_hosts,
                )
                record["rounds"].append(figures)
                bench.log(
                    f"  {rtt_key(rtt)} ms hot n={n} round {r + 1}/{p.ens_hot_rounds} {lib}: "
                    f"{figures['rate']:.0f} acq/s, hand-off "
                    f"{figures['handoff_median'] * 1e3:.2f} ms, "
                    f"{figures['requests']:.2f} req/acq"
                )
    return out


def _drain(bench: Bench, links: DelayedEnsemble, rtt: float) -> dict[str, Any]:
    waiting = bench.params.ens_drain_waiters
    out = _records(bench, DRAIN_LIBS)
    for lib in DRAIN_LIBS:
        record = out[lib]
        with bench.attempt(record, f"ensemble {rtt_key(rtt)} ms drain {lib}"):
            figures = bench._drain_once(
                lib,
                f"/bench/ens/drain/{rtt_key(rtt)}/{lib}",
                waiting=waiting,
                spread=links.client_hosts,
            )
            record["rounds"].append(figures)
            bench.log(
                f"  {rtt_key(rtt)} ms drain {waiting} {lib}: "
                f"{figures['handoffs_per_s']:.0f} handoffs/s, "
                f"{figures['requests_per_handoff']:.2f} req/handoff"
            )
    return out
