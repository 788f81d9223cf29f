"""An ensemble on TLS (``ZooKeeperEnsemble(tls=...)``, ``zklocks server --ensemble 3 --tls``):
client ports speak TLS only, and so do the links between members (``sslQuorum``)."""

from __future__ import annotations

import signal
import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_security import finish, lines_until
from test_cli_security import zklocks as run_cli

import zklocks
from helpers import run, show_member_logs_if_failed
from zklocks._certs import TLSFiles
from zklocks.server import ServerTLS, ZooKeeperEnsemble, make_tls_files


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("ensemble-tls"))


@pytest.fixture
def ensemble(request: pytest.FixtureRequest, files: TLSFiles) -> Iterator[ZooKeeperEnsemble]:
    tls = ServerTLS(files.server_keystore, files.ca, probe_chain=files.client_chain)
    with ZooKeeperEnsemble(3, tick_time=200, max_session_timeout=60_000, tls=tls) as running:
        yield running
        show_member_logs_if_failed(request, running)


def member_link_speaks_tls(port: int, files: TLSFiles) -> str:
    """The TLS version a member's election port negotiates with a CA-checked client."""
    context = ssl.create_default_context(cafile=str(files.ca))
    context.load_cert_chain(str(files.client_chain))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return tls.version() or ""


def test_a_lock_cycle_over_tls_and_a_member_restart(
    ensemble: ZooKeeperEnsemble, files: TLSFiles
) -> None:
    context = ssl.create_default_context(cafile=str(files.ca))
    path = f"/ens-tls/{uuid.uuid4().hex[:8]}"
    with zklocks.Client(ensemble.hosts, ssl=context, session_timeout=10) as client:
        with client.lock(path) as lease:
            assert lease.node.startswith(path + "/")
        # the links between members are TLS too: their election ports answer a handshake
        for member in ensemble.members:
            election_port = int(member._server_lines[member.myid - 1].rsplit(":", 1)[1])
            assert member_link_speaks_tls(election_port, files).startswith("TLS")
        # restart a member that is not leading; it rejoins over TLS, the lock still works
        leader = ensemble.leader()
        follower = next(m for m in ensemble.members if m is not leader)
        lock = client.lock(path)
        held = lock.acquire(timeout=10)
        follower.restart()
        ensemble.wait_ready()
        assert follower.mode() in ("leader", "follower")
        assert not held.lost
        lock.release()
        with client.lock(path) as again:
            assert again.token > held.token
    # a client that connects to the restarted member alone gets a lock over TLS
    with zklocks.Client(follower.hosts, ssl=context) as direct, direct.lock(path) as lease:
        assert lease.node.startswith(path + "/")
    # plaintext is refused on every client port, at once and saying why
    with pytest.raises(zklocks.ConnectionFailed, match="TLS"):
        zklocks.Client(ensemble.hosts, connect_timeout=5).start()


def test_the_async_client_cycles_a_lock_over_tls(
    ensemble: ZooKeeperEnsemble, files: TLSFiles
) -> None:
    async def main() -> int:
        context = ssl.create_default_context(cafile=str(files.ca))
        async with (
            zklocks.AsyncClient(ensemble.hosts, ssl=context) as client,
            client.lock(f"/ens-tls/{uuid.uuid4().hex[:8]}") as lease,
        ):
            return lease.token

    assert run(main()) > 0


def test_zklocks_server_ensemble_tls(tmp_path: Path) -> None:
    server = run_cli("server", "--port", "0", "--ensemble", "3", "--tls")
    try:
        lines = lines_until(server, "Press Ctrl-C", 180)
        assert any("TLS only, members too" in line for line in lines)
        exports = dict(
            line.split("export ", 1)[1].split("=", 1) for line in lines if "export " in line
        )
        assert set(exports) == {"ZKLOCKS_HOSTS", "ZKLOCKS_TLS_CA"}
        assert len(exports["ZKLOCKS_HOSTS"].split(",")) == 3
        code, out, err = finish(
            run_cli("run", "/ens-tls/cli", "--", "sh", "-c", "echo ok", env=exports)
        )
        assert code == 0 and out.strip() == "ok", err
    finally:
        server.send_signal(signal.SIGINT)
        code, _, err = finish(server, timeout=90)
    assert code == 0, err
