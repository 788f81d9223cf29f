"""One face for every library under test: connect, make locks, count waiter wake-ups.

Library names used across the benchmark:

- ``zklocks``         zklocks fair lock (``client.lock(path)``)
- ``zklocks-unfair``  zklocks one-node lock (``client.lock(path, fair=False)``)
- ``kazoo``           kazoo's ``Lock`` / ``ReadLock`` / ``WriteLock`` / ``Semaphore``
- ``tooz``            tooz's ZooKeeper (kazoo driver) lock
- ``redis``           redis-py's ``Lock``
- ``curator``         Apache Curator's ``InterProcessMutex`` (Java), in a JVM of its own
                      driven over a pipe (``interop.curator``): see :class:`CuratorConnection`

Every handle has ``acquire()`` and ``release()``; make one handle per thread.
Sessions are 30 s long for every library so no keep-alive ping lands inside a short
measurement window (pings would count as requests).
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any, Protocol

SESSION_TIMEOUT = 30.0
ZK_LIBS = ("zklocks", "zklocks-unfair", "kazoo", "tooz", "curator")


class Handle(Protocol):
    def acquire(self) -> Any: ...
    def release(self) -> Any: ...


class WakeCounter:
    """Counts waiter wake-ups in this process (watch fired, waiter woke to look again)."""

    def __init__(self) -> None:
        self._count = itertools.count()
        self._last = 0
        self._mutex = threading.Lock()

    def hit(self) -> None:
        with self._mutex:
            self._last = next(self._count) + 1

    @property
    def value(self) -> int:
        with self._mutex:
            return self._last


WAKEUPS = WakeCounter()
_patched_zklocks = False


def count_zklocks_wakeups() -> bool:
    """Wrap the sync driver's ``execute``: each ``Wait`` that ends is one waiter wake-up.

    Returns False if this zklocks has no such driver (the count is then unavailable).
    """
    global _patched_zklocks
    if _patched_zklocks:
        return True
    try:
        from zklocks._core.ops import Wait
        from zklocks._sync import driver
    except ImportError:
        return False
    original = getattr(driver, "execute", None)
    if original is None:
        return False

    def counted(op: Any, *args: Any) -> Any:
        if not isinstance(op, Wait):
            return original(op, *args)
        try:
            return original(op, *args)
        finally:
            WAKEUPS.hit()

    driver.execute = counted
    _patched_zklocks = True
    return True


def _kazoo_counting_lock(base: type) -> type:
    class CountingLock(base):  # type: ignore[misc, valid-type]
        def _watch_predecessor(self, event: Any) -> None:
            WAKEUPS.hit()
            super()._watch_predecessor(event)

    return CountingLock


class Connection:
    name = "?"

    def mutex(self, path: str) -> Handle:
        raise NotImplementedError(f"{self.name} has no mutex")

    def read_lock(self, path: str) -> Handle:
        raise NotImplementedError(f"{self.name} has no read/write lock")

    def write_lock(self, path: str) -> Handle:
        raise NotImplementedError(f"{self.name} has no read/write lock")

    def semaphore(self, path: str, permits: int) -> Handle:
        raise NotImplementedError(f"{self.name} has no semaphore")

    def close(self) -> None:
        pass

    def transport(self) -> str:
        return ""


class ZkLocksConnection(Connection):
    def __init__(self, hosts: str, *, fair: bool = True) -> None:
        import zklocks

        self.name = "zklocks" if fair else "zklocks-unfair"
        self.fair = fair
        self.client = zklocks.Client(hosts, session_timeout=SESSION_TIMEOUT).start()

    def mutex(self, path: str) -> Handle:
        return self.client.lock(path, fair=self.fair)  # type: ignore[no-any-return]

    def read_lock(self, path: str) -> Handle:
        return self._rw(path).read  # type: ignore[no-any-return]

    def write_lock(self, path: str) -> Handle:
        return self._rw(path).write  # type: ignore[no-any-return]

    def _rw(self, path: str) -> Any:
        cache = self.__dict__.setdefault("_rw_cache", {})
        if path not in cache:
            cache[path] = self.client.read_write_lock(path)
        return cache[path]

    def semaphore(self, path: str, permits: int) -> Handle:
        return self.client.semaphore(path, permits=permits)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.client.stop()

    def transport(self) -> str:
        session = getattr(self.client, "_session", None)
        return type(session).__module__ + "." + type(session).__name__ if session else "?"


class KazooConnection(Connection):
    name = "kazoo"

    def __init__(self, hosts: str, *, count_wakeups: bool = False) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT)
        self.client.start(timeout=30)
        self.count_wakeups = count_wakeups

    def mutex(self, path: str) -> Handle:
        if self.count_wakeups:
            from kazoo.recipe.lock import Lock

            return _kazoo_counting_lock(Lock)(self.client, path)  # type: ignore[no-any-return]
        return self.client.Lock(path)  # type: ignore[no-any-return]

    def read_lock(self, path: str) -> Handle:
        return self.client.ReadLock(path)  # type: ignore[no-any-return]

    def write_lock(self, path: str) -> Handle:
        return self.client.WriteLock(path)  # type: ignore[no-any-return]

    def semaphore(self, path: str, permits: int) -> Handle:
        return self.client.Semaphore(path, max_leases=permits)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def transport(self) -> str:
        return "kazoo threading handler"


class ToozConnection(Connection):
    name = "tooz"

    def __init__(self, hosts: str) -> None:
        from tooz import coordination

        member = f"bench-{os.getpid()}-{id(self)}".encode()
        url = f"kazoo://{hosts}?timeout={int(SESSION_TIMEOUT)}"
        self.coordinator = coordination.get_coordinator(url, member)
        self.coordinator.start()

    def mutex(self, path: str) -> Handle:
        return self.coordinator.get_lock(path.strip("/").replace("/", "-").encode())  # type: ignore[no-any-return]

    def close(self) -> None:
        self.coordinator.stop()


class RedisConnection(Connection):
    name = "redis"

    def __init__(self, port: int) -> None:
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=port)
        self.client.ping()

    def mutex(self, path: str) -> Handle:
        return self.client.lock("bench" + path.replace("/", ":"))  # redis-py defaults

    def close(self) -> None:
        self.client.close()


_jvm: Any = None  # this process's Curator worker, kept across rounds: its JIT stays warm
_jvm_warm_cycles = 0


class CuratorHandle:
    """One ``InterProcessMutex`` in the JVM. ``acquire``/``release`` cost a pipe round
    trip each, so timed loops run inside the JVM instead: :meth:`cycles`, :meth:`contend`."""

    def __init__(self, jvm: Any, name: str) -> None:
        self.jvm, self.name = jvm, name

    def acquire(self) -> bool:
        return bool(self.jvm.acquire(self.name))

    def release(self) -> None:
        self.jvm.release(self.name)

    def cycles(self, n: int) -> list[float]:
        """``n`` acquire+release cycles, each timed in the JVM (``System.nanoTime``)."""
        return list(self.jvm.cycles(self.name, n))

    def contend(self, start: float, end: float) -> list[tuple[float, float]]:
        """Cycles from ``start`` to ``end``: (acquired, releasing) monotonic instants."""
        return list(self.jvm.contend(self.name, start, end))


class CuratorConnection(Connection):
    """A CuratorFramework (one session) in this process's JVM worker.

    The JVM outlives the connection (one per benchmark worker process, ended with it),
    so the JIT compiles Curator's and ZooKeeper's code paths once. Before the first
    timed cycle in a JVM it runs ``jvm_warmup`` unrecorded uncontended cycles on a path of
    its own (before the counters' first reading, like every library's warm-up).
    """

    name = "curator"

    def __init__(self, hosts: str, *, jvm_warmup: int = 0) -> None:
        global _jvm, _jvm_warm_cycles
        from interop.curator import CuratorWorker

        if _jvm is None or _jvm.process.poll() is not None:
            _jvm, _jvm_warm_cycles = CuratorWorker(), 0
        self.jvm = _jvm
        self.jvm.connect(hosts, SESSION_TIMEOUT)
        self._names = itertools.count()
        if _jvm_warm_cycles < jvm_warmup:
            warm = self.mutex(f"/bench/jvm-warmup/p{os.getpid()}")
            warm.cycles(jvm_warmup - _jvm_warm_cycles)
            _jvm_warm_cycles = jvm_warmup

    def mutex(self, path: str) -> CuratorHandle:
        name = f"m{next(self._names)}"
        self.jvm.mutex(name, path)
        return CuratorHandle(self.jvm, name)

    def cpu(self) -> float:
        """CPU seconds the JVM has used, every thread (JIT and GC included)."""
        return float(self.jvm.cpu_seconds())

    def close(self) -> None:
        self.jvm.disconnect()

    def transport(self) -> str:
        return "Curator 5 / ZooKeeper Java client (NIO)"


def connect(lib: str, hosts: str, redis_port: int | None = None, **options: Any) -> Connection:
    if lib == "zklocks":
        return ZkLocksConnection(hosts, fair=True)
    if lib == "zklocks-unfair":
        return ZkLocksConnection(hosts, fair=False)
    if lib == "kazoo":
        return KazooConnection(hosts, count_wakeups=options.get("count_wakeups", False))
    if lib == "tooz":
        return ToozConnection(hosts)
    if lib == "curator":
        return CuratorConnection(hosts, jvm_warmup=options.get("jvm_warmup", 0))
    if lib == "redis":
        if redis_port is None:
            raise RuntimeError("no redis-server is running for this run")
        return RedisConnection(redis_port)
    raise ValueError(f"unknown library {lib!r}")
