"""Throwaway PostgreSQL and Redis servers for the fencing tests and the nemesis's
guarded-set workload, never the system's (the tests import them from here).

``PostgresServer``: a cluster made with ``initdb`` in a temporary directory and run with
``pg_ctl`` on a free loopback port. PostgreSQL refuses to run as root, so when the tests
run as root (CI, our machines) both commands run as ``nobody`` (subprocess's ``user=``),
in a directory that ``nobody`` owns. The binaries come from Debian's ``postgresql``
package (``/usr/lib/postgresql/<version>/bin``, the newest), which ``make test``
installs. ``RedisServer``: ``redis-server`` on a free loopback port, nothing saved.

Both stop in ``__exit__`` (pg_ctl's immediate mode, a SIGTERM then SIGKILL for Redis)
and leave nothing on disk.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from zklocks.server import _free_ports

_UNPRIVILEGED = "nobody"


def free_port() -> int:
    """A port the server binds later: outside the ephemeral range, as ZooKeeper's are."""
    return _free_ports(1)[0]


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin directory."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if not found:
        raise FileNotFoundError(
            "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb): "
            "apt-get install postgresql, which `make test` does"
        )
    return Path(found[-1]).parent


class PostgresServer:
    """A private PostgreSQL cluster; ``dsn`` connects as its superuser ``zklocks``."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.port = free_port()
        self.dsn = f"host=127.0.0.1 port={self.port} user=zklocks dbname=postgres"
        self._dir = Path(tempfile.mkdtemp(prefix="zklocks-pg-"))
        self.data = self._dir / "data"
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:  # postgres will not run as root
            self._as = {"user": _UNPRIVILEGED, "group": "nogroup", "extra_groups": []}
            shutil.chown(self._dir, _UNPRIVILEGED, "nogroup")
        self._started = False

    def _run(self, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self._dir,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            check=False,
            **self._as,
        )
        if done.returncode != 0:
            log = self._dir / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{args[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}{tail}"
            )

    def __enter__(self) -> PostgresServer:
        try:
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                "zklocks",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self._dir} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            )
            self._run(
                "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
                "-l", str(self._dir / "server.log"), "-o", options,
            )  # fmt: skip
            self._started = True
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._started:
                self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


class RedisServer:
    """A private ``redis-server``; ``port`` on 127.0.0.1."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError(
                "redis-server is not installed: apt-get install redis-server (`make test` does)"
            )
        self.binary = binary
        self.port = free_port()
        self._dir = tempfile.mkdtemp(prefix="zklocks-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RedisServer:
        import redis

        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self._dir],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 30
        try:
            while True:  # the server's readiness, not our own synchronisation: poll it
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.02)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        finally:
            client.close()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._dir)
