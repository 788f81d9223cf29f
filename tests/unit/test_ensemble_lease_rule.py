"""The lease rule (``_transport/lease_rule.py``), on a clock of our own.

On an ensemble only a chain proves what the leader counted: a request A, a sync or
write B sent a tick after A's answer, then a sync or write D sent after B's answer and
answered while the lease still ran; D's answer proves A's send time. Pings and reads
alone never move the lease. The integration check is tests/integration/
test_ensemble_faults.py; the server facts behind the rule are in ../shared/ZK-LEASE.md.
"""

from __future__ import annotations

import pytest

from zklocks._transport import lease_rule
from zklocks._transport.lease_rule import Standalone, SyncChain, Timing
from zklocks._transport.server_conf import parse_admin_conf, parse_four_letter_conf

TICK = 0.2
T = 10.0


def chain(drift: float = 0.0) -> SyncChain:
    rule = SyncChain(T, drift, Timing(TICK, "test"))
    rule.connected(100.0, resumed=False)
    return rule


def anchor(rule: lease_rule.LeaseRule) -> float | None:
    sent = rule.lease_sent()
    return None if sent is None else round(sent + rule.margin(), 9)


def test_the_handshake_is_a_proof_with_every_margin_off() -> None:
    rule = chain(drift=0.01)
    assert rule.lease_sent() == pytest.approx(100.0 - (TICK + 0.05) - 0.01 * T)
    assert rule.lease_end() == pytest.approx(rule.lease_sent() + T)  # type: ignore[operator]


def test_pings_and_reads_alone_never_move_the_lease() -> None:
    rule = chain()
    for i in range(50):  # a member cut off from the leader answers these itself
        rule.answered(101.0 + i * 0.1, 101.001 + i * 0.1, through_leader=False)
    assert anchor(rule) == 100.0


def test_a_request_a_sync_a_tick_later_and_another_sync_prove_the_request() -> None:
    rule = chain()
    rule.answered(101.0, 101.01, through_leader=False)  # A: a ping
    rule.answered(101.3, 101.31, through_leader=True)  # B: a sync 0.29 s after A's answer
    assert anchor(rule) == 100.0  # B alone proves nothing
    rule.answered(101.32, 101.33, through_leader=True)  # D: after B's answer
    assert anchor(rule) == 101.0


def test_a_sync_sent_less_than_a_tick_after_the_request_proves_nothing_of_it() -> None:
    rule = chain()
    rule.answered(101.0, 101.01, through_leader=False)
    rule.answered(101.1, 101.11, through_leader=True)  # only 0.09 s after A's answer
    rule.answered(101.12, 101.13, through_leader=True)
    assert anchor(rule) == 100.0


def test_d_must_be_sent_after_b_was_answered() -> None:
    rule = chain()
    rule.answered(101.0, 101.01, through_leader=False)
    # B and D pipelined: D left before B's answer, so it may precede the ping reply.
    rule.answered(101.3, 101.40, through_leader=True)
    rule.answered(101.35, 101.41, through_leader=True)
    assert anchor(rule) == 100.0


def test_a_proof_that_comes_after_the_lease_ran_out_is_refused() -> None:
    rule = chain()
    end = rule.lease_end()
    assert end is not None
    rule.answered(101.0, 101.01, through_leader=False)
    rule.answered(101.3, 101.31, through_leader=True)
    # D answered only after the lease we had ended: the session may have expired before
    # the leader applied A's touch (a sync is answered OK even then).
    rule.answered(end - 0.01, end + 0.01, through_leader=True)
    assert anchor(rule) == 100.0


def test_a_new_connection_starts_the_chain_afresh() -> None:
    rule = chain()
    rule.answered(101.0, 101.01, through_leader=False)
    rule.answered(101.3, 101.31, through_leader=True)
    rule.connected(101.32, resumed=True)  # another member: B's proof was about the old one
    rule.answered(101.5, 101.51, through_leader=True)
    assert anchor(rule) == 101.32  # the revalidating handshake, not A


def test_a_new_session_forgets_the_old_sessions_proof() -> None:
    rule = chain()
    rule.connected(99.0, resumed=False)
    assert anchor(rule) == 99.0


def test_steady_syncs_keep_a_healthy_lease() -> None:
    rule = chain(drift=0.01)
    interval = rule.renew_interval()
    assert interval > rule.gap
    now = 100.0
    rtt = 0.005
    for _ in range(200):
        now += interval
        rule.answered(now, now + rtt, through_leader=True)
        end = rule.lease_end()
        assert end is not None and end > now + interval + rtt  # the next proof comes in time
    assert rule.sustainable()


def test_the_worst_default_timing_cannot_keep_a_lease_and_says_so() -> None:
    rule = SyncChain(T, 0.01, lease_rule.assumed_timing(T))
    assert rule.timing.assumed and rule.timing.tick == T / 2
    assert not rule.sustainable()


def test_zookeepers_sample_configuration_is_sustainable_with_ten_second_sessions() -> None:
    assert SyncChain(10.0, 0.01, Timing(2.0, "conf")).sustainable()
    assert SyncChain(2.0, 0.01, Timing(0.2, "conf")).sustainable()
    assert SyncChain(4.0, 0.01, Timing(0.4, "conf")).sustainable()


def test_standalone_counts_every_answer_less_the_drift() -> None:
    rule = Standalone(T, 0.01)
    rule.connected(100.0, resumed=False)
    rule.answered(101.0, 101.1, through_leader=False)
    assert rule.lease_sent() == pytest.approx(101.0 - 0.1)
    assert not rule.lagging and rule.renew_interval() is None


def test_merged_answers_count_no_sooner() -> None:
    rule = chain()
    step = 2**-9  # under the 5 ms that merges answers
    rule.answered(101.0, 101.01, through_leader=False)
    rule.answered(101.0 + step, 101.3 - step, through_leader=False)
    rule.answered(101.0 + 2 * step, 101.3, through_leader=False)  # merged with the one before
    rule.answered(101.3 + TICK + 0.001, 101.6, through_leader=True)
    rule.answered(101.61, 101.62, through_leader=True)
    assert anchor(rule) == 101.0 + 2 * step


def test_planted_rules_are_named_and_unknown_names_refused() -> None:
    with pytest.raises(ValueError, match="unknown planted"):
        lease_rule.plant("nonsense")


def test_conf_answers_parse() -> None:
    text = "clientPort=2181\ntickTime=400\ninitLimit=10\nsyncLimit=5\nserverId=1\n"
    timing = parse_four_letter_conf(text, "conf of h:1")
    assert timing == Timing(0.4, "conf of h:1", 5)
    refused = "conf is not executed because it is not in the whitelist.\n"
    assert parse_four_letter_conf(refused, "x") is None
    body = b'{"tick_time": 2000, "client_port": 2181, "command": "configuration"}'
    assert parse_admin_conf(body, "admin") == Timing(2.0, "admin", None)
    assert parse_admin_conf(b"<html>not json</html>", "admin") is None
    assert parse_admin_conf(b'{"tick_time": -5}', "admin") is None


def test_the_shortest_session_the_warning_names_is_the_sustainability_bound() -> None:
    for tick in (0.2, 0.4, 2.0):
        probe = SyncChain(10.0, 0.01, Timing(tick, "conf"))
        shortest = probe.shortest_session()
        assert 4 * tick < shortest < 4.5 * tick + 0.2, (tick, shortest)
        assert SyncChain(shortest * 1.01, 0.01, Timing(tick, "conf")).sustainable()
        assert not SyncChain(shortest * 0.99, 0.01, Timing(tick, "conf")).sustainable()
