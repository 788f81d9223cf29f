"""A healthy lease on a healthy ensemble stays held, at a measured cost (issue 21).

The lease rule on an ensemble proves the session through the leader with renewing
syncs (``_transport/lease_rule.py``). These check, on a real 3-member ensemble with the
client on its defaults, that it learns tickTime from the server, that no healthy lease
is marked lost, that the syncs write nothing (the zxid does not move), and what they
cost in requests per second. The short run is part of CI; the 10-minute run is
``make soak-lease`` (marker ``soak``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import zklocks
from zklocks._transport.connection import Connection
from zklocks.server import ZooKeeperEnsemble

SAMPLE_TICK_MS = 400  # ZooKeeper's sample proportions, scaled down: syncLimit 5, 4 s sessions
SESSION = 4.0


@pytest.fixture(scope="module")
def sample_ensemble() -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(
        3, tick_time=SAMPLE_TICK_MS, sync_limit=5, max_session_timeout=60_000
    ) as ensemble:
        yield ensemble


def _connection_of(client: zklocks.Client) -> Connection:
    conn: Connection = client._session._connection  # type: ignore[union-attr]
    return conn


def _zxid(ensemble: ZooKeeperEnsemble) -> str:
    leader = ensemble.leader()
    for line in leader.four_letter("srvr").splitlines():
        if line.startswith("Zxid:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("srvr said no Zxid")


def _hold_and_watch(ensemble: ZooKeeperEnsemble, seconds: float, clients: int) -> None:
    members = ensemble.members
    lost: list[str] = []
    with_clients = [
        zklocks.Client(members[i % len(members)].hosts, session_timeout=SESSION)
        for i in range(clients)
    ]
    try:
        leases = []
        for i, client in enumerate(with_clients):
            client.start()
            timing = _connection_of(client).timing
            assert timing is not None and timing.tick == SAMPLE_TICK_MS / 1000, timing
            lease = client.lock(f"/health/lock-{i}").acquire(timeout=10)
            lease.add_lost_callback(lambda lease: lost.append(str(lease.lost_reason)))
            leases.append(lease)
        zxid = _zxid(ensemble)
        stop = threading.Event()
        stop.wait(seconds)  # the leases are watched by the clients' own timers meanwhile
        assert not lost, lost
        assert not any(lease.lost for lease in leases)
        # Renewing syncs are not transactions: nothing was written meanwhile.
        assert _zxid(ensemble) == zxid
        for lease in leases:
            lease.release()
    finally:
        for client in with_clients:
            client.stop()


def test_healthy_leases_on_a_healthy_ensemble_stay_held_and_syncs_write_nothing(
    sample_ensemble: ZooKeeperEnsemble,
) -> None:
    _hold_and_watch(sample_ensemble, 20.0, clients=3)


def test_renewing_syncs_cost_about_one_request_a_second_per_client(
    sample_ensemble: ZooKeeperEnsemble,
) -> None:
    """With tickTime 400 ms and 4 s sessions a sync goes every ~0.9 s (pings only fill
    silences): counted on the member as packets received."""
    member = sample_ensemble.members[0]
    with zklocks.Client(member.hosts, session_timeout=SESSION) as client:
        interval = _connection_of(client).lease_rule.renew_interval()
        assert interval is not None and 0.4 < interval < 1.2, interval
        before = member.mntr()["zk_packets_received"]
        began = time.monotonic()
        threading.Event().wait(10.0)
        after = member.mntr()["zk_packets_received"]
        took = time.monotonic() - began
    assert isinstance(before, int) and isinstance(after, int)
    rate = (after - before - 1) / took  # less our mntr's own connection
    # Other clients of the module's ensemble are gone: this one's syncs and pings alone.
    assert rate <= 1.5 / interval, f"{rate:.2f} requests/s with a {interval:.2f} s interval"
    assert rate >= 0.5 / interval, f"{rate:.2f} requests/s: the renewal does not run"


SOAK_MINUTES = float(os.environ.get("ZKLOCKS_SOAK_MINUTES", "10"))


@pytest.mark.soak
@pytest.mark.timeout(SOAK_MINUTES * 60 + 120)
def test_healthy_leases_stay_held_for_ten_minutes(sample_ensemble: ZooKeeperEnsemble) -> None:
    minutes = SOAK_MINUTES
    _hold_and_watch(sample_ensemble, minutes * 60, clients=6)


def test_the_cli_passes_tick_time_to_the_lease_rule(sample_ensemble: ZooKeeperEnsemble) -> None:
    """``--tick-time`` (or ZKLOCKS_TICK_TIME) reaches the client: the rule says whence."""
    member = sample_ensemble.members[0]
    for args, env in (
        (["--tick-time", "0.5"], {}),
        ([], {"ZKLOCKS_TICK_TIME": "0.5"}),
        ([], {}),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "zklocks",
                "-v",
                "run",
                "/health/cli",
                "--hosts",
                member.hosts,
                *args,
                "--",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **env},
        )
        assert done.returncode == 0, done.stderr
        if args or env:
            assert "tickTime 0.500 s (from the tick_time option)" in done.stderr, done.stderr
        else:
            assert "tickTime 0.400 s (from the conf of" in done.stderr, done.stderr
