"""The hold span's events and ends as the lease and its keeper report them (a recorded
hold in place of OpenTelemetry's span: what is asked of it, in order)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers import lease_on
from zklocks._core import events
from zklocks._core.lease_keeper import LeaseKeeper
from zklocks._vocabulary import SessionState


class RecordedHold:
    def __init__(self) -> None:
        self.said: list[tuple[str, ...]] = []

    def event(self, name: str) -> None:
        self.said.append(("event", name))

    def end(self, reason: str, lost: str | None) -> None:
        self.said.append(("end", reason, str(lost)))

    def traceparent(self) -> str | None:
        return "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


class RecordedAcquire:
    def __init__(self) -> None:
        self.holds: list[RecordedHold] = []

    def finished(
        self, outcome: str, position: int | None, token: int | None, error: str | None
    ) -> None:
        raise AssertionError("not in these tests")

    def hold(self, kind: str, path: str, token: int, node: str) -> RecordedHold:
        self.holds.append(RecordedHold())
        return self.holds[-1]


@pytest.fixture
def traced() -> Iterator[None]:
    before = events.tracing
    events.tracing = object()  # type: ignore[assignment]  # "installed": the keeper looks
    yield
    events.tracing = before


def test_suspended_and_resumed_are_events_of_each_held_lease(traced: None) -> None:
    keeper = LeaseKeeper(lambda: None, lambda delay, fn: lambda: None)
    acquire = RecordedAcquire()
    held, released = lease_on(), lease_on(node="/locks/a/lock-0000000002")
    for lease in (held, released):
        lease._label("lock", "/locks/a", acquire)  # type: ignore[arg-type]
        keeper.track(lease, lambda node, watcher: None)
    released._end()
    keeper.on_state(SessionState.CONNECTED)  # a first connection resumes nothing
    keeper.on_state(SessionState.SUSPENDED)
    keeper.on_state(SessionState.CONNECTED)
    assert held.traceparent is not None and held.traceparent.startswith("00-")
    keeper.on_state(SessionState.LOST)
    first, second = acquire.holds
    assert first.said == [
        ("event", "zklocks.suspended"),
        ("event", "zklocks.resumed"),
        ("end", "lost", "session_expired"),
    ]
    assert second.said == [("end", "released", "None")]
    assert held.traceparent is None  # ended: nothing to join


def test_a_revoked_hold_ends_as_revoked() -> None:
    acquire = RecordedAcquire()
    lease = lease_on()
    lease._label("lock", "/locks/a", acquire)  # type: ignore[arg-type]
    lease._data_seen(b'{"revoke": true}')
    lease._end()
    assert acquire.holds[0].said == [
        ("event", "zklocks.revoke_requested"),
        ("end", "revoked", "None"),
    ]


def test_an_unusable_api_costs_nothing_and_breaks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``opentelemetry`` left half-installed (its folder without ``trace``): no span,
    the hooks remove themselves, and the acquire goes on (a benchmark run found it)."""
    import sys

    from zklocks import tracing

    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # its import fails
    if "opentelemetry" in sys.modules:  # imported by an earlier test: forget its `trace`
        monkeypatch.delattr(sys.modules["opentelemetry"], "trace", raising=False)
    monkeypatch.setattr(events, "tracing", None)
    assert not tracing.install()  # found without importing it: not there
    hooks = tracing._OtelTracing()
    monkeypatch.setattr(events, "tracing", hooks)
    assert hooks.acquire("lock", "/x", "zklocks") is None
    assert events.tracing is None
