"""OpenTelemetry spans on a real server: ``zklocks.acquire`` and ``zklocks.hold`` for every
kind (an election term included) and every outcome, with the sync and asyncio clients;
the hold's ends (released, revoked, lost, max_hold) and its events; ``TRACEPARENT`` as a
``zklocks run`` command sees it."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import zklocks
from helpers import KINDS, blocker_kind, expire_session
from otel_support import attributes, named, spans
from zklocks.server import ZooKeeperServer

__all__ = ["spans"]  # the fixture

_ids = itertools.count()


def unique(name: str) -> str:
    return f"/tracing/{name}-{os.getpid()}-{next(_ids)}"


KIND_WORD = {
    "fair": "lock",
    "unfair": "lock",
    "write": "write",
    "read": "read",
    "semaphore": "permit",
    "election": "elect",
}


@pytest.fixture
def other(zk_server: ZooKeeperServer) -> Any:
    with zklocks.Client(zk_server.hosts) as made:
        yield made


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_granted_and_released(kind: str, client: Any, spans: InMemorySpanExporter) -> None:
    path = unique(kind)
    lease = KINDS[kind](client, path).acquire(timeout=5)
    assert named(spans, "zklocks.hold") == []  # still held: its span is open
    lease.release()
    (acquire,) = named(spans, "zklocks.acquire")
    (hold,) = named(spans, "zklocks.hold")
    got = attributes(acquire)
    assert got["zklocks.lock.path"] == path
    assert got["zklocks.lock.kind"] == KIND_WORD[kind]
    assert got["zklocks.lock.layout"] == "zklocks"
    assert got["zklocks.acquire.outcome"] == "granted"
    assert got["zklocks.lock.token"] == lease.token
    assert 0 <= float(got["zklocks.acquire.wait_seconds"]) < 5  # type: ignore[arg-type]
    if kind != "unfair":  # the one-node lock has no line
        assert got["zklocks.acquire.queue_position"] == 1
    held = attributes(hold)
    assert held["zklocks.hold.end_reason"] == "released"
    assert held["zklocks.lock.token"] == lease.token
    assert held["zklocks.lock.node"] == lease.node
    assert [link.context.span_id for link in hold.links] == [acquire.context.span_id]
    scope = acquire.instrumentation_scope
    assert scope is not None and scope.name == "zklocks" and scope.version == zklocks.__version__


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_timeout_names_the_place_in_line(
    kind: str, client: Any, other: Any, spans: InMemorySpanExporter
) -> None:
    path = unique(kind)
    holder = KINDS[blocker_kind(kind)](other, path).acquire(timeout=5)
    spans.clear()
    with pytest.raises(zklocks.LockTimeout):
        KINDS[kind](client, path).acquire(timeout=0.2)
    holder.release()
    (acquire,) = [s for s in named(spans, "zklocks.acquire") if s.attributes]
    got = attributes(acquire)
    assert got["zklocks.acquire.outcome"] == "timeout"
    assert float(got["zklocks.acquire.wait_seconds"]) >= 0.2  # type: ignore[arg-type]
    assert "zklocks.lock.token" not in got
    if kind != "unfair":
        assert got["zklocks.acquire.queue_position"] == 2
    assert [attributes(s)["zklocks.hold.end_reason"] for s in named(spans, "zklocks.hold")] == [
        "released"
    ]  # the blocker's hold only


def test_a_busy_try_is_a_timeout(client: Any, other: Any, spans: InMemorySpanExporter) -> None:
    path = unique("busy")
    holder = other.lock(path).acquire(timeout=5)
    assert client.lock(path).try_acquire() is None
    holder.release()
    outcomes = [attributes(s)["zklocks.acquire.outcome"] for s in named(spans, "zklocks.acquire")]
    assert outcomes == ["granted", "timeout"]


def test_an_error_is_an_error(client: Any, spans: InMemorySpanExporter) -> None:
    # a lock path under an ephemeral node (our own lease's): ZooKeeper refuses the
    # contender's node there, which no retry fixes
    lease = client.lock(unique("ephemeral-parent")).acquire(timeout=5)
    spans.clear()
    with pytest.raises(zklocks.LockError) as caught:
        client.lock(f"{lease.node}/under").acquire(timeout=5)
    lease.release()
    (failed,) = named(spans, "zklocks.acquire")
    assert attributes(failed)["zklocks.acquire.outcome"] == "error"
    assert attributes(failed)["error.type"] == type(caught.value).__name__
    assert not failed.status.is_ok


def test_revoked_lost_and_max_hold_ends(
    zk_server: ZooKeeperServer, client: Any, other: Any, spans: InMemorySpanExporter
) -> None:
    revoked = client.lock(unique("revoked")).acquire(timeout=5)
    asked = threading.Event()
    revoked.add_revoke_callback(lambda _lease: asked.set())
    assert other.revoke(revoked.node.rsplit("/", 1)[0]) == 1
    assert asked.wait(10)
    revoked.release()
    capped = client.lock(unique("capped"), max_hold=0.2).acquire(timeout=5)
    assert capped.wait_lost(timeout=10)
    with zklocks.Client(zk_server.hosts) as doomed:
        lost = doomed.lock(unique("lost")).acquire(timeout=5)
        expire_session(doomed, zk_server.hosts)
        assert lost.wait_lost(timeout=10)
    holds = {attributes(s)["zklocks.lock.token"]: s for s in named(spans, "zklocks.hold")}
    by_revoke = holds[revoked.token]
    assert attributes(by_revoke)["zklocks.hold.end_reason"] == "revoked"
    assert [event.name for event in by_revoke.events] == ["zklocks.revoke_requested"]
    assert attributes(holds[capped.token])["zklocks.hold.end_reason"] == "max_hold"
    assert attributes(holds[capped.token])["zklocks.hold.lost_reason"] == "max_hold"
    assert attributes(holds[lost.token])["zklocks.hold.end_reason"] == "lost"
    assert attributes(holds[lost.token])["zklocks.hold.lost_reason"] == "session_expired"


def test_the_hold_is_in_the_callers_trace(client: Any, spans: InMemorySpanExporter) -> None:
    from opentelemetry import trace

    with trace.get_tracer("test").start_as_current_span("job") as job:
        lease = client.lock(unique("parent")).acquire(timeout=5)
        traceparent = lease.traceparent
        lease.release()
    (acquire,) = named(spans, "zklocks.acquire")
    (hold,) = named(spans, "zklocks.hold")
    for span in (acquire, hold):
        assert span.parent is not None and span.parent.span_id == job.get_span_context().span_id
    flags = int(hold.context.trace_flags)
    assert traceparent == f"00-{hold.context.trace_id:032x}-{hold.context.span_id:016x}-{flags:02x}"
    assert lease.traceparent is None  # released: no hold to join


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_async_outcomes(kind: str, zk_server: ZooKeeperServer, spans: InMemorySpanExporter) -> None:
    path = unique(f"async-{kind}")

    async def main() -> int:
        async with (
            zklocks.AsyncClient(zk_server.hosts) as one,
            zklocks.AsyncClient(zk_server.hosts) as two,
        ):
            lease = await KINDS[kind](one, path).acquire(timeout=5)
            with pytest.raises(zklocks.LockTimeout):
                await KINDS[blocker_kind(kind)](two, path).acquire(timeout=0.2)
            waiting = asyncio.ensure_future(KINDS[blocker_kind(kind)](two, path).acquire())
            await asyncio.sleep(0.3)  # it waits: nothing to await for a flow that blocks
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await lease.release()
            token: int = lease.token
            return token

    token = asyncio.run(main())
    outcomes = [attributes(s)["zklocks.acquire.outcome"] for s in named(spans, "zklocks.acquire")]
    assert sorted(outcomes) == ["cancelled", "granted", "timeout"]
    (hold,) = named(spans, "zklocks.hold")
    assert attributes(hold)["zklocks.lock.token"] == token
    assert attributes(hold)["zklocks.hold.end_reason"] == "released"


NO_PROVIDER = """
import zklocks, zklocks._core.events as events
assert events.tracing is not None  # installed: opentelemetry-api is there
print(events.tracing.acquire("lock", "/x", "zklocks"))
"""


def test_no_provider_no_span() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_PROVIDER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "None\n"


RUN_WITH_A_PROVIDER = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from zklocks.cli import main
try:
    main(sys.argv[1:])
except SystemExit as stop:
    status = stop.code
for span in exporter.get_finished_spans():
    if span.name == "zklocks.hold" and span.parent is not None:
        print(f"parent {span.context.trace_id:032x}-{span.parent.span_id:016x}")
    if span.name == "zklocks.hold":
        ids = f"{span.context.trace_id:032x}-{span.context.span_id:016x}"
        print(f"hold 00-{ids}-{int(span.context.trace_flags):02x}")
sys.exit(status)
"""


def test_a_run_command_sees_the_holds_traceparent(
    zk_server: ZooKeeperServer, tmp_path: Path
) -> None:
    seen = tmp_path / "traceparent"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RUN_WITH_A_PROVIDER), "run", unique("run"),
         "--hosts", zk_server.hosts, "--", "sh", "-c", f'printf %s "$TRACEPARENT" > {seen}'],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "TRACEPARENT": STARTED_BY},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (hold,) = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("hold ")]
    assert seen.read_text() == hold
    # the hold joined the trace of whoever started `zklocks run` (its TRACEPARENT)
    (parent,) = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("parent ")]
    assert parent == "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"
    assert hold.split("-")[1] == "0af7651916cd43dd8448eb211c80319c"


STARTED_BY = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # W3C's example
