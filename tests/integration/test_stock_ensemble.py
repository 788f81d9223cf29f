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
import random
import threading
import time
from collections.abc import Iterator, MutableSequence
from pathlib import Path
from typing import Any

import pytest
from test_cli_run import finish, zklocks

import zklocks as zk
from helpers import versions_read
from zklocks._transport import connection as _connection
from zklocks._transport import session_bounds
from zklocks._transport.connection import Connection
from zklocks.server import EnsembleMember, ZooKeeperEnsemble

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


class _InOrder:
    """Stands in for ``random`` in the connection: hosts are tried as listed."""

    @staticmethod
    def shuffle(items: MutableSequence[Any]) -> None:
        pass

    uniform = staticmethod(random.uniform)


@pytest.fixture
def in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_connection, "random", _InOrder)


def _connection_of(client: zk.Client | zk.AsyncClient) -> Connection:
    session: Any = client._session
    conn: Connection = (
        session.connection if isinstance(client, zk.AsyncClient) else session._connection
    )
    return conn


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
        conn = _connection_of(client)
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
        conn = _connection_of(client)
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
            conn = _connection_of(client)
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
        assert _connection_of(client).last_host == leader.hosts
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
