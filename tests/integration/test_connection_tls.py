"""TLS: the Connection against ZooKeeper's secureClientPort with a self-signed certificate.

ZooKeeper serves TLS only through its Netty connection factory. Debian's zookeeper.jar
names most of Netty in its manifest but not netty-codec and netty-resolver, which the TLS
handler needs, so the test builds a ``$ZOOKEEPER_HOME`` of symlinks that adds them (the
server module honours that variable) and makes a throw-away certificate with openssl.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import subprocess
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from zklocks._connection import Connection, SessionState
from zklocks._protocol.errors import ConnectionFailedError
from zklocks.server import ZooKeeperServer

T = TypeVar("T")
JARS = Path("/usr/share/java")
EXTRA_JARS = ("netty-codec", "netty-resolver", "netty-transport-native-unix-common")


def run(coro: Awaitable[T], timeout: float = 90.0) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TLSServer(ZooKeeperServer):
    """A standalone server that also serves TLS on ``secure_port``."""

    def __init__(self, keystore: Path, truststore: Path) -> None:
        super().__init__(tick_time=200, max_session_timeout=60_000)
        self.secure_port = free_port()
        self._keystore = keystore
        self._truststore = truststore

    def _extra_config(self) -> list[str]:
        return [
            f"secureClientPort={self.secure_port}",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self._keystore}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={self._truststore}",
            "ssl.trustStore.type=PEM",
            "ssl.clientAuth=none",
        ]


def make_certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """(certificate, key+certificate) for 127.0.0.1, self-signed."""
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    keystore = directory / f"{name}-keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return cert, keystore


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TLSServer]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    if os.environ.get("ZOOKEEPER_HOME"):
        pytest.skip("a custom ZOOKEEPER_HOME is set; this test builds its own")
    missing = [jar for jar in ("zookeeper", *EXTRA_JARS) if not (JARS / f"{jar}.jar").exists()]
    if missing:
        pytest.skip(f"not in {JARS}: {missing}")
    home = tmp_path / "zookeeper-home"
    (home / "lib").mkdir(parents=True)
    (home / "zookeeper.jar").symlink_to(JARS / "zookeeper.jar")
    for jar in (*EXTRA_JARS, "slf4j-simple"):
        if (JARS / f"{jar}.jar").exists():
            (home / "lib" / f"{jar}.jar").symlink_to(JARS / f"{jar}.jar")
    monkeypatch.setenv("ZOOKEEPER_HOME", str(home))
    cert, keystore = make_certificate(tmp_path, "server")
    with TLSServer(keystore, cert) as server:
        server.cert = cert  # type: ignore[attr-defined]
        yield server


def test_tls_session_works_and_resumes_over_tls(tls_server: TLSServer) -> None:
    async def main() -> None:
        context = ssl.create_default_context(cafile=str(tls_server.cert))  # type: ignore[attr-defined]
        fds_before = len(os.listdir("/proc/self/fd"))
        conn = Connection(f"127.0.0.1:{tls_server.secure_port}", ssl=context, session_timeout=60.0)
        states: list[SessionState] = []
        resumed = asyncio.Event()

        def on_state(state: SessionState) -> None:
            states.append(state)
            if states.count(SessionState.CONNECTED) == 2:
                resumed.set()

        conn.add_state_listener(on_state)
        await conn.start(timeout=10.0)
        try:
            transport = conn._transport
            assert transport is not None
            assert transport.get_extra_info("ssl_object").version().startswith("TLS")
            created = await conn.create("/tls", b"secret", ephemeral=True)
            assert (await conn.get_data("/tls")).data == b"secret"
            session = conn.session_id
            # a crash and restart: the session resumes, again over TLS
            await asyncio.to_thread(tls_server.kill)
            await asyncio.to_thread(tls_server.start)
            await asyncio.wait_for(resumed.wait(), 45.0)
            assert states == [
                SessionState.CONNECTED,
                SessionState.SUSPENDED,
                SessionState.CONNECTED,
            ]
            assert conn.session_id == session
            stat = await conn.exists("/tls")
            assert stat is not None and stat.czxid == created.stat.czxid
            assert conn._transport is not None
            assert conn._transport.get_extra_info("ssl_object") is not None
        finally:
            await conn.close()
        assert len(os.listdir("/proc/self/fd")) == fds_before

    run(main())


def test_tls_refuses_a_server_it_does_not_trust(tls_server: TLSServer, tmp_path: Path) -> None:
    async def main() -> None:
        other_cert, _ = make_certificate(tmp_path, "stranger")
        context = ssl.create_default_context(cafile=str(other_cert))
        conn = Connection(f"127.0.0.1:{tls_server.secure_port}", ssl=context)
        with pytest.raises(ConnectionFailedError):
            await conn.start(timeout=1.5)
        assert conn.state is SessionState.CLOSED

    run(main())
