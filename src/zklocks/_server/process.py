"""One ZooKeeper JVM: the lifecycle a standalone server and an ensemble member share.

Readiness: ``ruok`` answers ``imok`` before the server serves, so a server is ready only
once ``srvr`` reports a mode we expect and the port is *ours* (a stranger on the port
does not count): ``conf`` shows our data dir, or, where only ``srvr`` is allowed (as
ZooKeeper ships), our JVM's log says it bound that port. We poll every few
milliseconds up to a deadline.

Each JVM runs in its own process group, so a terminal's Ctrl-C reaches only Python,
which decides how the JVM stops (see ``leftovers`` for what kills it otherwise).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from zklocks._server.errors import PortInUse, ServerStartError, ServerStartTimeout
from zklocks._server.leftovers import Leftovers, signal_group, tag_option
from zklocks._server.loopback import four_letter, free_ports, port_is_free
from zklocks._server.options import OptionAttribute, ServerOptions
from zklocks._server.tls import ServerTLS

__all__ = ["POLL_INTERVAL", "FindRuntime", "StartStopContext", "ZooKeeperProcess"]

#: Given whether TLS is on: the ``java`` to run and the server's classpath. Passed in by
#: ``zklocks.server``, which owns where ZooKeeper and Java are looked for.
FindRuntime = Callable[[bool], tuple[Path, list[Path]]]

POLL_INTERVAL = 0.025
_STOP_GRACE = 5.0
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


_Served = TypeVar("_Served", bound="StartStopContext")


class StartStopContext(contextlib.AbstractContextManager["StartStopContext"]):
    """``with server:`` for a standalone server and an ensemble alike: the block runs with
    it serving, and it is stopped on the way out, however the block ends."""

    def _start_unless_running(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Served) -> _Served:
        self._start_unless_running()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _wait_until_stopped(pid: int, deadline: float) -> None:
    """SIGSTOP lands asynchronously; wait for the kernel to show the process stopped."""
    stat = Path(f"/proc/{pid}/stat")
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return  # no procfs here: trust the signal
        if state in ("T", "t"):
            return
        time.sleep(0.005)


class ZooKeeperProcess:
    """One ZooKeeper JVM, configured by ``options``; subclasses say where its data lives
    and what they add to zoo.cfg and the JVM's options."""

    _serving_modes: frozenset[str] = frozenset()

    def __init__(
        self, options: ServerOptions, *, port: int | None, find_runtime: FindRuntime
    ) -> None:
        self.options = options
        self._find_runtime = find_runtime
        self._probe_context = None if options.tls is None else options.tls.probe_context()
        self._port_fixed = port is not None  # given, or clients may know it already
        self._port = port if port is not None else free_ports(1)[0]
        self._directory: Path | None = None
        self._paused = False
        self._leftovers = Leftovers()
        self._finalizer = weakref.finalize(self, self._leftovers.release)

    # The options, under the names they had as attributes.
    tls: OptionAttribute[ServerTLS | None] = OptionAttribute()
    tick_time: OptionAttribute[int] = OptionAttribute()
    min_session_timeout: OptionAttribute[int | None] = OptionAttribute()
    max_session_timeout: OptionAttribute[int | None] = OptionAttribute()
    force_sync: OptionAttribute[bool] = OptionAttribute()
    heap: OptionAttribute[str] = OptionAttribute()
    startup_timeout: OptionAttribute[float] = OptionAttribute()

    @property
    def port(self) -> int:
        """Fixed from the first start on; a port picked for us may change until then, should
        another process take it meanwhile."""
        return self._port

    @property
    def hosts(self) -> str:
        """The connect string for clients."""
        return f"127.0.0.1:{self._port}"

    @property
    def pid(self) -> int | None:
        return self._leftovers.jvm.pid if self.running and self._leftovers.jvm else None

    @property
    def running(self) -> bool:
        """The JVM is alive (paused counts: it still holds its sessions)."""
        jvm = self._leftovers.jvm
        return jvm is not None and jvm.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused and self.running

    @property
    def data_dir(self) -> Path | None:
        return self._directory

    @property
    def log_path(self) -> Path | None:
        return None if self._directory is None else self._directory / "zookeeper.log"

    def four_letter(self, word: str, *, timeout: float = 2.0) -> str:
        """Ask a four-letter word (``ruok``, ``srvr``, ``mntr``, ``cons``, ``wchs``...).

        Raises ``OSError`` (``TimeoutError`` when paused) if the server does not answer."""
        return four_letter(self._port, word, timeout, self._probe_context)

    def mntr(self) -> dict[str, str | int]:
        """``mntr`` parsed; integer values become ints (e.g. ``zk_packets_received``)."""
        stats: dict[str, str | int] = {}
        for line in self.four_letter("mntr").splitlines():
            key, tab, value = line.partition("\t")
            if tab:
                stats[key] = int(value) if value.lstrip("-").isdigit() else value
        return stats

    def mode(self, *, timeout: float = 1.0) -> str | None:
        """``standalone``, ``leader`` or ``follower``; None while not serving or not answering."""
        try:
            answer = self.four_letter("srvr", timeout=timeout)
        except OSError:
            return None
        match = re.search(r"^Mode: (\w+)", answer, re.MULTILINE)
        return match.group(1) if match else None

    def start(self, *, wait: bool = True) -> None:
        """Start the JVM; with ``wait``, return only once it serves clients."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        java, classpath = self._find_runtime(self.options.tls is not None)  # before anything
        self._spawn(java, classpath, self._prepare_directory())
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self._leftovers.kill()
                raise

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll until the server serves, raising with its log tail if the JVM exits."""
        timeout = self.options.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not self._serving():
            if time.monotonic() >= deadline:
                raise ServerStartTimeout(
                    f"{self!r} did not serve within {timeout} s; {self._log_tail()}"
                )
            time.sleep(POLL_INTERVAL)

    def stop(self, *, timeout: float = _STOP_GRACE) -> None:
        """Shut down cleanly: SIGTERM (and SIGCONT, should it be paused), SIGKILL after
        ``timeout`` seconds."""
        self._shut_down(timeout)
        self._discard_data()

    def restart(self) -> None:
        """Stop cleanly and start again on the same port with the same data, so clients
        can resume their sessions."""
        self._shut_down(_STOP_GRACE)
        self.start()

    def kill(self) -> None:
        """SIGKILL, as a crash would; the data stays, so ``restart()`` recovers it."""
        self._leftovers.kill()
        self._paused = False

    def pause(self) -> None:
        """SIGSTOP: the process stays but answers nothing, like a long GC pause."""
        jvm = self._require_running()
        signal_group(jvm, signal.SIGSTOP)
        _wait_until_stopped(jvm.pid, time.monotonic() + 2.0)
        self._paused = True

    def resume(self) -> None:
        signal_group(self._require_running(), signal.SIGCONT)
        self._paused = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(hosts={self.hosts!r}, running={self.running})"

    # -- for subclasses ----------------------------------------------------------------

    def _prepare_directory(self) -> Path:
        raise NotImplementedError

    def _discard_data(self) -> None:
        pass

    def _extra_config(self) -> list[str]:
        return []

    def _extra_jvm_options(self) -> list[str]:
        return []

    # -- internals ---------------------------------------------------------------------

    def _ask_to_exit(self) -> None:
        jvm = self._leftovers.jvm
        if jvm is not None:
            signal_group(jvm, signal.SIGTERM)
            signal_group(jvm, signal.SIGCONT)  # a stopped JVM acts on nothing else

    def _shut_down(self, timeout: float) -> None:
        self._ask_to_exit()
        jvm = self._leftovers.jvm
        if jvm is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                jvm.wait(timeout)
        self._leftovers.kill()
        self._paused = False

    def _require_running(self) -> subprocess.Popen[bytes]:
        jvm = self._leftovers.jvm
        if jvm is None or jvm.poll() is not None:
            raise RuntimeError(f"{self!r} is not running")
        return jvm

    def _config(self, directory: Path) -> list[str]:
        return self.options.config(port=self._port, data_dir=directory) + self._extra_config()

    def _spawn(self, java: Path, classpath: list[Path], directory: Path) -> None:
        if not port_is_free(self._port):
            if self._port_fixed:
                raise PortInUse(f"port {self._port} on 127.0.0.1 is already in use")
            self._port = free_ports(1)[0]  # taken since we picked it: pick again
        self._port_fixed = True
        config = directory / "zoo.cfg"
        config.write_text("\n".join(self._config(directory)) + "\n")
        tag = tag_option()
        command = [
            str(java),
            f"-Xmx{self.options.heap}",
            "-XX:+UseSerialGC",  # fewer GC threads on small, shared machines
            tag,
            *self._extra_jvm_options(),
            "-cp",
            os.pathsep.join(str(entry) for entry in classpath),
            _MAIN_CLASS,
            str(config),
        ]
        with open(directory / "zookeeper.log", "ab") as log:
            jvm = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=directory,
                start_new_session=True,
            )
        self._leftovers.watch(jvm, tag)

    def _serving(self) -> bool:
        jvm = self._require_started()
        if jvm.poll() is not None:
            raise ServerStartError(
                f"{self!r}: the JVM exited with code {jvm.returncode} before serving; "
                f"{self._log_tail()}"
            )
        options = self.options
        try:
            if options.allows("ruok") and self.four_letter("ruok", timeout=1.0) != "imok":
                return False
            if self.mode() not in self._serving_modes:
                return False
            # Someone else's server may answer on this port while ours failed to bind.
            if not options.allows("conf"):
                return self._bound_our_port()
            ours = f"dataDir={self._directory}{os.sep}version-2"
            return ours in self.four_letter("conf", timeout=1.0).splitlines()
        except OSError:
            return False

    def _bound_our_port(self) -> bool:
        """Our JVM's log says it listens on our client port (ZooKeeper logs "binding to
        port ..." as it binds; a failed bind logs an error and exits)."""
        log = self.log_path
        try:
            text = "" if log is None else log.read_text(errors="replace")
        except OSError:
            return False
        return re.search(rf"binding to port \S*:{self._port}\b", text) is not None

    def _require_started(self) -> subprocess.Popen[bytes]:
        jvm = self._leftovers.jvm
        if jvm is None:
            raise RuntimeError(f"{self!r} was not started")
        return jvm

    def _log_tail(self, lines: int = 30) -> str:
        log = self.log_path
        try:
            assert log is not None
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except (AssertionError, OSError):
            return "no log was written"
        return f"last lines of {log}:\n" + "\n".join(tail)
