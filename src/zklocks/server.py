"""Run a real ZooKeeper on this machine: for tests, benchmarks and ``zklocks server``.

Locks are only as correct as ZooKeeper's session expiry, sequence numbers and watch
delivery, so the integration tests run against the real server, not a model of it.

Finding it: ``$ZOOKEEPER_HOME`` (an unpacked Apache release) or Debian's ``zookeeper``
package (``/usr/share/java/zookeeper.jar``); Java from ``$JAVA_HOME`` or ``PATH``.
Nothing is ever downloaded: a missing piece raises an error naming the install command.

TLS (``tls=ServerTLS(...)``, ``zklocks server --tls``): the client port becomes a
``secureClientPort`` with no plaintext port beside it, served by ZooKeeper's Netty
connection factory (the only one that speaks TLS). Debian's ``zookeeper.jar`` names most
of Netty in its manifest but not ``netty-codec`` and ``netty-resolver``, which the TLS
handler needs, so they are put on the classpath from the same directory. Keys and
certificates are PEM files (``ssl.keyStore.type=PEM``: a PKCS#8 key, then the chain).
Readiness probes (``ruok``, ``srvr``, ``conf``) then go over TLS too.

Readiness: ``ruok`` answers ``imok`` before the server serves, so a server is ready only
once ``srvr`` reports its mode and ``conf`` shows *our* data dir (a stranger on the port
does not count). We poll every few milliseconds up to a deadline; we never sleep blindly.

No stray JVMs: each JVM runs in its own process group, so a terminal's Ctrl-C reaches
only Python, which decides how the JVM stops. It is stopped by ``stop()``; failing that,
SIGKILLed by a ``weakref.finalize`` hook when the object is garbage-collected or the
interpreter exits (the finalizers are the registry of live servers); and failing that
(Python itself SIGKILLed), by a tiny watchdog process that kills the group once the pipe
from us closes. Every JVM and watchdog carries ``-Dzklocks.tag=$ZKLOCKS_SERVER_TAG`` on
its command line so a test runner can find any that slipped through.

    ServerError (RuntimeError)
     +-- ServerSetupError: ZooKeeper or Java is not installed
     |    +-- ZooKeeperNotFound, JavaNotFound
     +-- ServerStartError: the JVM exited or never served (the message has its log tail)
          +-- ServerStartTimeout (also a TimeoutError)
          +-- PortInUse: the client port asked for is taken
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zklocks._certs import TLSFiles

__all__ = [
    "SYSTEM_JAR_DIRS",
    "EnsembleMember",
    "JavaNotFound",
    "PortInUse",
    "ServerError",
    "ServerKerberos",
    "ServerSetupError",
    "ServerStartError",
    "ServerStartTimeout",
    "ServerTLS",
    "ZooKeeperEnsemble",
    "ZooKeeperNotFound",
    "ZooKeeperServer",
    "find_java",
    "find_zookeeper_classpath",
    "make_tls_files",
]

#: Where a distribution's package puts ``zookeeper.jar`` (Debian/Ubuntu); read at call
#: time, so tests can hide it.
SYSTEM_JAR_DIRS: tuple[Path, ...] = (Path("/usr/share/java"),)
_SLF4J_BINDINGS = ("slf4j-simple.jar", "slf4j-jdk14.jar")  # without one the server logs nothing
# Netty parts the TLS handler needs that Debian's zookeeper.jar manifest leaves out.
_TLS_JARS = ("netty-codec.jar", "netty-resolver.jar", "netty-transport-native-unix-common.jar")
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_SERVER_JAR = re.compile(r"zookeeper(-\d[\w.]*)?\.jar")
_TAG_ENV = "ZKLOCKS_SERVER_TAG"
_POLL_INTERVAL = 0.025
_STOP_GRACE = 5.0

_INSTALL_ZOOKEEPER = (
    "Install it with `sudo apt-get install zookeeper` (Debian/Ubuntu; it brings Java too), "
    "or set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper release."
)
_INSTALL_JAVA = (
    "Install it with `sudo apt-get install zookeeper` (Debian/Ubuntu; it pulls in a JRE) "
    "or `sudo apt-get install default-jre-headless`, or set JAVA_HOME to a JDK or JRE."
)

# Runs beside each JVM; our end of its stdin closes however we die, even by SIGKILL.
# Arguments: the JVM's process group, the tag, then a temporary data dir to remove.
_WATCHDOG = """\
import os, shutil, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.stdin.buffer.read()
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except ProcessLookupError:
    pass
for path in sys.argv[3:]:
    shutil.rmtree(path, ignore_errors=True)
"""


class ServerError(RuntimeError):
    """A local ZooKeeper could not be set up or started."""


class ServerSetupError(ServerError):
    """ZooKeeper or Java is missing; the message says how to install it."""


class ZooKeeperNotFound(ServerSetupError):
    """Neither ``$ZOOKEEPER_HOME`` nor the distribution's package has ZooKeeper."""


class JavaNotFound(ServerSetupError):
    """Neither ``$JAVA_HOME`` nor ``PATH`` has a ``java``."""


class ServerStartError(ServerError):
    """The JVM exited before serving, or did not serve in time."""


class PortInUse(ServerStartError):
    """The client port asked for is taken (another server, or anything else)."""


class ServerStartTimeout(ServerStartError, TimeoutError):
    """The server was still not serving when ``startup_timeout`` ran out."""


def find_zookeeper_classpath(*, tls: bool = False) -> list[Path]:
    """The classpath for the server: ``$ZOOKEEPER_HOME`` wins when set, even if broken,
    because silently running some other ZooKeeper than the one asked for misleads.
    ``tls`` adds the Netty jars Debian's manifest lacks (a release's lib/ has them)."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        root = Path(home)
        jars = sorted(root.glob("zookeeper*.jar")) + sorted((root / "lib").glob("*.jar"))
        if not any(_SERVER_JAR.fullmatch(jar.name) for jar in jars):
            raise ZooKeeperNotFound(
                f"ZooKeeper not found: ZOOKEEPER_HOME={home} has no zookeeper-<version>.jar "
                f"in it or in its lib/. {_INSTALL_ZOOKEEPER}"
            )
        conf = root / "conf"  # holds the release's logging config
        return ([conf] if conf.is_dir() else []) + jars
    for directory in SYSTEM_JAR_DIRS:
        jar = directory / "zookeeper.jar"
        if jar.is_file():
            # Debian's jar names its dependencies in its manifest; only a logger is missing.
            bindings = [directory / name for name in _SLF4J_BINDINGS]
            extra = [directory / name for name in _TLS_JARS] if tls else []
            missing = [str(path) for path in extra[:2] if not path.is_file()]
            if missing:
                raise ZooKeeperNotFound(
                    f"ZooKeeper's TLS port needs {', '.join(missing)} (Netty); install it "
                    "with `sudo apt-get install libnetty-java`"
                )
            extra = [path for path in extra if path.is_file()]
            return [jar, *extra, *[binding for binding in bindings if binding.is_file()][:1]]
    looked = ", ".join(str(directory / "zookeeper.jar") for directory in SYSTEM_JAR_DIRS)
    raise ZooKeeperNotFound(
        f"ZooKeeper not found: ZOOKEEPER_HOME is not set and there is no {looked}. "
        f"{_INSTALL_ZOOKEEPER}"
    )


def find_java() -> Path:
    """The ``java`` to run; ``$JAVA_HOME`` wins when set, even if broken (see above)."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return java
        raise JavaNotFound(f"Java not found: JAVA_HOME={home} has no bin/java. {_INSTALL_JAVA}")
    found = shutil.which("java")
    if found is None:
        raise JavaNotFound(
            f"Java not found: JAVA_HOME is not set and there is no `java` on PATH. {_INSTALL_JAVA}"
        )
    return Path(found)


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections (Linux's default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports outside the kernel's ephemeral range.

    Why outside: a port picked now is bound by a JVM only later. A port from the
    ephemeral range (what ``bind(port 0)`` gives) can meanwhile become the local end of
    any outgoing connection on the machine (a member dialling a peer, a proxy, a
    client), and then the member cannot bind it: a client port fails the start, and a
    taken quorum port makes the member unable to lead. Ports outside that range are
    only ever taken by someone binding them on purpose. The sockets stay bound until
    all are picked, so the picks are distinct.
    """
    low, high = _ephemeral_range()
    pool = [*range(20000, min(low, 32768)), *range(max(high + 1, 61000), 65536)]
    if len(pool) < count:  # a machine whose ephemeral range covers everything
        pool = []
    rng = random.SystemRandom()
    with contextlib.ExitStack() as stack:
        picked: list[int] = []
        for port in rng.sample(pool, min(len(pool), 4 * count + 64)):
            if len(picked) == count:
                break
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            picked.append(port)
        while len(picked) < count:
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            picked.append(sock.getsockname()[1])
        return picked


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the JVM binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _four_letter(
    port: int, word: str, timeout: float, context: ssl.SSLContext | None = None
) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        sock = raw if context is None else context.wrap_socket(raw)
        with sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            with contextlib.suppress(ssl.SSLError):  # a TLS peer may hang up uncleanly
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass(frozen=True)
class ServerTLS:
    """Serve clients over TLS only. PEM files: ``keystore`` holds the server's PKCS#8
    private key then its certificate chain; ``truststore`` the CA certificates that sign
    client certificates. ``client_auth`` is ZooKeeper's ``ssl.clientAuth``: ``none``,
    ``want`` or ``need`` (mutual TLS). ``probe_chain`` (key and certificate in one PEM
    file) lets our own readiness probes in when the server needs client certificates.

    ``zklocks.server.make_tls_files(directory)`` generates a throwaway set.
    """

    keystore: Path
    truststore: Path
    client_auth: str = "none"
    probe_chain: Path | None = None

    def __post_init__(self) -> None:
        if self.client_auth not in ("none", "want", "need"):
            raise ValueError(f"client_auth must be none, want or need, not {self.client_auth!r}")

    def config(self, port: int) -> list[str]:
        """zoo.cfg lines: a TLS port and no plaintext one."""
        return [
            f"secureClientPort={port}",
            "secureClientPortAddress=127.0.0.1",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self.keystore}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={self.truststore}",
            "ssl.trustStore.type=PEM",
            f"ssl.clientAuth={self.client_auth}",
        ]

    def quorum_config(self) -> list[str]:
        """zoo.cfg lines for TLS on the links between members (``sslQuorum``): each member
        shows the keystore's certificate to the others, as server and as client, and
        trusts those the truststore's CA signed."""
        return [
            "sslQuorum=true",
            f"ssl.quorum.keyStore.location={self.keystore}",
            "ssl.quorum.keyStore.type=PEM",
            f"ssl.quorum.trustStore.location={self.truststore}",
            "ssl.quorum.trustStore.type=PEM",
        ]

    def probe_context(self) -> ssl.SSLContext:
        """For our probes of our own JVM (identified by its data dir in ``conf``), so the
        server's certificate is not checked; ours is shown when the server wants one."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if self.probe_chain is not None:
            context.load_cert_chain(self.probe_chain)
        return context


def make_tls_files(directory: str | os.PathLike[str], *, days: int = 7) -> TLSFiles:
    """A throwaway CA, server and client certificate in ``directory`` (needs the optional
    ``cryptography`` package: ``pip install 'zklocks[tls-server]'``)."""
    from zklocks._certs import make_tls_files as make

    return make(Path(directory), days=days)


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # poll() first: once reaped, the pid (and so the group id) may belong to a stranger.
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)


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


@dataclass(eq=False)
class _Leftovers:
    """What must not outlive us. A finalizer holds this, never the server object itself."""

    jvm: subprocess.Popen[bytes] | None = None
    watchdog: subprocess.Popen[bytes] | None = None
    temp_dir: Path | None = None

    def kill(self) -> None:
        if self.jvm is not None:
            _signal_group(self.jvm, signal.SIGKILL)
            self.jvm.wait()
            self.jvm = None
        if self.watchdog is not None:
            self.watchdog.kill()  # not EOF: by now the JVM's group id may be reused
            self.watchdog.wait()
            if self.watchdog.stdin is not None:
                self.watchdog.stdin.close()
            self.watchdog = None

    def release(self) -> None:
        self.kill()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


class _ZooKeeperProcess:
    """One ZooKeeper JVM: the lifecycle shared by a standalone server and an ensemble member."""

    _serving_modes: frozenset[str] = frozenset()

    def __init__(
        self,
        *,
        port: int | None,
        tick_time: int,
        min_session_timeout: int | None,
        max_session_timeout: int | None,
        force_sync: bool,
        heap: str,
        startup_timeout: float,
        tls: ServerTLS | None = None,
    ) -> None:
        self.tls = tls
        self._probe_context = None if tls is None else tls.probe_context()
        self.tick_time = tick_time
        self.min_session_timeout = min_session_timeout
        self.max_session_timeout = max_session_timeout
        self.force_sync = force_sync
        self.heap = heap
        self.startup_timeout = startup_timeout
        self._port_fixed = port is not None  # given, or clients may know it already
        self._port = port if port is not None else _free_ports(1)[0]
        self._directory: Path | None = None
        self._paused = False
        self._leftovers = _Leftovers()
        self._finalizer = weakref.finalize(self, self._leftovers.release)

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
        return _four_letter(self._port, word, timeout, self._probe_context)

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
        classpath = find_zookeeper_classpath(tls=self.tls is not None)  # before anything
        java = find_java()
        self._spawn(java, classpath, self._prepare_directory())
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self._leftovers.kill()
                raise

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll until the server serves, raising with its log tail if the JVM exits."""
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not self._serving():
            if time.monotonic() >= deadline:
                raise ServerStartTimeout(
                    f"{self!r} did not serve within {timeout} s; {self._log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

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
        _signal_group(jvm, signal.SIGSTOP)
        _wait_until_stopped(jvm.pid, time.monotonic() + 2.0)
        self._paused = True

    def resume(self) -> None:
        _signal_group(self._require_running(), signal.SIGCONT)
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
            _signal_group(jvm, signal.SIGTERM)
            _signal_group(jvm, signal.SIGCONT)  # a stopped JVM acts on nothing else

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
        if self.tls is None:
            ports = [f"clientPort={self._port}", "clientPortAddress=127.0.0.1"]
        else:
            ports = self.tls.config(self._port)
        lines = [
            f"tickTime={self.tick_time}",
            f"dataDir={directory}",
            *ports,
            "4lw.commands.whitelist=*",
            "maxClientCnxns=0",  # the default refuses a test's 61st session from one IP
            "admin.enableServer=false",  # it would take port 8080
        ]
        if self.min_session_timeout is not None:
            lines.append(f"minSessionTimeout={self.min_session_timeout}")
        if self.max_session_timeout is not None:
            lines.append(f"maxSessionTimeout={self.max_session_timeout}")
        if not self.force_sync:
            lines.append("forceSync=no")
        return lines + self._extra_config()

    def _spawn(self, java: Path, classpath: list[Path], directory: Path) -> None:
        if not _port_is_free(self._port):
            if self._port_fixed:
                raise PortInUse(f"port {self._port} on 127.0.0.1 is already in use")
            self._port = _free_ports(1)[0]  # taken since we picked it: pick again
        self._port_fixed = True
        config = directory / "zoo.cfg"
        config.write_text("\n".join(self._config(directory)) + "\n")
        tag = f"-Dzklocks.tag={os.environ.get(_TAG_ENV, 'zklocks')}"
        command = [
            str(java),
            f"-Xmx{self.heap}",
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
        self._leftovers.jvm = jvm
        self._leftovers.watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(jvm.pid), tag]
            + ([str(self._leftovers.temp_dir)] if self._leftovers.temp_dir else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _serving(self) -> bool:
        jvm = self._require_started()
        if jvm.poll() is not None:
            raise ServerStartError(
                f"{self!r}: the JVM exited with code {jvm.returncode} before serving; "
                f"{self._log_tail()}"
            )
        try:
            if self.four_letter("ruok", timeout=1.0) != "imok":
                return False
            if self.mode() not in self._serving_modes:
                return False
            # Someone else's server may answer on this port while ours failed to bind.
            ours = f"dataDir={self._directory}{os.sep}version-2"
            return ours in self.four_letter("conf", timeout=1.0).splitlines()
        except OSError:
            return False

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


_JAAS_FILE = "jaas.conf"
_SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"


def sasl_config(sasl: bool, enforce: bool) -> list[str]:
    """zoo.cfg lines for SASL logins (and for refusing sessions without one)."""
    if not sasl:
        return []
    lines = [f"authProvider.sasl={_SASL_PROVIDER}"]
    if enforce:
        lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
    return lines


@dataclass(frozen=True)
class ServerKerberos:
    """SASL GSSAPI (Kerberos) logins: the server's ``principal`` (``zookeeper/HOST@REALM``;
    clients ask for ``zookeeper@HOST``), its key in ``keytab``, and the ``krb5_conf`` that
    names the realm's KDC (the JVM's ``java.security.krb5.conf``)."""

    keytab: Path
    principal: str
    krb5_conf: Path


def write_jaas(
    path: Path, users: Mapping[str, str], kerberos: ServerKerberos | None = None
) -> None:
    """The JAAS ``Server`` section ZooKeeper's SASL server reads: one
    ``user_<name>="<password>"`` per DIGEST-MD5 user, and the Kerberos login of the server
    itself when ``kerberos`` is given; created readable by its owner only."""
    for user in users:
        if not user or not all(ch.isalnum() or ch in "_-." for ch in user):
            raise ValueError(f"a SASL user name is letters, digits, '_', '-', '.': {user!r}")

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    modules = []
    if users:
        entries = "".join(f"\n    user_{user}={quoted(word)}" for user, word in users.items())
        modules.append(f"    org.apache.zookeeper.server.auth.DigestLoginModule required{entries};")
    if kerberos is not None:
        modules.append(
            "    com.sun.security.auth.module.Krb5LoginModule required\n"
            f"    useKeyTab=true\n    keyTab={quoted(str(kerberos.keytab))}\n"
            "    storeKey=true\n    useTicketCache=false\n"
            f"    principal={quoted(kerberos.principal)};"
        )
    text = "Server {\n" + "\n".join(modules) + "\n};\n"
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


class ZooKeeperServer(_ZooKeeperProcess):
    """A standalone ZooKeeper on a loopback port.

    Sessions may last between ``min_session_timeout`` and ``max_session_timeout`` ms,
    by default 2 and 20 ticks: ``tick_time=200`` allows 400 ms sessions for lock-loss
    tests but would cut a client's 10 s session to 4 s unless ``max_session_timeout``
    is raised. ``force_sync=False`` skips the fsync per write: fine for tests, but say so
    when quoting a benchmark. Without ``data_dir`` the data lives in a temporary
    directory that ``stop()`` removes (``kill()`` and ``restart()`` keep it).
    ``system_properties`` become ``-Dkey=value`` JVM options. ``tls`` serves the
    port over TLS only (see the module docstring and ``ServerTLS``).
    ``sasl_users`` (``{user: password}``) turns on SASL DIGEST-MD5 logins (a JAAS
    ``Server`` section written beside the data, readable by its owner only), ``kerberos``
    (``ServerKerberos``) SASL GSSAPI ones; ``enforce_auth`` then refuses every session
    that has not logged in with SASL (ZooKeeper's ``enforce.auth.enabled``, schemes
    ``sasl``).
    """

    _serving_modes = frozenset({"standalone"})

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        tick_time: int = 2000,
        min_session_timeout: int | None = None,
        max_session_timeout: int | None = None,
        force_sync: bool = True,
        heap: str = "512m",
        startup_timeout: float = 30.0,
        system_properties: dict[str, str] | None = None,
        tls: ServerTLS | None = None,
        sasl_users: Mapping[str, str] | None = None,
        enforce_auth: bool = False,
        kerberos: ServerKerberos | None = None,
    ) -> None:
        if enforce_auth and not sasl_users and kerberos is None:
            raise ValueError(
                "enforce_auth needs sasl_users or kerberos: nobody could log in otherwise"
            )
        super().__init__(
            port=port,
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            force_sync=force_sync,
            heap=heap,
            startup_timeout=startup_timeout,
            tls=tls,
        )
        self._given_dir = None if data_dir is None else Path(data_dir).absolute()
        self._properties = dict(system_properties or {})
        self._sasl_users = dict(sasl_users or {})
        self.enforce_auth = enforce_auth
        self.kerberos = kerberos

    @property
    def sasl_users(self) -> list[str]:
        """The users who may log in with SASL DIGEST-MD5 (their passwords stay hidden)."""
        return sorted(self._sasl_users)

    def _extra_jvm_options(self) -> list[str]:
        # e.g. {"znode.container.checkIntervalMs": "100"}: reap empty lock paths quickly
        options = [f"-D{key}={value}" for key, value in self._properties.items()]
        if self._sasl and self._directory is not None:
            options.append(f"-Djava.security.auth.login.config={self._directory / _JAAS_FILE}")
        if self.kerberos is not None:
            options.append(f"-Djava.security.krb5.conf={self.kerberos.krb5_conf}")
        return options

    @property
    def _sasl(self) -> bool:
        return bool(self._sasl_users) or self.kerberos is not None

    def _extra_config(self) -> list[str]:
        return sasl_config(self._sasl, self.enforce_auth)

    def _discard_data(self) -> None:
        if self._given_dir is None:
            self._leftovers.release()  # removes the temporary data dir
            self._directory = None

    def _prepare_directory(self) -> Path:
        if self._directory is None:
            if self._given_dir is not None:
                self._given_dir.mkdir(parents=True, exist_ok=True)
                self._directory = self._given_dir
            else:
                self._directory = Path(tempfile.mkdtemp(prefix="zklocks-zk-"))
                self._leftovers.temp_dir = self._directory
        if self._sasl:
            write_jaas(self._directory / _JAAS_FILE, self._sasl_users, self.kerberos)
        return self._directory

    def __enter__(self) -> ZooKeeperServer:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class EnsembleMember(_ZooKeeperProcess):
    """One member of a :class:`ZooKeeperEnsemble`. Its data lives as long as the
    ensemble's, so ``stop()`` then ``start()`` rejoins with everything it had."""

    _serving_modes = frozenset({"leader", "follower"})

    def __init__(
        self,
        myid: int,
        *,
        port: int,
        server_lines: Sequence[str],
        tick_time: int,
        sync_limit: int | None,
        min_session_timeout: int | None,
        max_session_timeout: int | None,
        force_sync: bool,
        heap: str,
        startup_timeout: float,
        tls: ServerTLS | None = None,
    ) -> None:
        super().__init__(
            port=port,
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            force_sync=force_sync,
            heap=heap,
            startup_timeout=startup_timeout,
            tls=tls,
        )
        self.myid = myid
        self._server_lines = list(server_lines)
        self.sync_limit = sync_limit or max(5, math.ceil(2_000 / tick_time))

    def _prepare_directory(self) -> Path:
        if self._directory is None:
            raise RuntimeError(f"{self!r} has no data dir: start its ensemble first")
        self._directory.mkdir(parents=True, exist_ok=True)
        (self._directory / "myid").write_text(f"{self.myid}\n")
        return self._directory

    def _extra_config(self) -> list[str]:
        # Limits are in ticks; keep them near 10 s and 2 s whatever the tick, so a short
        # tick does not fail the initial sync yet a paused leader is noticed quickly.
        return [
            f"initLimit={max(10, math.ceil(10_000 / self.tick_time))}",
            f"syncLimit={self.sync_limit}",
            *self._server_lines,
            *(self.tls.quorum_config() if self.tls is not None else []),
        ]

    def _extra_jvm_options(self) -> list[str]:
        # Election retries back off up to 60 s by default; members started a second
        # apart would then wait far longer than needed for each other.
        return ["-Dzookeeper.fastleader.maxNotificationInterval=2000"]

    def __repr__(self) -> str:
        return f"EnsembleMember({self.myid}, hosts={self.hosts!r}, running={self.running})"


class ZooKeeperEnsemble:
    """A quorum of ``size`` members on loopback ports, for tests that take members down.

    ``hosts`` lists every member; ``members[i]`` can be stopped, killed, paused and
    restarted on its own. Options mean what they mean for :class:`ZooKeeperServer`;
    ``client_ports`` pins the members' client ports (peer ports are always picked free).
    ``sync_limit`` (ticks) is how long a member may go without hearing from the leader
    (default: about 2 s). ``peer_route(from_myid, to_myid, port)`` returns the port that
    member ``from_myid`` dials to reach ``port`` (quorum or election) of ``to_myid`` on
    127.0.0.1: a test puts a proxy there to cut or stall the links between members.
    ``tls`` serves every member's client port over TLS only and puts the links between
    members on TLS too (``sslQuorum``), with the same keystore and truststore.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        client_ports: Sequence[int] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        tick_time: int = 2000,
        sync_limit: int | None = None,
        min_session_timeout: int | None = None,
        max_session_timeout: int | None = None,
        force_sync: bool = True,
        heap: str = "512m",
        startup_timeout: float = 60.0,
        peer_route: Callable[[int, int, int], int] | None = None,
        tls: ServerTLS | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"an ensemble needs at least one member, not {size}")
        if client_ports is not None and len(client_ports) != size:
            raise ValueError(f"{len(client_ports)} client ports for {size} members")
        self.startup_timeout = startup_timeout
        self._given_dir = None if data_dir is None else Path(data_dir).absolute()
        self._root: Path | None = None
        self._leftovers = _Leftovers()  # only the temp dir; members own their JVMs
        self._finalizer = weakref.finalize(self, self._leftovers.release)
        ports = _free_ports(2 * size if client_ports else 3 * size)
        clients = list(client_ports) if client_ports else ports[2 * size :]

        def server_lines(me: int) -> list[str]:
            lines = []
            for myid in range(1, size + 1):
                quorum, election = ports[2 * myid - 2], ports[2 * myid - 1]
                if peer_route is not None and myid != me:
                    quorum, election = (peer_route(me, myid, p) for p in (quorum, election))
                lines.append(f"server.{myid}=127.0.0.1:{quorum}:{election}")
            return lines

        self.members = [
            EnsembleMember(
                myid,
                port=clients[myid - 1],
                server_lines=server_lines(myid),
                tick_time=tick_time,
                sync_limit=sync_limit,
                min_session_timeout=min_session_timeout,
                max_session_timeout=max_session_timeout,
                force_sync=force_sync,
                heap=heap,
                startup_timeout=startup_timeout,
                tls=tls,
            )
            for myid in range(1, size + 1)
        ]

    @property
    def hosts(self) -> str:
        return ",".join(member.hosts for member in self.members)

    @property
    def running(self) -> bool:
        """Some member's JVM is alive."""
        return any(member.running for member in self.members)

    @property
    def data_dir(self) -> Path | None:
        return self._root

    def start(self) -> None:
        """Start every member not running, then wait for all to serve under one leader."""
        if self._root is None:
            if self._given_dir is not None:
                self._root = self._given_dir
            else:
                self._root = Path(tempfile.mkdtemp(prefix="zklocks-ensemble-"))
                self._leftovers.temp_dir = self._root
            for member in self.members:
                member._directory = self._root / f"member-{member.myid}"
        try:
            for member in self.members:
                if not member.running:
                    member.start(wait=False)  # none can serve before a quorum is up
            self.wait_ready()
        except BaseException:
            for member in self.members:
                member.kill()
            raise

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll until every running member serves and one of them leads."""
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        for member in self.members:
            if member.running:
                member.wait_ready(max(0.0, deadline - time.monotonic()))
        self.wait_for_leader(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Stop every member cleanly; remove the data unless ``data_dir`` was given."""
        for member in self.members:
            member._ask_to_exit()  # all at once: shutting down takes each a while
        for member in self.members:
            member.stop()
        if self._given_dir is None:
            self._leftovers.release()
            self._root = None
            for member in self.members:
                member._directory = None

    def leader(self) -> EnsembleMember:
        """The member whose ``srvr`` says leader right now (LookupError if none does)."""
        for member in self.members:
            if member.running and not member.paused and member.mode(timeout=0.5) == "leader":
                return member
        raise LookupError("no member of the ensemble is leading")

    def wait_for_leader(self, timeout: float = 30.0) -> EnsembleMember:
        """Poll until some member leads, e.g. after the old leader was killed."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.leader()
            except LookupError:
                if time.monotonic() >= deadline:
                    raise ServerStartTimeout(f"no leader elected within {timeout} s") from None
            time.sleep(_POLL_INTERVAL)

    def __enter__(self) -> ZooKeeperEnsemble:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble(hosts={self.hosts!r}, running={self.running})"
