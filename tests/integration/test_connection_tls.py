"""TLS against ZooKeeper's ``secureClientPort`` with no plaintext port beside it.

The servers come from ``zklocks.server`` (``ServerTLS``: the Netty connection factory
and the Netty jars Debian's manifest lacks); certificates from trustme.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nemesis.proxy import Proxy

import zklocks
from connection_support import Connection, transport_of
from helpers import run as run_bounded
from tls_support import TLSSetup
from zklocks._protocol.errors import ConnectionFailedError
from zklocks._vocabulary import SessionState
from zklocks.server import ZooKeeperServer

ALICE = ("digest", "alice:tls-s3cret")
run = functools.partial(run_bounded, timeout=90.0)  # TLS handshakes and restarts are slow


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSSetup:
    return TLSSetup.make(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(tls: TLSSetup) -> Iterator[ZooKeeperServer]:
    with tls.server("none") as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(tls: TLSSetup) -> Iterator[ZooKeeperServer]:
    with tls.server("need") as server:
        yield server


def test_a_lock_over_tls_on_a_server_with_no_plaintext_port(
    tls: TLSSetup, tls_server: ZooKeeperServer
) -> None:
    conf = dict(
        line.split("=", 1) for line in tls_server.four_letter("conf").splitlines() if "=" in line
    )  # asked over TLS itself
    assert conf["secureClientPort"] == str(tls_server.port)
    assert conf.get("clientPort", "-1") == "-1"  # no plaintext port
    with pytest.raises(zklocks.ConnectionFailed) as plain:
        zklocks.Client(tls_server.hosts, connect_timeout=2).start()
    assert "TLS" in str(plain.value)
    with zklocks.Client(tls_server.hosts, ssl=tls.context()) as client:
        lock = client.lock("/tls/orders", identifier="over-tls")
        with lock as lease:
            (holder,) = lock.contenders()
            assert holder.identifier == "over-tls" and holder.token == lease.token
            assert not lease.lost

    async def main() -> None:
        client = zklocks.AsyncClient(tls_server.hosts, ssl=tls.context())
        async with client, client.lock("/tls/orders") as lease:
            assert lease.token > 0

    run(main())


def test_ssl_true_uses_the_system_defaults_and_honours_ssl_cert_file(
    tls: TLSSetup, tls_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(zklocks.ConnectionFailed, match="did not verify"):
        zklocks.Client(tls_server.hosts, ssl=True, connect_timeout=2).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    with zklocks.Client(tls_server.hosts, ssl=True) as client, client.lock("/tls/ssl-true"):
        assert client.connected


def test_a_server_signed_by_another_ca_fails_with_a_clear_message(
    tls_server: ZooKeeperServer, tmp_path: Path
) -> None:
    stranger = TLSSetup.make(tmp_path / "stranger")
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(tls_server.hosts, ssl=stranger.context()).start()
    message = str(failed.value)
    assert "certificate did not verify" in message and tls_server.hosts in message
    assert "is ZooKeeper running" not in message  # it is; the hint would mislead
    assert time.monotonic() - started < 2.0  # a definite cause: not the 15 s timeout

    async def main() -> None:
        client = zklocks.AsyncClient(tls_server.hosts, ssl=stranger.context(), connect_timeout=2)
        with pytest.raises(zklocks.ConnectionFailed, match="did not verify"):
            await client.start()

    run(main())


def test_mutual_tls_with_a_client_certificate_and_without(
    tls: TLSSetup, mtls_server: ZooKeeperServer
) -> None:
    client = zklocks.Client(mtls_server.hosts, ssl=tls.context(client_cert=True))
    with client, client.lock("/mtls/orders") as lease:
        assert lease.token > 0
    # Without one the TLS 1.3 handshake completes and the server drops us just after,
    # with an alert that names the cause: ConnectionFailed at once, saying why.
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(mtls_server.hosts, ssl=tls.context()).start()
    assert time.monotonic() - started < 2.0  # not the 15 s connect_timeout
    assert "client certificate" in str(failed.value)


def test_a_tls_mismatch_fails_at_once_naming_the_cause_both_ways(
    zk_server: ZooKeeperServer, tls_server: ZooKeeperServer
) -> None:
    # ssl=True on a plaintext port: the server hangs up during the TLS handshake.
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(zk_server.hosts, ssl=True).start()
    assert time.monotonic() - started < 2.0  # not the 15 s connect_timeout
    message = str(failed.value)
    assert zk_server.hosts in message and "plaintext port" in message and "ssl=" in message
    assert "is ZooKeeper running" not in message and "--" not in message
    # A plaintext client on a TLS-only port: the server hangs up without a word; a TLS
    # ClientHello tells that port from a member that is not serving.
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(tls_server.hosts).start()
    assert time.monotonic() - started < 2.0
    message = str(failed.value)
    assert tls_server.hosts in message and "speaks TLS" in message and "ssl=True" in message
    assert "is ZooKeeper running" not in message and "--" not in message


def test_creator_acl_over_mutual_tls_counts_the_certificate_identity_as_ours(
    tls: TLSSetup, mtls_server: ZooKeeperServer
) -> None:
    """With a client certificate the server adds an ``x509:`` identity to the session,
    so ``auth:`` expands to it too; the directory check must accept that as ours."""
    context = tls.context(client_cert=True)
    with zklocks.Client(mtls_server.hosts, ssl=context, auth=[ALICE], acl="creator") as client:
        for _ in range(2):  # the second acquire meets the directory the first one made
            with client.lock("/mtls/creator") as lease:
                assert lease.token > 0
        bob = zklocks.Client(
            mtls_server.hosts, ssl=context, auth=[("digest", "bob:b")], acl="creator"
        )
        with bob, pytest.raises(zklocks.AccessDenied) as refused:
            bob.lock("/mtls/creator").acquire(timeout=5)
        # bob shares the certificate, so the server lets him in; the check does not:
        # the directory grants digest:alice what bob's acl='creator' would not
        assert refused.value.operation == "use"
        assert "digest:alice=cdrwa" in str(refused.value)


def test_reconnect_and_session_resumption_over_tls_keep_the_lease(
    tls: TLSSetup, tls_server: ZooKeeperServer
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", tls_server.port) as proxy:
            client = zklocks.AsyncClient(proxy.hosts, ssl=tls.context(), session_timeout=10.0)
            async with client:
                session = client._session_or_raise().connection
                lock = client.lock("/tls/resume")
                async with lock as lease:
                    states: list[SessionState] = []
                    back = asyncio.Event()

                    def on_state(state: SessionState) -> None:
                        states.append(state)
                        if state is SessionState.CONNECTED:
                            back.set()

                    session.add_state_listener(on_state)
                    session_id = session.session_id
                    proxy.reset()  # kill the connection
                    await asyncio.wait_for(back.wait(), 20)
                    assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
                    assert session.session_id == session_id  # resumed, not a new session
                    assert proxy.accepted >= 2
                    transport = transport_of(session)
                    assert transport is not None
                    assert transport.get_extra_info("ssl_object") is not None
                    assert not lease.lost
                    (holder,) = await lock.contenders()
                    assert holder.holder and holder.node == lease.node

    run(main())


def test_tls_session_resumes_over_tls_after_a_server_crash(tls: TLSSetup) -> None:
    with tls.server("none") as server:

        async def main() -> None:
            fds_before = len(os.listdir("/proc/self/fd"))
            conn = Connection(server.hosts, ssl=tls.context(), session_timeout=60.0)
            states: list[SessionState] = []
            resumed = asyncio.Event()

            def on_state(state: SessionState) -> None:
                states.append(state)
                if states.count(SessionState.CONNECTED) == 2:
                    resumed.set()

            conn.add_state_listener(on_state)
            await conn.start(timeout=10.0)
            try:
                transport = transport_of(conn)
                assert transport is not None
                assert transport.get_extra_info("ssl_object").version().startswith("TLS")
                created = await conn.create("/tls", b"secret", ephemeral=True)
                session = conn.session_id
                await asyncio.to_thread(server.kill)
                await asyncio.to_thread(server.start)
                await asyncio.wait_for(resumed.wait(), 45.0)
                assert states == [
                    SessionState.CONNECTED,
                    SessionState.SUSPENDED,
                    SessionState.CONNECTED,
                ]
                assert conn.session_id == session
                stat = await conn.exists("/tls")
                assert stat is not None and stat.czxid == created.stat.czxid
            finally:
                await conn.close()
            assert len(os.listdir("/proc/self/fd")) == fds_before

        run(main())


def test_the_connection_names_the_tls_failure(tls_server: ZooKeeperServer, tmp_path: Path) -> None:
    async def main() -> None:
        stranger = TLSSetup.make(tmp_path / "other")
        conn = Connection(tls_server.hosts, ssl=stranger.context())
        with pytest.raises(ConnectionFailedError) as failed:
            await conn.start(timeout=1.5)
        (reason,) = failed.value.reasons
        assert reason.startswith(tls_server.hosts) and "did not verify" in reason
        assert failed.value.refused  # it runs: "is ZooKeeper running?" would mislead
        assert conn.state is SessionState.CLOSED

    run(main())


def test_the_server_probes_ruok_over_tls(tls_server: ZooKeeperServer) -> None:
    assert tls_server.four_letter("ruok") == "imok"
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=5) as sock:
        sock.sendall(b"ruok")  # plain text on the TLS port: the server does not answer it
        sock.settimeout(5)
        try:
            answer = sock.recv(16)
        except (ConnectionResetError, TimeoutError):
            answer = b""
        assert answer != b"imok"
