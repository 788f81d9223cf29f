"""Curator's two-stage semaphore keeps its lease node in the session of its mutex node.

Simulator seed 57567 (``--layout curator --families semaphore``): the session that held
the mutex expired while the lease's create was retried; the lease node was made in the
new session, by a contender that no longer held the mutex, and waited beside the new
mutex holder's lease node: with one permit each waited for the other, for ever.
"""

from __future__ import annotations

import uuid

from flow_support import ATTEMPT, PATH, SESSION, Stepper, spec
from zklocks._core import layouts
from zklocks._core.flow import Acquired, acquire
from zklocks._core.ops import Pipeline, SessionId
from zklocks._protocol.errors import NoNodeError
from zklocks._protocol.records import Created, Delete, Stat

UUID = str(uuid.UUID(hex=ATTEMPT))


def ours(seq: int, marker: str) -> str:
    return f"_c_{UUID}-{marker}-{seq:010d}"


def made(path: str, czxid: int, session: int = SESSION) -> Created:
    return Created(path, Stat(czxid=czxid, ephemeral_owner=session))


def test_a_lease_node_made_after_the_mutex_session_ended_is_deleted_and_it_starts_over() -> None:
    s = Stepper(acquire(spec(layout=layouts.CURATOR, kind="permit", permits=1)))
    mutex = f"{PATH}/locks/{ours(0, 'lock')}"
    s.expect(Pipeline, (made(mutex, 5), [ours(0, "lock")]))  # the mutex, in SESSION
    stray = f"{PATH}/leases/{ours(3, 'lease')}"
    # the lease is made in a new session: the old one expired, and the mutex with it
    s.expect(Pipeline, (made(stray, 9, SESSION + 1), [ours(3, "lease")]))
    assert s.expect(Delete, None).path == stray  # never waits beside the mutex holder's
    assert s.expect(Delete, NoNodeError()).path == mutex  # gone with its session
    again = f"{PATH}/locks/{ours(4, 'lock')}"
    op = s.expect(Pipeline, (made(again, 10, SESSION + 1), [ours(4, "lock")]))
    assert op.requests[0].path == f"{PATH}/locks/_c_{UUID}-lock-"  # from the mutex again
    lease = f"{PATH}/leases/{ours(5, 'lease')}"
    s.expect(Pipeline, (made(lease, 11, SESSION + 1), [ours(5, "lease")]))
    assert s.expect(Delete, None).path == again
    s.expect(SessionId, SESSION + 1)
    assert s.done and s.result == Acquired(lease, 11, SESSION + 1)
