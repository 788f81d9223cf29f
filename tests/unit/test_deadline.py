"""``Deadline``: one instant per call, read on the clock it was made on (no I/O, no sleeps)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest

import zklocks
from helpers import run_scenario
from zklocks._core.deadline import NEVER, Deadline
from zklocks._core.validate import FOREVER
from zklocks._errors import InvalidArgument
from zklocks.sim import SimServer, async_session_factory, session_factory


class FakeClock:
    """A clock the test moves by hand, as the simulator's scheduler moves its own."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_after_counts_from_now_on_the_given_clock() -> None:
    clock = FakeClock(100.0)
    deadline = Deadline.after(2.5, clock=clock)
    assert deadline.at == 102.5
    assert deadline.clock is clock
    assert not deadline.never


def test_remaining_shrinks_as_the_clock_moves_and_stops_at_zero() -> None:
    clock = FakeClock(10.0)
    deadline = Deadline.after(3, clock=clock)
    assert deadline.remaining() == 3.0
    clock.now = 12.0
    assert deadline.remaining() == 1.0
    clock.now = 13.0
    assert deadline.remaining() == 0.0
    clock.now = 50.0
    assert deadline.remaining() == 0.0  # never negative: a wait of 0 is the shortest


def test_passed_from_the_instant_itself_on() -> None:
    clock = FakeClock(0.0)
    deadline = Deadline.after(1.0, clock=clock)
    assert not deadline.passed()
    clock.now = 0.999
    assert not deadline.passed()
    clock.now = 1.0
    assert deadline.passed()
    clock.now = 7.0
    assert deadline.passed()


def test_a_zero_timeout_has_passed_at_once() -> None:
    clock = FakeClock(5.0)
    deadline = Deadline.after(0, clock=clock)
    assert deadline.passed() and deadline.remaining() == 0.0


def test_a_deadline_made_earlier_reads_on_its_own_clock() -> None:
    """An operation carries the bare instant; the driver wraps it with its session's clock."""
    clock = FakeClock(20.0)
    carried = Deadline.after(4.0, clock=clock).at
    clock.now = 23.0
    rewrapped = Deadline(carried, clock)
    assert rewrapped.remaining() == 1.0 and not rewrapped.passed()


@pytest.mark.parametrize("timeout", [None, math.inf, FOREVER, FOREVER * 10])
def test_no_timeout_or_a_timeout_beyond_any_clock_is_never(timeout: float | None) -> None:
    clock = FakeClock(1.0)
    deadline = Deadline.after(timeout, clock=clock)
    assert deadline.never and deadline.at is None
    clock.now = 1e18
    assert deadline.remaining() is None
    assert not deadline.passed()


def test_never_is_the_deadline_of_no_timeout() -> None:
    assert NEVER.never and NEVER.remaining() is None and not NEVER.passed()
    assert Deadline.after(None) == NEVER  # on the default clock


def test_the_default_clock_is_the_monotonic_one() -> None:
    before = time.monotonic()
    deadline = Deadline.after(60.0)
    assert deadline.clock is time.monotonic
    assert deadline.at is not None and before + 60.0 <= deadline.at <= time.monotonic() + 60.0
    remaining = deadline.remaining()
    assert remaining is not None and 0.0 < remaining <= 60.0


@pytest.mark.parametrize("timeout", [-1, -0.001, math.nan, -math.inf])
def test_a_negative_or_nan_timeout_is_refused_as_acquire_refuses_it(timeout: float) -> None:
    with pytest.raises(InvalidArgument, match=r"^timeout must be >= 0, not "):
        Deadline.after(timeout, clock=FakeClock())


@pytest.mark.parametrize("timeout", ["5", b"5", True, [1.0]])
def test_a_timeout_that_is_not_a_number_is_refused(timeout: object) -> None:
    with pytest.raises(InvalidArgument, match="timeout must be a number of seconds or None"):
        Deadline.after(timeout, clock=FakeClock())  # type: ignore[arg-type]


def test_a_deadline_is_a_value() -> None:
    clock = FakeClock()
    deadline = Deadline.after(1.0, clock=clock)
    assert deadline == Deadline(deadline.at, clock)
    with pytest.raises(AttributeError):
        deadline.at = 0.0  # type: ignore[misc]


# -- the locks make their deadline on their session's clock -----------------------------

AHEAD = 1e6  # a session clock this far from time.monotonic: a mixed-up reading is plain
TIMEOUT = 0.3


def _far_clock() -> float:
    return time.monotonic() + AHEAD


def _times_out_after_its_timeout(call: Callable[[], object]) -> None:
    """``call()`` raises LockTimeout, neither at once nor never, but after ``TIMEOUT``."""
    began = time.monotonic()
    with pytest.raises(zklocks.LockTimeout):
        call()
    took = time.monotonic() - began
    assert TIMEOUT <= took < TIMEOUT + 5, took


def test_an_acquire_times_its_wait_on_the_clock_of_its_session() -> None:
    """A deadline made on time.monotonic and read on the session's clock would pass at
    once; the operations make it on ``session.facts.clock``, as the driver reads it."""
    server = SimServer(clock=_far_clock)
    with zklocks.Client("sim:a", session_factory=session_factory(server)) as holder:
        blocker = holder.lock("/deadline/a")
        blocker.acquire()
        with zklocks.Client("sim:a", session_factory=session_factory(server)) as client:
            lock = client.lock("/deadline/a")
            _times_out_after_its_timeout(lambda: lock.acquire(timeout=TIMEOUT))
            multi = client.multi_lock([client.lock("/deadline/0"), client.lock("/deadline/a")])
            _times_out_after_its_timeout(lambda: multi.acquire(timeout=TIMEOUT))
            assert server.children("/deadline/0") == []  # the part taken was given back
        assert len(server.children("/deadline/a")) == 1  # the holder's node only
        blocker.release()


def test_a_wait_for_change_ends_on_the_clock_of_its_session() -> None:
    server = SimServer(clock=_far_clock)
    with zklocks.Client("sim:a", session_factory=session_factory(server)) as client:
        lock = client.lock("/deadline/quiet")
        began = time.monotonic()
        assert lock.wait_for_change(timeout=TIMEOUT) is False  # nobody came or went
        took = time.monotonic() - began
        assert TIMEOUT <= took < TIMEOUT + 5, took


def test_an_async_acquire_and_wait_time_out_on_the_clock_of_their_session() -> None:
    """The asyncio driver reads the session's clock too (it read time.monotonic: an op's
    deadline, made on the session's clock, had then passed at once or never came)."""
    server = SimServer(clock=_far_clock)
    factory = async_session_factory(server)

    async def scenario() -> None:
        async with (
            zklocks.AsyncClient("sim:a", session_factory=factory) as holder,
            zklocks.AsyncClient("sim:a", session_factory=factory) as client,
        ):
            await holder.lock("/deadline/async").acquire()
            lock = client.lock("/deadline/async")
            for call in (
                lambda: lock.acquire(timeout=TIMEOUT),
                lambda: lock.wait_for_change(timeout=TIMEOUT),
            ):
                began = time.monotonic()
                try:
                    outcome = await call()
                except zklocks.LockTimeout:
                    outcome = False
                took = time.monotonic() - began
                assert outcome is False and TIMEOUT <= took < TIMEOUT + 5, (outcome, took)

    run_scenario(scenario)
