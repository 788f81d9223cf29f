"""A lease kept on ZooKeeper as it ships (issue 32): ``srvr`` the one four-letter word, no
AdminServer, the default session bounds, and clients on their defaults.

There the client cannot ask for tickTime (``conf`` is refused); it learns a bound from the
servers' session bounds, by two throwaway handshakes. Before that it assumed the worst
(tickTime = session timeout / 2) and every lease was falsely lost within seconds.

Two members' timings: tickTime 400 ms and 2 s, syncLimit 5 (ZooKeeper's sample
configuration, and scaled down by five). Each profile's ensemble is shared by the
module's tests; a test that pauses a member resumes it before it ends.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_run import finish, zklocks
from test_cli_security import lines_until
from test_cli_security import zklocks as run_cli

import zklocks as zk
from helpers import connection_of, versions_read
from zklocks import _exclusive
from zklocks._server.loopback import four_letter
from zklocks._transport import session_bounds
from zklocks.server import (
    EnsembleMember,
    ServerTLS,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    make_tls_files,
)

pytestmark = pytest.mark.slow

# (tickTime ms, syncLimit): the sample configuration scaled down, and as it ships.
PROFILES = {"tick400": (400, 5), "tick2000": (2000, 5)}


@pytest.fixture(scope="module", params=sorted(PROFILES))
def stock(request: pytest.FixtureRequest) -> Iterator[ZooKeeperEnsemble]:
    tick_ms, sync_limit = PROFILES[request.param]
    with ZooKeeperEnsemble(
        3, tick_time=tick_ms, sync_limit=sync_limit, force_sync=False, four_letter_words="srvr"
    ) as ensemble:
        versions_read(ensemble.hosts)  # the servers' 3.8.0 is warned of here, once
        yield ensemble


@pytest.fixture(scope="module")
def stock2000() -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(
        3, tick_time=2000, sync_limit=5, force_sync=False, four_letter_words="srvr"
    ) as ensemble:
        versions_read(ensemble.hosts)
        yield ensemble


def _library_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("zklocks") and r.levelno >= logging.WARNING
    ]


def test_the_servers_refuse_conf_and_a_default_client_learns_a_bound(
    stock: ZooKeeperEnsemble, caplog: pytest.LogCaptureFixture
) -> None:
    """The profile is real (``conf`` refused), and the client's tickTime is the bound the
    default session bounds prove, exactly the members' tickTime."""
    assert "not in the whitelist" in stock.members[0].four_letter("conf")
    caplog.set_level(logging.INFO, logger="zklocks")
    session_bounds.forget_all()
    with zk.Client(stock.hosts) as client:
        conn = connection_of(client)
        timing, bounds = conn.timing, conn.session_bounds
        assert timing is not None and bounds is not None
        assert timing.source.startswith("session bounds of "), timing
        assert timing.tick == stock.options.tick_time / 1000
        assert (bounds.shortest_ms, bounds.longest_ms) == (
            2 * stock.options.tick_time,
            20 * stock.options.tick_time,
        )
        assert bounds.agree
        assert conn.lease_problem is None
    assert _library_warnings(caplog) == []


def test_a_default_client_keeps_a_lock_for_three_session_timeouts_and_run_outlives_one(
    stock: ZooKeeperEnsemble, caplog: pytest.LogCaptureFixture
) -> None:
    """No false loss and no warning: the lease held for three session timeouts, and a
    ``zklocks run`` command longer than a session runs to its end (exit 0)."""
    with zk.Client(stock.hosts) as client:
        session = client.session_timeout
        command = zklocks(stock.hosts, "run", "/stock/run", "--", "sleep", f"{session + 1:g}")
        lease = client.lock("/stock/held").acquire(timeout=30)
        lost = lease.wait_lost(timeout=3 * session)
        assert not lost, f"a healthy lease was lost: {lease.lost_reason}"
        status, _out, err = finish(command, timeout=3 * session)
        assert status == 0, err
        assert "lost" not in err, err
        lease.release()
    assert _library_warnings(caplog) == []


def test_a_tick_time_below_what_the_bounds_prove_is_refused_naming_both(
    stock: ZooKeeperEnsemble,
) -> None:
    """tick_time too low makes the rule unsafe without a sound: refused at start, by the
    library (InvalidArgument) and the command line (EX_CONFIG, 78), with both values."""
    tick = stock.options.tick_time / 1000
    low = tick / 4
    client = zk.Client(stock.hosts, tick_time=low)
    with pytest.raises(zk.InvalidArgument) as refused:
        client.start()
    assert f"tick_time={low:g} s" in str(refused.value)
    assert f"{tick:g} s" in str(refused.value)
    marker = Path(f"/tmp/zklocks-stock-{time.monotonic_ns()}")
    status, _out, err = finish(
        zklocks(
            stock.hosts, "run", "--tick-time", f"{low:g}", "/stock/tick", "--", "touch", str(marker)
        )
    )
    assert status == 78, err
    assert f"{tick:g} s" in err and not marker.exists()


def test_a_session_too_short_for_the_rule_is_refused_before_the_work_starts(
    stock2000: ZooKeeperEnsemble, caplog: pytest.LogCaptureFixture
) -> None:
    """A 4 s session on tickTime 2 s cannot keep a lease (about 4.2 ticks are needed):
    said once at WARNING at start, acquire raises LeaseUnkeepable and leaves no node, and
    ``zklocks run``/``elect`` exit 78 without running the command."""
    hosts = stock2000.hosts
    with zk.Client(hosts, session_timeout=4.0) as client:
        warned = [m for m in _library_warnings(caplog) if "cannot keep a lease" in m]
        assert len(warned) == 1, _library_warnings(caplog)
        lock = client.lock("/stock/short")
        with pytest.raises(zk.LeaseUnkeepable) as refused:
            lock.acquire(timeout=5)
        assert "session_timeout of at least" in str(refused.value)
        assert lock.contenders() == []
        with pytest.raises(zk.LeaseUnkeepable):
            client.election("/stock/short-election").acquire(timeout=5)
    for verb in ("run", "elect"):
        marker = Path(f"/tmp/zklocks-stock-{verb}-{time.monotonic_ns()}")
        status, _out, err = finish(
            zklocks(
                hosts,
                verb,
                "--session-timeout",
                "4",
                f"/stock/short-{verb}",
                "--",
                "touch",
                str(marker),
            )
        )
        assert status == 78, err
        assert "--session-timeout" in err and not marker.exists(), err


# ------------------------------------------------------- a member that stops answering


def _followers_first(ensemble: ZooKeeperEnsemble, first: EnsembleMember) -> str:
    return ",".join(m.hosts for m in [first, *(m for m in ensemble.members if m is not first)])


def _pause(member: EnsembleMember, seconds: float) -> threading.Timer:
    member.pause()
    timer = threading.Timer(seconds, member.resume)
    timer.start()
    return timer


def test_a_paused_follower_costs_neither_the_lease_nor_the_session(
    stock2000: ZooKeeperEnsemble, in_order: None
) -> None:
    """The holder's member, a follower, is paused for 7 s of a 10 s session on tickTime
    2 s: the client moves to another member while the lease still has time, and keeps
    both. (Before: lost after about 4 s, "no answer for a whole session timeout".)"""
    leader = stock2000.leader()
    follower = next(m for m in stock2000.members if m is not leader)
    with zk.Client(_followers_first(stock2000, follower)) as client:
        conn = connection_of(client)
        assert conn.last_host == follower.hosts
        session = conn.session_id
        lease = client.lock("/stock/pause-sync").acquire(timeout=30)
        timer = _pause(follower, 7.0)
        try:
            lost = lease.wait_lost(timeout=8.0)
        finally:
            timer.join()
            follower.resume()
        assert not lost, lease.lost_reason
        assert conn.session_id == session
        assert conn.last_host != follower.hosts
        lease.release()


def test_a_paused_follower_costs_nothing_with_asyncio(
    stock2000: ZooKeeperEnsemble, in_order: None
) -> None:
    leader = stock2000.leader()
    follower = next(m for m in stock2000.members if m is not leader)

    async def scenario() -> None:
        async with zk.AsyncClient(_followers_first(stock2000, follower)) as client:
            conn = connection_of(client)
            assert conn.last_host == follower.hosts
            session = conn.session_id
            lease = await client.lock("/stock/pause-async").acquire(timeout=30)
            follower.pause()
            try:
                lost = await lease.wait_lost(timeout=7.0)
            finally:
                follower.resume()
            assert not lost, lease.lost_reason
            assert not lease.lost, lease.lost_reason
            assert conn.session_id == session
            await lease.release()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_paused_leader_loses_the_lease_with_a_truthful_reason(
    stock2000: ZooKeeperEnsemble, in_order: None
) -> None:
    """A paused leader stops every proof, so a loss is right (it is resumed only once the
    lease is lost, or a session timeout passed); the reason must not claim "no answer for
    a whole session timeout" when the leader answered seconds before."""
    leader = stock2000.leader()
    with zk.Client(_followers_first(stock2000, leader)) as client:
        assert connection_of(client).last_host == leader.hosts
        session = client.session_timeout
        lease = client.lock("/stock/pause-leader").acquire(timeout=30)
        paused = time.monotonic()
        leader.pause()
        try:
            lost = lease.wait_lost(timeout=session)
            told = time.monotonic() - paused
        finally:
            leader.resume()
        assert lost
        assert told < session
        reason = lease.lost_reason or ""
        assert "no answer from ZooKeeper for a whole session timeout" not in reason, reason
        assert "proven alive at the ZooKeeper leader" in reason, reason
    stock2000.wait_for_leader(60)  # whole again for the module's next test


def test_zklocks_server_stock_starts_members_as_zookeeper_ships() -> None:
    """``zklocks server --ensemble 3 --stock``: `conf` refused, and `zklocks run` on its
    defaults keeps the lock past a session timeout there (tickTime 2 s: a 10 s session)."""
    server = run_cli("server", "--port", "0", "--ensemble", "3", "--stock")
    try:
        lines = lines_until(server, "Press Ctrl-C", 180)
        assert any("as shipped: only `srvr` answers" in line for line in lines), lines
        exports = dict(
            line.split("export ", 1)[1].split("=", 1) for line in lines if "export " in line
        )
        hosts = exports["ZKLOCKS_HOSTS"]
        port = hosts.split(",")[0].rsplit(":", 1)[1]
        assert "not in the whitelist" in four_letter(int(port), "conf", 2.0)
        status, _out, err = finish(zklocks(hosts, "run", "/stock/cli", "--", "sleep", "11"), 60)
        assert status == 0, err
    finally:
        server.send_signal(signal.SIGINT)
        code, _, err = finish(server, timeout=90)
    assert code == 0, err


# ------------------------------------------- the probe through TLS, SASL and a chroot


def _bounds_of(port: int, ssl_context: Any = None) -> session_bounds.SessionBounds | str:
    async def ask() -> session_bounds.SessionBounds | str:
        return await session_bounds.learn_bounds(
            ("127.0.0.1", port), ssl_context, 10.0, 10_000, 10_000
        )

    return asyncio.run(ask())


def test_the_probe_works_through_tls_and_on_a_server_that_requires_sasl(tmp_path: Path) -> None:
    """Two throwaway handshakes need neither a login nor anything but the client's TLS."""
    files = make_tls_files(tmp_path)
    tls = ServerTLS(files.server_keystore, files.ca, probe_chain=files.client_chain)
    with ZooKeeperServer(tick_time=300, tls=tls, four_letter_words="srvr") as server:
        context = ssl.create_default_context(cafile=str(files.ca))
        bounds = _bounds_of(server.port, context)
        assert isinstance(bounds, session_bounds.SessionBounds), bounds
        assert (bounds.shortest_ms, bounds.longest_ms) == (600, 6000)
    with ZooKeeperServer(
        tick_time=300, sasl_users={"alice": "a-s3cret"}, enforce_auth=True, four_letter_words="srvr"
    ) as server:
        bounds = _bounds_of(server.port)
        assert isinstance(bounds, session_bounds.SessionBounds), bounds
        assert (bounds.shortest_ms, bounds.longest_ms) == (600, 6000)


def test_a_chrooted_client_on_many_hosts_learns_the_bound(stock: ZooKeeperEnsemble) -> None:
    session_bounds.forget_all()
    with zk.Client(stock.hosts) as client:
        txn = client.transaction()
        txn.create("/stock-chroot")
        txn.commit()
    with zk.Client(stock.hosts + "/stock-chroot") as client:
        timing = connection_of(client).timing
        assert timing is not None and timing.source.startswith("session bounds of "), timing
        with client.lock("/in-chroot") as lease:
            assert not lease.lost


def test_exclusive_refuses_before_the_function_runs_where_no_lease_can_be_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Servers that cap sessions at 6 s on tickTime 2 s: the default client is granted 6 s,
    too short for the rule (8.5 s), so ``exclusive`` raises ``LeaseUnkeepable`` and never
    runs the function, sync and asyncio."""
    with ZooKeeperEnsemble(
        3, tick_time=2000, max_session_timeout=6000, force_sync=False, four_letter_words="srvr"
    ) as capped:
        monkeypatch.setenv("ZKLOCKS_HOSTS", capped.hosts)
        ran: list[str] = []

        @zk.exclusive("/stock/exclusive")
        def job() -> None:
            ran.append("sync")

        @zk.exclusive("/stock/exclusive-async")
        async def async_job() -> None:
            ran.append("async")

        try:
            with pytest.raises(zk.LeaseUnkeepable, match="session_timeout of at least"):
                job()
            with pytest.raises(zk.LeaseUnkeepable, match="session_timeout of at least"):
                asyncio.run(async_job())
        finally:
            _exclusive._clients.stop_all()  # none outlives the test (or its ensemble)
        assert ran == []
