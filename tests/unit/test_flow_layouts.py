"""The acquire flow in the peers' layouts, stepped by hand: the peer's names, its line,
protected create by the peer's attempt token, and SemaphoreV2's two stages."""

from __future__ import annotations

import uuid

import pytest

from flow_support import ATTEMPT, PATH, SESSION, Stepper, spec, watched
from zklocks._core import layouts
from zklocks._core.flow import Acquired, acquire
from zklocks._core.ops import TIMED_OUT, Pipeline, SessionId
from zklocks._errors import LockTimeout
from zklocks._protocol.errors import (
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Created, Delete, Exists, GetChildren, Stat

UUID = str(uuid.UUID(hex=ATTEMPT))
OTHER_UUID = str(uuid.uuid4())


def ours(seq: int, marker: str = "lock-") -> str:
    return f"_c_{UUID}-{marker}{seq:010d}"


def curators(seq: int, marker: str = "lock-") -> str:
    return f"_c_{OTHER_UUID}-{marker}{seq:010d}"


def made(path: str, czxid: int = 100) -> Created:
    return Created(path, Stat(czxid=czxid, ephemeral_owner=SESSION))


def test_curator_layout_creates_curators_name_and_waits_in_curators_line() -> None:
    s = Stepper(acquire(spec(layout=layouts.CURATOR)))
    kazoo_node = f"{'f' * 32}__lock__0000000001"  # Curator sorts it last: not ahead of us
    op = s.expect(Pipeline, (made(f"{PATH}/{ours(3)}"), [curators(2), ours(3), kazoo_node]))
    assert op.requests[0].path == f"{PATH}/_c_{UUID}-lock-"
    watch, _ = s.wait(TIMED_OUT)
    assert watched(watch) == (f"{PATH}/{curators(2)}",)
    with pytest.raises(LockTimeout):
        s.expect(Delete, None)  # timed out: our node goes, then the error


def test_curator_layout_finds_its_node_by_its_uuid_after_a_lost_create() -> None:
    s = Stepper(acquire(spec(layout=layouts.CURATOR)))
    s.expect(Pipeline, (ConnectionLossError(), ConnectionLossError()))
    s.expect(GetChildren, [curators(1), ours(2)])
    s.expect(Exists, Stat(czxid=9, ephemeral_owner=SESSION))
    s.expect(SessionId, SESSION)
    watch, _ = s.wait(TIMED_OUT)  # adopted; curators(1) is ahead of it
    assert watched(watch) == (f"{PATH}/{curators(1)}",)
    assert s.op.path == f"{PATH}/{ours(2)}"  # timed out: the adopted node is deleted
    with pytest.raises(LockTimeout):
        s.expect(Delete, None)


def test_kazoo_layout_names_and_orders_as_kazoo() -> None:
    s = Stepper(acquire(spec(layout=layouts.KAZOO, kind="read")))
    theirs_write = f"{'e' * 32}__lock__0000000004"
    mine = f"{ATTEMPT}__rlock__0000000005"
    reader = f"{'d' * 32}__rlock__0000000001"
    op = s.expect(Pipeline, (made(f"{PATH}/{mine}"), [mine, theirs_write, reader]))
    assert op.requests[0].path == f"{PATH}/{ATTEMPT}__rlock__"
    watch, _ = s.wait(TIMED_OUT)
    assert watched(watch) == (f"{PATH}/{theirs_write}",)  # the nearest earlier __lock__
    with pytest.raises(LockTimeout):
        s.expect(Delete, None)


@pytest.mark.parametrize("blocking", [True, False])
def test_semaphore_v2_holds_the_mutex_while_it_waits_and_deletes_both_on_the_way_out(
    blocking: bool,
) -> None:
    s = Stepper(acquire(spec(layout=layouts.CURATOR, kind="permit", permits=1, blocking=blocking)))
    # stage 1: the mutex at path/locks
    op = s.expect(Pipeline, (made(f"{PATH}/locks/{ours(0)}", 5), [ours(0)]))
    assert op.requests[0].path == f"{PATH}/locks/_c_{UUID}-lock-"
    # stage 2: the lease, counted with every child of path/leases
    lease, held = ours(7, "lease-"), curators(6, "lease-")
    op = s.expect(Pipeline, (made(f"{PATH}/leases/{lease}", 8), [held, lease]))
    assert op.requests[0].path == f"{PATH}/leases/_c_{UUID}-lease-"
    if blocking:
        watch, _ = s.wait(TIMED_OUT)  # waiting, still holding the mutex
        assert watched(watch) == (f"{PATH}/leases/{held}",)
    first = s.expect(Delete, None)
    assert first.path == f"{PATH}/leases/{lease}"
    assert isinstance(s.op, Delete) and s.op.path == f"{PATH}/locks/{ours(0)}"  # then the mutex
    if blocking:
        with pytest.raises(LockTimeout):
            s.expect(Delete, None)
    else:
        s.expect(Delete, None)
        assert s.done and s.result is None


def test_semaphore_v2_grant_is_the_lease_node_and_lets_the_mutex_go() -> None:
    s = Stepper(acquire(spec(layout=layouts.CURATOR, kind="permit", permits=2)))
    s.expect(Pipeline, (made(f"{PATH}/locks/{ours(0)}", 5), [ours(0)]))
    lease = ours(7, "lease-")
    s.expect(Pipeline, (made(f"{PATH}/leases/{lease}", 8), [curators(6, "lease-"), lease]))
    op = s.expect(Delete, None)
    assert op.path == f"{PATH}/locks/{ours(0)}"
    s.expect(SessionId, SESSION)  # still the session of the lease node
    assert s.done and s.result == Acquired(f"{PATH}/leases/{lease}", 8, SESSION)


def test_semaphore_v2_whose_session_ends_while_it_lets_the_mutex_go_starts_over() -> None:
    s = Stepper(acquire(spec(layout=layouts.CURATOR, kind="permit", permits=2)))
    s.expect(Pipeline, (made(f"{PATH}/locks/{ours(0)}", 5), [ours(0)]))
    lease = ours(7, "lease-")
    s.expect(Pipeline, (made(f"{PATH}/leases/{lease}", 8), [lease]))
    s.expect(Delete, ConnectionLossError())  # the reply is lost; meanwhile the session ends
    s.expect(Delete, NoNodeError())  # gone with it
    s.expect(SessionId, SESSION + 1)  # a new session: our lease node is gone too
    op = s.expect(Pipeline, (made(f"{PATH}/locks/{ours(9)}", 12), [ours(9)]))
    assert op.requests[0].path == f"{PATH}/locks/_c_{UUID}-lock-"  # from the mutex again
    s.expect(Pipeline, (made(f"{PATH}/leases/{ours(10, 'lease-')}", 13), [ours(10, "lease-")]))
    s.expect(Delete, None)
    s.expect(SessionId, SESSION)
    assert s.done and s.result.token == 13


def test_semaphore_v2_whose_lease_goes_while_waiting_starts_over_from_the_mutex() -> None:
    """Never a second lease node beside the mutex holder's: both would wait for ever."""
    s = Stepper(acquire(spec(layout=layouts.CURATOR, kind="permit", permits=1)))
    s.expect(Pipeline, (made(f"{PATH}/locks/{ours(0)}", 5), [ours(0)]))
    lease, held = ours(7, "lease-"), curators(6, "lease-")
    s.expect(Pipeline, (made(f"{PATH}/leases/{lease}", 8), [held, lease]))
    s.wait(SessionExpiredError())  # the session (and both nodes) went
    s.expect(SessionId, SESSION + 1)  # a new session: it was the lease node's
    gone = s.expect(Delete, SessionExpiredError())
    assert gone.path == f"{PATH}/locks/{ours(0)}"
    op = s.expect(Pipeline, (made(f"{PATH}/locks/{ours(9)}", 12), [curators(8), ours(9)]))
    assert op.requests[0].path == f"{PATH}/locks/_c_{UUID}-lock-"  # the mutex first
    watch, _ = s.wait(TIMED_OUT)
    assert watched(watch) == (f"{PATH}/locks/{curators(8)}",)
    with pytest.raises(LockTimeout):
        s.expect(Delete, None)


@pytest.mark.parametrize(("layout", "container"), [(layouts.CURATOR, True), (layouts.KAZOO, False)])
def test_missing_parents_are_made_as_the_peer_makes_them(
    layout: layouts.Layout, container: bool
) -> None:
    """Curator's are containers; kazoo's persistent (a reaped one breaks kazoo's objects)."""
    s = Stepper(acquire(spec(layout=layout)))
    s.expect(Pipeline, (NoNodeError(), NoNodeError()))
    op = s.expect(Pipeline, (NodeExistsError(), Created(PATH, Stat(czxid=3))))
    assert [(c.path, c.container) for c in op.requests] == [
        ("/locks", container),
        (PATH, container),
    ]
    name = layout.dialect.prefix("lock", ATTEMPT) + "0000000000"
    s.expect(Pipeline, (made(f"{PATH}/{name}"), [name]))
    assert s.done
