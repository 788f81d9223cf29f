"""The servers' versions: read with ``srvr`` from a real server, warned of once per
ensemble, refused with ``strict_server=True``; a version string from the known-issues
table is fed through the seam on the version read (the server itself is real)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

import zklocks
from zklocks._frontend import server_check
from zklocks._transport import four_letter
from zklocks.server import ZooKeeperServer


@pytest.fixture
def fresh() -> Iterator[None]:
    """No ensemble read yet in this process, and the real reader again afterwards."""
    remembered = dict(server_check._seen)
    server_check.forget()
    yield
    four_letter.use_reader(None)
    server_check.forget()
    server_check._seen.update(remembered)  # the other tests' servers stay read


def feed(version: str) -> None:
    def reader(
        host: str, port: int, context: ssl.SSLContext | None, timeout: float
    ) -> four_letter.SrvrAnswer:
        real = four_letter.parse_srvr(four_letter.ask(host, port, "srvr", timeout=timeout))
        assert real is not None  # the server is asked for real; only the version is fed
        return four_letter.SrvrAnswer(version, real.mode)

    four_letter.use_reader(reader)


def test_the_real_version_is_read(zk_server: ZooKeeperServer, fresh: None) -> None:
    (member,) = server_check.read_members(zk_server.hosts, None)
    assert member.error is None and member.mode == "standalone"
    assert zklocks._core.known_issues.parse_version(member.version) is not None


def test_a_known_bug_is_warned_of_once_per_ensemble(
    zk_server: ZooKeeperServer, fresh: None, caplog: pytest.LogCaptureFixture
) -> None:
    feed("3.9.3")
    with caplog.at_level(logging.WARNING, logger="zklocks.server"):
        for _ in range(2):
            with zklocks.Client(zk_server.hosts) as client:
                client.lock("/versions/a").acquire(timeout=5).release()
    warnings = [r for r in caplog.records if r.name == "zklocks.server"]
    assert len(warnings) == 1
    assert "ZOOKEEPER-4925" in warnings[0].getMessage()
    assert "3.9.3" in warnings[0].getMessage()


def test_a_fixed_version_is_not_warned_of(
    zk_server: ZooKeeperServer, fresh: None, caplog: pytest.LogCaptureFixture
) -> None:
    feed("3.9.4")
    with caplog.at_level(logging.WARNING, logger="zklocks.server"), zklocks.Client(zk_server.hosts):
        pass
    assert not [r for r in caplog.records if r.name == "zklocks.server"]


def test_strict_server_refuses_a_known_bug(zk_server: ZooKeeperServer, fresh: None) -> None:
    feed("3.8.0")
    client = zklocks.Client(zk_server.hosts, strict_server=True)
    with pytest.raises(zklocks.ConnectionFailed, match="ZOOKEEPER-4785") as caught:
        client.start()
    assert "strict_server" in str(caught.value) and zk_server.hosts in str(caught.value)
    client.stop()
    feed("3.9.4")
    server_check.forget()
    with zklocks.Client(zk_server.hosts, strict_server=True) as client:
        assert client.state is zklocks.ConnectionState.CONNECTED


def test_async_strict_server_refuses_a_known_bug(zk_server: ZooKeeperServer, fresh: None) -> None:
    feed("3.9.3")

    async def main() -> None:
        client = zklocks.AsyncClient(zk_server.hosts, strict_server=True)
        with pytest.raises(zklocks.ConnectionFailed, match="ZOOKEEPER-4925"):
            await client.start()
        await client.stop()

    asyncio.run(main())


def test_strict_server_on_the_command_line(zk_server: ZooKeeperServer, fresh: None) -> None:
    from click.testing import CliRunner

    from zklocks.cli import main

    feed("3.9.3")
    result = CliRunner().invoke(
        main, ["status", "--hosts", zk_server.hosts, "--strict-server", "/versions"]
    )
    assert result.exit_code == 69, result.output
    assert "ZOOKEEPER-4925" in result.output and "--strict-server" in result.output


def test_strict_server_must_be_a_bool() -> None:
    with pytest.raises(zklocks.InvalidArgument, match="strict_server"):
        zklocks.Client("127.0.0.1:1", strict_server="yes")  # type: ignore[arg-type]


def test_what_doctor_reads_on_both_clients(zk_server: ZooKeeperServer) -> None:
    """sync, four_letter (read-only words only), lease_report and Contender.owner."""
    path = "/versions/doctor-reads"
    with zklocks.Client(zk_server.hosts) as client:
        client.sync(path)
        client.sync("/")  # the root too: a sync is no lock
        assert "Zookeeper version:" in client.four_letter(zk_server.hosts, "srvr")
        with pytest.raises(zklocks.InvalidArgument, match="read-only"):
            client.four_letter(zk_server.hosts, "srst")  # resets the server's counters
        report = client.lease_report()
        assert (report.tick, report.source, report.problem) == (None, None, None)  # standalone
        assert report.session_timeout == client.session_timeout
        lease = client.lock(path).acquire(timeout=5)
        (holder,) = client.lock(path).contenders()
        assert holder.owner != 0 and holder.ephemeral and holder.token == lease.token
        lease.release()

    async def main() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as aclient:
            await aclient.sync(path)
            answer = await aclient.four_letter(zk_server.hosts, "srvr")
            assert "Mode: standalone" in answer
            assert aclient.lease_report().problem is None
            (member,) = await aclient.server_versions()
            assert member.error is None and member.mode == "standalone"

    asyncio.run(main())


def test_the_version_is_read_over_tls(tmp_path: Path, fresh: None) -> None:
    """A TLS-only server: srvr is asked over TLS, as the client connects (and a client
    without TLS cannot ask it, and says so in the member's error)."""
    from tls_support import TLSSetup

    tls = TLSSetup.make(tmp_path / "tls")
    with tls.server("none") as server:
        (member,) = zklocks.Client(server.hosts, ssl=tls.context()).server_versions()
        assert member.error is None and member.mode == "standalone", member
        assert zklocks._core.known_issues.parse_version(member.version) is not None
        with zklocks.Client(server.hosts, ssl=tls.context()) as client:
            assert "Mode: standalone" in client.four_letter(server.hosts, "srvr")
        (plain,) = zklocks.Client(server.hosts).server_versions()
        assert plain.error is not None and plain.version == ""
