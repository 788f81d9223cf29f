"""Find Curator's jars, compile ``CuratorWorker.java`` once, and drive workers from Python.

Curator comes from Debian's ``libcurator-recipes-java`` (``scripts/ensure-curator.sh``
installs it and a JDK). Its jars name their dependencies in their manifests'
``Class-Path`` (framework, client, Guava, SLF4J, ZooKeeper's client jar); :func:`classpath`
follows those entries so the classpath is explicit, keeps the ones that exist, and adds
``slf4j-simple`` as the one SLF4J binding (warnings only, to the worker's stderr): with no
binding, SLF4J 1.7 prints a three-line warning on every start.

The worker is compiled into a cache directory outside the source tree, named by a hash
of the source, the classpath and the compiler, so it is compiled once and again only
when one of those changes. Each :class:`CuratorWorker` is one JVM; each ``connect`` is one
CuratorFramework, i.e. one ZooKeeper session.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import selectors
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path
from types import TracebackType

SOURCE = Path(__file__).resolve().parent / "CuratorWorker.java"
ENSURE_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-curator.sh"
MAIN_JAR = "curator-recipes.jar"
LOG_BINDING = "slf4j-simple.jar"
JAVA_OPTIONS = (
    "-Xms32m",
    "-Xmx256m",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
)
_TICK = os.sysconf("SC_CLK_TCK")


class CuratorUnavailable(RuntimeError):
    """Curator's jars or a JDK are missing, or the worker does not compile."""


class CuratorError(RuntimeError):
    """The worker answered ``err``, died, or did not answer in time."""


def jar_dir() -> Path:
    """Where Curator's jars are: ``CURATOR_JARS`` or Debian's ``/usr/share/java``."""
    return Path(os.environ.get("CURATOR_JARS", "/usr/share/java"))


def ensure_installed(timeout: float = 900.0) -> None:
    """Run ``scripts/ensure-curator.sh`` (apt-get only when something is missing)."""
    try:
        subprocess.run(
            [str(ENSURE_SCRIPT)], check=True, timeout=timeout, capture_output=True, text=True
        )
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or exc.stdout or "").strip().splitlines()[-3:]
        raise CuratorUnavailable(
            f"{ENSURE_SCRIPT.name} failed ({exc.returncode}): {' / '.join(tail)}"
        ) from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CuratorUnavailable(f"{ENSURE_SCRIPT.name} did not run: {exc}") from None


def _manifest_classpath(jar: Path) -> list[Path]:
    try:
        with zipfile.ZipFile(jar) as archive:
            text = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    unfolded = text.replace("\r\n", "\n").replace("\n ", "")  # continuation lines
    for line in unfolded.splitlines():
        if line.lower().startswith("class-path:"):
            entries = line.split(":", 1)[1].split()
            return [jar.parent / entry.removeprefix("file:") for entry in entries]
    return []


def classpath() -> list[str]:
    """Curator's jar, what its manifests name (transitively, existing ones), one binding."""
    main = jar_dir() / MAIN_JAR
    if not main.is_file():
        raise CuratorUnavailable(
            f"{main} not found: run scripts/ensure-curator.sh (Debian's "
            "libcurator-recipes-java) or set CURATOR_JARS"
        )
    seen: dict[Path, None] = {}
    todo = [main]
    while todo:
        jar = todo.pop(0).resolve()
        if jar in seen or not jar.is_file():
            continue
        seen[jar] = None
        todo.extend(_manifest_classpath(jar))
    binding = jar_dir() / LOG_BINDING
    if binding.is_file():
        seen[binding.resolve()] = None
    return [str(jar) for jar in seen]


def _jdk_tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise CuratorUnavailable(f"{name} not found: install a JDK (scripts/ensure-curator.sh)")
    return found


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zklocks" / "curator-worker"


def compiled() -> Path:
    """The directory holding ``CuratorWorker.class``, compiling it first if needed."""
    javac = _jdk_tool("javac")
    cp = classpath()
    key = hashlib.sha256(
        SOURCE.read_bytes() + "\0".join([*cp, os.path.realpath(javac)]).encode()
    ).hexdigest()[:16]
    target = cache_root() / key
    if (target / "CuratorWorker.class").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        run = subprocess.run(
            [javac, "-nowarn", "-d", str(scratch), "-cp", os.pathsep.join(cp), str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode != 0:
            raise CuratorUnavailable(f"javac failed:\n{run.stderr.strip()[-2000:]}")
        with contextlib.suppress(OSError):  # another process may have won the race
            scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not (target / "CuratorWorker.class").is_file():
        raise CuratorUnavailable(f"the compiled worker did not appear in {target}")
    return target


def _word(value: object) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise ValueError(f"a worker command word must be non-empty, without spaces: {text!r}")
    return text


class CuratorWorker:
    """One JVM running ``CuratorWorker``; each method is one command and its reply.

    Replies are read with a deadline (``timeout`` seconds, default :attr:`timeout`): a
    worker that does not answer in time is killed and :class:`CuratorError` raised, so a
    test or a benchmark never hangs on it. Not thread-safe: one caller at a time.
    """

    timeout = 300.0

    def __init__(self, *, java_options: tuple[str, ...] = JAVA_OPTIONS) -> None:
        classes = compiled()
        # The JVM's stderr (SLF4J warnings), kept for error messages; lives with the worker.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                _jdk_tool("java"),
                *java_options,
                "-cp",
                os.pathsep.join([str(classes), *classpath()]),
                "CuratorWorker",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._buffer = b""
        self._offset: float | None = None

    # -- the line protocol -----------------------------------------------------------------

    def call(self, *words: object, timeout: float | None = None) -> list[str]:
        """Send one command; the reply's words after ``ok``."""
        stdin = self.process.stdin
        if stdin is None or self.process.poll() is not None:
            raise CuratorError(f"the worker has exited{self._log_tail()}")
        line = " ".join(_word(w) for w in words)
        try:
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except OSError as exc:
            raise CuratorError(f"the worker is gone ({exc}){self._log_tail()}") from None
        reply = self._read_line(self.timeout if timeout is None else timeout, line)
        status, _, rest = reply.partition(" ")
        if status == "ok":
            return rest.split()
        raise CuratorError(f"{words[0]}: {rest}" if status == "err" else f"bad reply {reply!r}")

    def _read_line(self, timeout: float, command: str) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    self.kill()
                    raise CuratorError(f"no answer to {command!r} within {timeout} s")
                chunk = os.read(stdout.fileno(), 1 << 16)
                if not chunk:
                    raise CuratorError(f"the worker exited during {command!r}{self._log_tail()}")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
            if lines:
                return "; stderr: " + " / ".join(lines[-5:])
        return ""

    # -- commands --------------------------------------------------------------------------

    def info(self) -> dict[str, str]:
        """Versions: ``curator``, ``zookeeper`` (the client jar), ``java``."""
        return dict(word.split("=", 1) for word in self.call("info"))

    def connect(self, hosts: str, session_timeout: float = 30.0) -> None:
        self.call("connect", hosts, int(session_timeout * 1000), timeout=60)

    def disconnect(self) -> None:
        self.call("disconnect", timeout=60)

    def mutex(self, name: str, path: str) -> None:
        self.call("mutex", name, path)

    def read_write_lock(self, name: str, path: str) -> None:
        """Two locks: ``<name>.read`` and ``<name>.write``."""
        self.call("rwlock", name, path)

    def semaphore(self, name: str, path: str, permits: int) -> None:
        self.call("semaphore", name, path, permits)

    def acquire(self, name: str, timeout: float | None = None) -> bool:
        """True once held; False if ``timeout`` seconds passed first."""
        if timeout is None:
            return self.call("acquire", name) == ["1"]
        return self.call("acquire", name, int(timeout * 1000), timeout=timeout + 60) == ["1"]

    def release(self, name: str) -> None:
        self.call("release", name)

    def begin(self, name: str) -> None:
        """Acquire ``name`` on a thread of the worker's own and keep holding it: the
        worker answers other commands meanwhile. See :meth:`held` and :meth:`end`."""
        self.call("begin", name)

    def held(self, name: str, timeout: float = 0.0) -> bool:
        """Does the thread that :meth:`begin` started hold ``name`` (within ``timeout``)?"""
        reply = self.call("held", name, int(timeout * 1000), timeout=timeout + 60)
        return reply == ["1"]

    def end(self, name: str) -> None:
        """Release what :meth:`begin` holds (or stop waiting for it), and wait for that."""
        self.call("end", name, timeout=120)

    def latch(self, name: str, path: str, identifier: str) -> None:
        """Start a ``LeaderLatch`` candidate at ``path`` called ``identifier``."""
        self.call("latch", name, path, identifier)

    def leads(self, name: str, timeout: float = 0.0) -> bool:
        """Does latch ``name`` lead (``LeaderLatch.await``, within ``timeout``)?"""
        return self.call("leads", name, int(timeout * 1000), timeout=timeout + 60) == ["1"]

    def leader(self, name: str) -> str:
        """The id ``getLeader()`` of latch ``name`` reads: the head of its line."""
        return " ".join(self.call("leader", name))

    def unlatch(self, name: str) -> None:
        """Close latch ``name``: it steps down, and its node goes."""
        self.call("unlatch", name)

    def selector(self, name: str, path: str, identifier: str) -> None:
        """Start a ``LeaderSelector`` candidate at ``path`` (``setId(identifier)``); once it
        leads it keeps leading until :meth:`unselect`."""
        self.call("selector", name, path, identifier)

    def selects(self, name: str, timeout: float = 0.0) -> bool:
        """Does selector ``name`` lead (within ``timeout``)?"""
        return self.call("selects", name, int(timeout * 1000), timeout=timeout + 60) == ["1"]

    def selected(self, name: str) -> str:
        """The id ``getLeader()`` of selector ``name`` reads: the mutex's first node."""
        return " ".join(self.call("selected", name))

    def unselect(self, name: str) -> None:
        """Selector ``name`` steps down (``takeLeadership`` returns) and closes."""
        self.call("unselect", name)

    def count(self, name: str, path: str, n: int) -> None:
        """``n`` times under ``name``: read the integer stored at ``path``, pause 2 ms,
        write it + 1. Not atomic: the lock alone keeps the count exact."""
        self.call("count", name, path, n)

    def cycles(self, name: str, n: int) -> list[float]:
        """``n`` acquire+release cycles timed inside the JVM, seconds each."""
        return [int(ns) / 1e9 for ns in self.call("cycles", name, n)]

    def contend(self, name: str, start: float, end: float) -> list[tuple[float, float]]:
        """Cycle from ``start`` to ``end`` (``time.monotonic()`` instants); the instants
        each acquisition returned and its release began, on the same clock."""
        offset = self.clock_offset()
        words = self.call(
            "contend",
            name,
            int((start + offset) * 1e9),
            int((end + offset) * 1e9),
            timeout=max(0.0, end - time.monotonic()) + self.timeout,
        )
        pairs = (word.split(":") for word in words)
        return [(int(a) / 1e9 - offset, int(r) / 1e9 - offset) for a, r in pairs]

    def clock_offset(self) -> float:
        """JVM ``nanoTime`` seconds minus ``time.monotonic()`` (both CLOCK_MONOTONIC on
        Linux, so about 0; measured anyway, from the quickest of a few exchanges)."""
        if self._offset is None:
            best = (float("inf"), 0.0)
            for _ in range(5):
                t0 = time.monotonic()
                (ns,) = self.call("clock")
                t1 = time.monotonic()
                best = min(best, (t1 - t0, int(ns) / 1e9 - (t0 + t1) / 2))
            self._offset = best[1]
        return self._offset

    def cpu_seconds(self) -> float:
        """CPU time (user + system, every thread: JIT and GC included) the JVM has used."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Ask the worker to quit (closing its session); kill it if it does not."""
        if self.process.poll() is None:
            with contextlib.suppress(CuratorError, OSError, ValueError):
                self.call("quit", timeout=30)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipes()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.process.stdin, self.process.stdout, self._stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> CuratorWorker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
