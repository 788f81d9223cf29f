"""The servers a run needs, their counters, and the machine facts a report must state."""

from __future__ import annotations

import contextlib
import itertools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from zklocks.server import _free_ports

WATCH_FIRES = (
    "zk_sum_node_deleted_watch_count",
    "zk_sum_node_children_watch_count",
    "zk_sum_node_created_watch_count",
    "zk_sum_node_changed_watch_count",
)


@dataclass
class Snapshot:
    values: dict[str, Any]
    calls: int  # how many counter reads this source had made, this one included
    at: float = field(default_factory=time.monotonic)

    def __getitem__(self, key: str) -> Any:
        return self.values.get(key, 0)


class ZkCounters:
    """``mntr`` readings; each reading is itself one received packet, so it is subtracted."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.calls = 0
        self.per_read = 1
        self.per_read = self._calibrate()

    def _calibrate(self) -> int:
        readings = [self.snap() for _ in range(4)]
        deltas = [
            b["zk_packets_received"] - a["zk_packets_received"]
            for a, b in itertools.pairwise(readings)
        ]
        return sorted(deltas)[len(deltas) // 2]

    def snap(self) -> Snapshot:
        values = self.server.mntr()
        self.calls += 1
        return Snapshot(values, self.calls)

    def requests(self, a: Snapshot, b: Snapshot) -> int:
        """Requests the server received between two readings (pings included)."""
        reads = (b.calls - a.calls) * self.per_read
        return int(b["zk_packets_received"] - a["zk_packets_received"] - reads)

    @staticmethod
    def watch_fires(a: Snapshot, b: Snapshot) -> int:
        """Watch notifications the server triggered between two readings."""
        return int(sum(b[key] - a[key] for key in WATCH_FIRES))

    def settle(self, quiet: float = 0.15, timeout: float = 120.0) -> Snapshot:
        """Wait until no request arrives for ``quiet`` seconds; the last reading."""
        deadline = time.monotonic() + timeout
        last = self.snap()
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.snap()
            if self.requests(last, now) == 0:
                return now
            last = now
        raise TimeoutError(f"the server did not go quiet within {timeout} s")

    def wait_for(self, key: str, at_least: int, timeout: float = 120.0) -> Snapshot:
        deadline = time.monotonic() + timeout
        while True:
            snap = self.snap()
            if snap[key] >= at_least:
                return snap
            if time.monotonic() > deadline:
                raise TimeoutError(f"{key} stayed at {snap[key]} < {at_least} for {timeout} s")
            time.sleep(0.05)


class RedisServer:
    """A throwaway ``redis-server`` on a free loopback port (no persistence)."""

    def __init__(self) -> None:
        self.binary = shutil.which("redis-server")
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.calls = 0
        self.per_read = 1
        self.version = ""
        self._dir: str | None = None

    def start(self) -> RedisServer:
        if self.binary is None:
            raise FileNotFoundError(
                "redis-server is not installed (apt-get install redis-server; `make setup` does it)"
            )
        self.port = _free_ports(1)[0]  # outside the ephemeral range: bound only later
        self._dir = tempfile.mkdtemp(prefix="bench-redis-")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.client.ping()
                break
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        self.version = str(self.client.info("server").get("redis_version", ""))
        readings = [self.snap() for _ in range(4)]
        deltas = [b["n"] - a["n"] for a, b in itertools.pairwise(readings)]
        self.per_read = sorted(deltas)[len(deltas) // 2]
        return self

    def snap(self) -> Snapshot:
        """Commands clients sent: every command counted, less the GET/DEL that redis-py's
        release script runs inside the server (Redis counts those too)."""
        stats = self.client.info("commandstats")
        calls = {key.removeprefix("cmdstat_"): int(v["calls"]) for key, v in stats.items()}
        value = sum(calls.values()) - calls.get("get", 0) - calls.get("del", 0)
        self.calls += 1
        return Snapshot({"n": value}, self.calls)

    def requests(self, a: Snapshot, b: Snapshot) -> int:
        return int(b["n"] - a["n"] - (b.calls - a.calls) * self.per_read)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_facts() -> dict[str, Any]:
    cpu_model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_gib = 0.0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
    java = ""
    with contextlib.suppress(Exception):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
        java = (out.stderr or out.stdout).splitlines()[0]
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu_model,
        "memory_gib": round(mem_gib, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "java": java,
        "loadavg_start": os.getloadavg(),
        "versions": {
            name: _version(name) for name in ("zklocks", "kazoo", "tooz", "redis", "matplotlib")
        },
    }
