"""The lease rule on an ensemble (``Connection.lease_sent``), on a clock of our own.

An answer counts once the same connection has brought another ``ensemble_lag`` later;
a handshake counts at once, ``ensemble_lag`` early; a standalone server (lag 0) counts
every answer at once. The integration check is tests/integration/test_ensemble_faults.py.
"""

from __future__ import annotations

from zklocks._transport.connection import Connection


def connection(lag: float) -> Connection:
    conn = Connection("127.0.0.1:2181", session_timeout=10.0, ensemble_lag=lag)
    conn._handshake_sent = 100.0  # answered at once
    return conn


def test_standalone_counts_every_answer() -> None:
    conn = connection(0.0)
    conn._prove(101.0, 101.1)
    assert conn.lease_sent == 101.0


def test_an_answer_counts_once_another_comes_a_lag_later() -> None:
    conn = connection(1.0)
    assert conn.lease_sent == 99.0  # the handshake, a lag early
    conn._prove(101.0, 101.1)
    conn._prove(101.5, 101.6)
    assert conn.lease_sent == 99.0  # nothing a lag newer yet
    conn._prove(102.0, 102.1)  # 1.0 after the first answer: it counts, not the second
    assert conn.lease_sent == 101.0
    conn._prove(103.0, 103.6)
    assert conn.lease_sent == 102.0


def test_answers_close_together_are_proven_no_sooner() -> None:
    conn = connection(1.0)
    step = 2**-8  # under the 5 ms that merges answers; exact in binary
    conn._prove(101.0, 101.5)
    conn._prove(101.0 + step, 101.5 + step)  # merged with the one before, at the later times
    conn._prove(102.0, 102.5)  # 1.0 after the first, but not after the merged one
    assert conn.lease_sent == 99.0
    conn._prove(102.25, 102.5 + step)
    assert conn.lease_sent == 101.0 + step


def test_ping_interval_keeps_a_healthy_lease() -> None:
    conn = connection(2.5)
    conn._set_intervals(10.0)
    # timeout > lag + 2 x interval: a lease proven an interval late still lives
    assert 2.5 + 2 * conn._ping_interval < 10.0
