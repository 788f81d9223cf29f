"""Run a real ZooKeeper on this machine: for tests, benchmarks and ``zklocks server``.

Locks are only as correct as ZooKeeper's session expiry, sequence numbers and watch
delivery, so the integration tests run against the real server, not a model of it.

Finding it: ``$ZOOKEEPER_HOME`` (an unpacked Apache release) or Debian's ``zookeeper``
package (``/usr/share/java/zookeeper.jar``); Java from ``$JAVA_HOME`` or ``PATH``.
Nothing is ever downloaded: a missing piece raises an error naming the install command.

Options: the keyword arguments of ``ZooKeeperServer`` and ``ZooKeeperEnsemble`` that
shape zoo.cfg and the JVM become one checked ``ServerOptions`` (``server.options``),
which an ensemble hands whole to each member.

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

The parts live in ``zklocks._server`` (options, tls, sasl, loopback, process,
leftovers); this module is the public face and keeps every name it ever exported.

    ServerError (RuntimeError)
     +-- ServerSetupError: ZooKeeper or Java is not installed
     |    +-- ZooKeeperNotFound, JavaNotFound
     +-- ServerStartError: the JVM exited or never served (the message has its log tail)
          +-- ServerStartTimeout (also a TimeoutError)
          +-- PortInUse: the client port asked for is taken
"""

from __future__ import annotations

import os
import re
import shutil
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from zklocks._server.errors import (
    JavaNotFound,
    PortInUse,
    ServerError,
    ServerSetupError,
    ServerStartError,
    ServerStartTimeout,
    ZooKeeperNotFound,
)
from zklocks._server.leftovers import Leftovers
from zklocks._server.loopback import ephemeral_range, free_ports, port_is_free
from zklocks._server.options import OptionAttribute, ServerOptions
from zklocks._server.process import POLL_INTERVAL, StartStopContext, ZooKeeperProcess
from zklocks._server.sasl import JAAS_FILE, ServerKerberos, sasl_config, write_jaas
from zklocks._server.tls import ServerTLS

if TYPE_CHECKING:
    from zklocks._certs import TLSFiles

# Under the names they had here, for the tests and tools that pick ports as we do.
_ephemeral_range = ephemeral_range
_free_ports = free_ports
_port_is_free = port_is_free

__all__ = [
    "SYSTEM_JAR_DIRS",
    "EnsembleMember",
    "JavaNotFound",
    "PortInUse",
    "ServerError",
    "ServerKerberos",
    "ServerOptions",
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
_SERVER_JAR = re.compile(r"zookeeper(-\d[\w.]*)?\.jar")

_INSTALL_ZOOKEEPER = (
    "Install it with `sudo apt-get install zookeeper` (Debian/Ubuntu; it brings Java too), "
    "or set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper release."
)
_INSTALL_JAVA = (
    "Install it with `sudo apt-get install zookeeper` (Debian/Ubuntu; it pulls in a JRE) "
    "or `sudo apt-get install default-jre-headless`, or set JAVA_HOME to a JDK or JRE."
)


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


def _find_runtime(tls: bool) -> tuple[Path, list[Path]]:
    """The ``java`` and the classpath a JVM of ours runs, looked up at each start (the
    classpath first: a missing ZooKeeper is the likelier news)."""
    classpath = find_zookeeper_classpath(tls=tls)
    return find_java(), classpath


def make_tls_files(directory: str | os.PathLike[str], *, days: int = 7) -> TLSFiles:
    """A throwaway CA, server and client certificate in ``directory`` (needs the optional
    ``cryptography`` package: ``pip install 'zklocks[tls-server]'``)."""
    from zklocks._certs import make_tls_files as make

    return make(Path(directory), days=days)


class ZooKeeperServer(ZooKeeperProcess, StartStopContext):
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
    ``sasl``). ``four_letter_words="srvr"`` starts it as ZooKeeper ships (``conf``
    refused; the AdminServer is always off). The zoo.cfg and JVM settings are checked
    into one ``ServerOptions`` (``options``): a bad value raises ``ValueError`` naming
    it, before any JVM runs.
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
        four_letter_words: str = "*",
    ) -> None:
        if enforce_auth and not sasl_users and kerberos is None:
            raise ValueError(
                "enforce_auth needs sasl_users or kerberos: nobody could log in otherwise"
            )
        options = ServerOptions(
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            force_sync=force_sync,
            heap=heap,
            startup_timeout=startup_timeout,
            tls=tls,
            four_letter_words=four_letter_words,
        )
        super().__init__(options, port=port, find_runtime=_find_runtime)
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
            options.append(f"-Djava.security.auth.login.config={self._directory / JAAS_FILE}")
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
            self._directory = self._leftovers.data_dir(self._given_dir, prefix="zklocks-zk-")
            self._directory.mkdir(parents=True, exist_ok=True)  # a given one may not exist
        if self._sasl:
            write_jaas(self._directory / JAAS_FILE, self._sasl_users, self.kerberos)
        return self._directory

    def _start_unless_running(self) -> None:
        if not self.running:
            self.start()


class EnsembleMember(ZooKeeperProcess):
    """One member of a :class:`ZooKeeperEnsemble`, which makes it with the ensemble's
    ``options``. Its data lives as long as the ensemble's, so ``stop()`` then ``start()``
    rejoins with everything it had."""

    _serving_modes = frozenset({"leader", "follower"})

    def __init__(
        self,
        myid: int,
        *,
        port: int,
        server_lines: Sequence[str],
        options: ServerOptions,
    ) -> None:
        super().__init__(options, port=port, find_runtime=_find_runtime)
        self.myid = myid
        self._server_lines = list(server_lines)

    @property
    def sync_limit(self) -> int:
        """The ``syncLimit`` in ticks this member runs with (the default resolved)."""
        return self.options.sync_ticks

    def _prepare_directory(self) -> Path:
        if self._directory is None:
            raise RuntimeError(f"{self!r} has no data dir: start its ensemble first")
        self._directory.mkdir(parents=True, exist_ok=True)
        (self._directory / "myid").write_text(f"{self.myid}\n")
        return self._directory

    def _extra_config(self) -> list[str]:
        return self.options.quorum_config(self._server_lines)

    def _extra_jvm_options(self) -> list[str]:
        # Election retries back off up to 60 s by default; members started a second
        # apart would then wait far longer than needed for each other.
        return ["-Dzookeeper.fastleader.maxNotificationInterval=2000"]

    def __repr__(self) -> str:
        return f"EnsembleMember({self.myid}, hosts={self.hosts!r}, running={self.running})"


class ZooKeeperEnsemble(StartStopContext):
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
    ``four_letter_words="srvr"`` starts every member as ZooKeeper ships (the "stock"
    profile: ``srvr`` alone, no AdminServer, default session bounds). The options become
    one ``ServerOptions`` (``options``), handed whole to every member.
    """

    startup_timeout: OptionAttribute[float] = OptionAttribute()

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
        four_letter_words: str = "*",
    ) -> None:
        if size < 1:
            raise ValueError(f"an ensemble needs at least one member, not {size}")
        if client_ports is not None and len(client_ports) != size:
            raise ValueError(f"{len(client_ports)} client ports for {size} members")
        self.options = ServerOptions(
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            sync_limit=sync_limit,
            force_sync=force_sync,
            heap=heap,
            startup_timeout=startup_timeout,
            tls=tls,
            four_letter_words=four_letter_words,
        )
        self._given_dir = None if data_dir is None else Path(data_dir).absolute()
        self._root: Path | None = None
        self._leftovers = Leftovers()  # only the temp dir; members own their JVMs
        self._finalizer = weakref.finalize(self, self._leftovers.release)
        ports = free_ports(2 * size if client_ports else 3 * size)
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
                options=self.options,
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
            self._root = self._leftovers.data_dir(self._given_dir, prefix="zklocks-ensemble-")
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
            time.sleep(POLL_INTERVAL)

    def _start_unless_running(self) -> None:
        self.start()  # which starts only the members not running

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble(hosts={self.hosts!r}, running={self.running})"
