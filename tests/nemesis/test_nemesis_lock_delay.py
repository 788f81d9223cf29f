"""The nemesis checker's lock-delay rule on histories written by hand (issue 35).

The rule: after a holder's node went abnormally (its client heard its session expire
before it released), a contender queued behind it before the loss is granted no
earlier than the lock-delay after the holder last said held. A violation planted in a
history must be flagged; a grant after a clean release, a newcomer that first listed
after the loss (not delayed, by design) and runs without ``--lock-delay`` must not be.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nemesis.__main__ import parse_args
from nemesis.checker import Model, abnormal_losses, check, lock_delay_cases
from nemesis.history import Event, History, parse
from nemesis.runner import Options

T0 = 1000.0
DELAY = 2.0
MUTEX = Model("mutex")


def acquisition(
    c: int,
    n: int,
    *,
    invoke: float,
    ok: float,
    token: int,
    queued: float | None = None,
    held: tuple[float, ...] = (),
    release: float | None = None,
) -> list[Event]:
    """One granted acquisition's events (times in seconds after T0)."""
    events: list[Event] = [
        {"c": c, "ev": "invoke", "op": "acquire", "n": n, "kind": "lock", "t": T0 + invoke},
        {"c": c, "ev": "ok", "op": "acquire", "n": n, "t": T0 + ok, "token": token},
    ]
    if queued is not None:
        events.append({"c": c, "ev": "queued", "n": n, "t": T0 + queued})
    events += [{"c": c, "ev": "held", "n": n, "t": T0 + t} for t in held]
    if release is not None:
        events.append({"c": c, "ev": "invoke", "op": "release", "n": n, "t": T0 + release})
        events.append({"c": c, "ev": "ok", "op": "release", "n": n, "t": T0 + release + 0.01})
    return events


def session_lost(c: int, at: float) -> Event:
    return {"c": c, "ev": "session-lost", "t": T0 + at}


def history(*events: Event, lock_delay: float | None = DELAY, workload: str = "lock") -> History:
    params: dict[str, Any] = {"workload": workload, "session_timeout": 4.0}
    if lock_delay is not None:
        params["lock_delay"] = lock_delay
    start: Event = {"c": "runner", "ev": "start", "t": T0, "params": params}
    return parse(sorted([start, *events], key=lambda e: float(e["t"])))


def holder_lost_at_3(release: float = 3.5) -> list[Event]:
    """c0 holds from 0.1, last says held at 2.0; its session expires (heard at 3.0) before
    its release is invoked: the server deleted its node, somewhere in (2.0, 3.0]."""
    return [
        *acquisition(0, 1, invoke=0, ok=0.1, token=10, held=(0.1, 2.0), release=release),
        session_lost(0, 3.0),
    ]


def test_a_queued_successor_granted_within_the_delay_of_an_abnormal_loss_is_flagged() -> None:
    successor = acquisition(1, 1, invoke=0.5, queued=0.6, ok=2.5, token=11, held=(2.5,))
    verdict = check(history(*holder_lost_at_3(), *successor), MUTEX)
    assert dict(verdict.counts) == {"lock-delay": 1}, verdict.violations
    (violation,) = verdict.violations
    assert [h.label for h in violation.holds] == ["c0#1 lock", "c1#1 lock"]
    assert "0.500 s after c0#1 lock (token 10) last said held" in violation.message
    assert (violation.start, violation.end) == (T0 + 0.1, T0 + 2.5)


def test_a_queued_successor_granted_after_the_delay_is_clean() -> None:
    successor = acquisition(1, 1, invoke=0.5, queued=0.6, ok=4.1, token=11, held=(4.1,))
    found = history(*holder_lost_at_3(), *successor)
    assert check(found, MUTEX).ok
    assert len(lock_delay_cases(found, MUTEX)) == 1  # the rule was applied, and held


def test_a_successor_after_a_clean_release_is_granted_at_once() -> None:
    """No session expiry before the release: a clean hand-off, no delay owed, even when
    the session expires later (after the release was invoked)."""
    holder = acquisition(0, 1, invoke=0, ok=0.1, token=10, held=(0.1, 2.0), release=2.0)
    successor = acquisition(1, 1, invoke=0.5, queued=0.6, ok=2.05, token=11, held=(2.05,))
    for extra in ([], [session_lost(0, 2.5)]):
        found = history(*holder, *successor, *extra)
        assert abnormal_losses(found) == []
        assert check(found, MUTEX).ok


def test_a_newcomer_that_first_listed_after_the_loss_is_not_judged() -> None:
    """Documented limit: its first listing has no earlier count to compare with."""
    newcomer = acquisition(1, 1, invoke=2.2, queued=2.3, ok=2.5, token=11, held=(2.5,))
    unqueued = acquisition(2, 1, invoke=0.5, ok=2.6, token=12, held=(2.6,))  # no record
    found = history(*holder_lost_at_3(), *newcomer, *unqueued)
    assert [h.label for h in abnormal_losses(found)] == ["c0#1 lock"]
    assert lock_delay_cases(found, MUTEX) == []
    assert check(found, MUTEX).ok


def test_a_successor_whose_own_session_expired_while_it_waited_is_not_judged() -> None:
    """Its acquire started over with a new node: the recorded first listing is not that
    node's, so nothing proves it listed before the loss."""
    successor = acquisition(1, 1, invoke=0.5, queued=0.6, ok=2.5, token=11, held=(2.5,))
    found = history(*holder_lost_at_3(), *successor, session_lost(1, 1.0))
    assert lock_delay_cases(found, MUTEX) == []
    assert check(found, MUTEX).ok


def test_without_a_lock_delay_or_on_a_shared_lock_the_rule_is_off() -> None:
    successor = acquisition(1, 1, invoke=0.5, queued=0.6, ok=2.5, token=11, held=(2.5,))
    assert check(history(*holder_lost_at_3(), *successor, lock_delay=None), MUTEX).ok
    found = history(*holder_lost_at_3(), *successor, workload="semaphore")
    assert check(found, Model("semaphore", 2)).ok


def test_the_runner_takes_and_repeats_the_lock_delay() -> None:
    args = parse_args(["run", "--minutes", "1", "--out", "/tmp/x", "--lock-delay", "1.5"])
    assert args.lock_delay == 1.5
    options = Options(minutes=1, members=3, workload="lock", out=Path("/tmp/x"), seed=3,
                      lock_delay=1.5)  # fmt: skip
    assert "--lock-delay 1.5" in options.command()
    assert "--lock-delay" not in Options(1, 3, "lock", Path("/tmp/x"), 3).command()
