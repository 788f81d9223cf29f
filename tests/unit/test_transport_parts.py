"""The connection's parts that decide without I/O: the dialer's rounds, the liveness timer's
duties, and where the lease proofs come from. (Their I/O is driven for real by
tests/integration/test_connection*.py and test_transport_faults.py.)"""

from __future__ import annotations

import pytest

from zklocks._protocol.errors import ConnectionFailedError
from zklocks._transport.dialer import Dialer
from zklocks._transport.lease_proofs import LeaseProofs
from zklocks._transport.lease_rule import Standalone, SyncChain
from zklocks._transport.liveness import Liveness

HOSTS = [("zk1", 2181), ("zk2", 2181)]


def test_a_round_of_definite_failures_ends_the_search_at_start_naming_each_host() -> None:
    search = Dialer(list(HOSTS), None, None).search()
    for _ in HOSTS:
        search.next_attempt(0.0, (None, 10.0), 10.0)
    assert search.failed("zk1:2181", "zk1:2181 refused the connection", starting=True) is None
    with pytest.raises(ConnectionFailedError) as failed:
        search.failed("zk2:2181", "zk2:2181: unknown host name", starting=True)
    assert failed.value.hosts == ("zk1:2181", "zk2:2181")
    assert failed.value.reasons == (
        "zk1:2181 refused the connection",
        "zk2:2181: unknown host name",
    )
    assert not failed.value.refused  # no TLS refusal among them


def test_a_silent_host_makes_the_round_pause_and_go_on() -> None:
    search = Dialer(list(HOSTS), None, None).search()
    assert search.failed("zk1:2181", None, starting=True) is None  # silent: not definite
    pause = search.failed("zk2:2181", "zk2:2181 refused the connection", starting=True)
    assert pause is not None and 0.01 <= pause <= 0.02  # the first backoff, jittered
    # after a reconnect (not starting) even definite failures only pause
    assert search.failed("zk1:2181", "refused", starting=False) is None
    second = search.failed("zk2:2181", "refused", starting=False)
    assert second is not None and 0.02 <= second <= 0.04  # doubled


def test_each_attempt_gets_a_share_of_the_time_left() -> None:
    search = Dialer(list(HOSTS), None, None).search()
    host, port, limit = search.next_attempt(0.0, (None, 4.0), 30.0)
    assert (host, port) == HOSTS[0]
    assert limit == pytest.approx(2.0)  # two hosts left in the round: half of 4 s each
    _, _, alone = Dialer(list(HOSTS), None, 0.5).search().next_attempt(0.0, (None,), 30.0)
    assert alone == 0.5  # connect_timeout bounds an attempt when no deadline is nearer


def test_a_young_connection_backs_off_doubling_and_a_lived_one_does_not() -> None:
    dialer = Dialer(list(HOSTS), None, None)
    first = dialer.pause_after_drop(lived=False)
    second = dialer.pause_after_drop(lived=False)
    assert first is not None and 0.01 <= first <= 0.02
    assert second is not None and 0.02 <= second <= 0.04
    assert dialer.pause_after_drop(lived=True) is None
    again = dialer.pause_after_drop(lived=False)
    assert again is not None and again <= 0.02  # the backoff started over


def test_liveness_pings_after_a_third_and_gives_up_after_two_thirds() -> None:
    liveness = Liveness(session_timeout=3.0)
    liveness.last_recv = liveness.last_send = 100.0
    assert not liveness.ping_due(100.9) and liveness.silent_for(100.9) is None
    assert liveness.ping_due(101.0)
    assert liveness.silent_for(101.9) is None
    assert liveness.silent_for(102.5) == pytest.approx(2.5)
    liveness.set_intervals(6.0)  # negotiated: longer
    assert not liveness.ping_due(101.5) and liveness.silent_for(102.5) is None


def test_lease_proofs_count_from_the_latest_answered_send() -> None:
    proofs = LeaseProofs(session_timeout=10.0, clock_drift=0.01, tick_time=None)
    assert isinstance(proofs.rule, SyncChain)  # an ensemble until the probe says otherwise
    assert proofs.timing() is not None and proofs.timing().assumed  # type: ignore[union-attr]
    proofs.handshake(sent=50.0, session_timeout=10.0, resumed=False)
    proofs.answered(sent=52.0, answered=52.1, through_leader=False)
    proofs.answered(sent=51.0, answered=52.2, through_leader=False)  # older: no step back
    assert proofs.last_answered_sent == 52.0
    proofs.standalone(10.0, proofs.last_answered_sent)
    assert isinstance(proofs.rule, Standalone)
    assert proofs.rule.lease_sent() == pytest.approx(52.0 - 0.01 * 10.0)
    assert proofs.next_renewal() is None and not proofs.renewal_due(1000.0)
