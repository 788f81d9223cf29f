"""The election kind's name and rule, and the multi-lock's order and shared fate (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from flow_support import Stepper, watched
from zklocks._core import dialects as _dialects
from zklocks._core import election as _election
from zklocks._core import multilock as _multilock
from zklocks._core import nodes as _nodes
from zklocks._core.lease import Lease
from zklocks._core.nodes import NodeName
from zklocks._core.ops import TIMED_OUT, Pipeline, Wait
from zklocks._core.strategies import GRANTED, Refused, WaitFor, decide, holders
from zklocks._errors import InvalidArgument
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Exists, GetChildren, NodeData, Stat
from zklocks._vocabulary import SessionFacts, WatchEvent, WatchKind

ATTEMPT = "0123456789abcdef0123456789abcdef"


def elect(seq: int) -> NodeName:
    return NodeName(f"elect-{ATTEMPT}-{seq:010d}", "elect", ATTEMPT, seq)


def test_candidate_names_parse_as_the_elect_kind() -> None:
    prefix = _nodes.sequential_prefix("elect", ATTEMPT)
    parsed = _nodes.parse(f"{prefix}0000000007")
    assert parsed is not None and parsed.kind == "elect" and parsed.sequence == 7


def test_the_head_leads_and_each_candidate_watches_only_its_predecessor() -> None:
    line = [elect(1), elect(2), elect(3)]
    assert decide(line[0], line) == GRANTED
    assert decide(line[1], line) == WaitFor((line[0].name,))
    assert decide(line[2], line) == WaitFor((line[1].name,))  # no herd when the head goes
    assert holders(line) == [line[0]]


@pytest.mark.parametrize("other", ["lock", "read", "write"])
def test_an_election_never_shares_its_path_with_a_lock(other: str) -> None:
    lock = NodeName(f"{other}-{ATTEMPT}-0000000002", other, ATTEMPT, 2)
    line = [elect(1), lock]
    assert isinstance(decide(line[0], line), Refused)
    assert isinstance(decide(lock, line), Refused)


def test_observers_read_only_candidates_in_line_order() -> None:
    children = [elect(5).name, "foreign", elect(3).name]
    assert [node.sequence for node in _election.candidates(children)] == [3, 5]
    assert _election.has_candidates(children) and not _election.has_candidates(["foreign"])


@dataclass(frozen=True)
class Part:
    path: str
    kind: str


def test_multi_lock_order_is_by_path_then_kind_whatever_the_given_order() -> None:
    parts = [Part("/b", "lock"), Part("/a/x", "write"), Part("/a", "permit")]
    assert _multilock.global_order(parts) == [2, 1, 0]
    assert _multilock.global_order(list(reversed(parts))) == [0, 1, 2]


def test_multi_lock_refuses_bad_parts() -> None:
    with pytest.raises(InvalidArgument, match="at least one"):
        _multilock.check_parts([], Part)
    with pytest.raises(InvalidArgument, match="one lock per path"):
        _multilock.check_parts([Part("/a", "read"), Part("/a", "write")], Part)
    with pytest.raises(InvalidArgument, match="takes Part objects"):
        _multilock.check_parts([Part("/a", "lock"), "/b"], Part)
    with pytest.raises(InvalidArgument, match="list of locks"):
        _multilock.check_parts("/a", Part)


def test_one_lost_part_marks_every_part_lost_once() -> None:
    facts = SessionFacts(lambda: 0.0, lambda: 10.0, lambda: None, lambda: True)
    leases = [Lease(f"/p{i}/n", i, facts) for i in range(3)]
    told: list[str] = []
    _multilock.share_fate(leases)
    for lease in leases:
        lease.add_lost_callback(lambda lost: told.append(lost.node))
    leases[1]._mark_lost("deleted", "node_deleted")
    assert all(lease.lost for lease in leases)
    assert sorted(told) == ["/p0/n", "/p1/n", "/p2/n"]
    assert "/p1/n" in (leases[0].lost_reason or "")


# -- an observer's wait for a change, stepped by hand ---------------------------------------

PATH = "/elections/e"


def _observer(leader: str | None, deadline: float | None = 9.0) -> Any:
    return Stepper(_election.await_change(PATH, leader, deadline))


def test_an_observer_watches_only_the_leaders_node_while_someone_leads() -> None:
    node = f"{PATH}/{elect(3).name}"
    s = _observer(node)
    op = s.expect(Pipeline, (NodeData(b"", Stat(czxid=3, ephemeral_owner=1)),))
    assert watched(op) == (node,)
    s.expect(Wait, (WatchEvent(WatchKind.DELETED, node),))
    assert s.done and s.result is True


def test_with_nobody_leading_it_watches_the_children_for_a_candidate() -> None:
    s = _observer(None)
    op = s.expect(Pipeline, (["foreign"],))
    assert isinstance(op.requests[0], GetChildren) and op.watch
    s.expect(Wait, (WatchEvent(WatchKind.CHILD, PATH),))
    assert s.done and s.result is True
    s = _observer(None)
    s.expect(Pipeline, ([elect(1).name],))  # one came between our two reads
    assert s.done and s.result is True


def test_with_no_path_yet_it_watches_for_its_creation() -> None:
    s = _observer(None)
    s.expect(Pipeline, (NoNodeError(),))
    op = s.expect(Pipeline, (None,))
    assert isinstance(op.requests[0], Exists) and op.watch
    s.expect(Wait, (WatchEvent(WatchKind.CREATED, PATH),))
    assert s.done and s.result is True


def test_a_watch_that_could_not_be_set_reads_the_line_again_at_once() -> None:
    s = _observer(None)
    s.expect(Pipeline, (ConnectionLossError(),))  # no watch set: waiting would be for ever
    assert s.done and s.result is True
    s = _observer(None)
    s.expect(Pipeline, (NoNodeError(),))
    s.expect(Pipeline, (SessionExpiredError(),))
    assert s.done and s.result is True


@pytest.mark.parametrize(
    "end", [TIMED_OUT, (WatchEvent(WatchKind.CLOSED, PATH),)], ids=["deadline", "closed"]
)
def test_the_deadline_or_a_stopped_client_ends_the_observation(end: Any) -> None:
    s = _observer(None)
    s.expect(Pipeline, ([],))
    s.expect(Wait, end)
    assert s.done and s.result is False
    s = _observer(None)
    s.expect(Pipeline, (ClientClosedError(),))
    assert s.done and s.result is False


CURATOR_UUID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@pytest.mark.parametrize(
    ("foreign", "whose"),
    [
        (f"_c_{CURATOR_UUID}-latch-0000000000", "Curator's LeaderLatch"),
        (f"_c_{CURATOR_UUID}-lock-0000000000", "Curator's LeaderSelector"),
        (f"{ATTEMPT}__lock__0000000000", "kazoo's Election or Lock"),
    ],
)
def test_an_election_refuses_a_path_holding_another_clients_candidate(
    foreign: str, whose: str
) -> None:
    """Curator's and kazoo's elections ignore our nodes, as we ignore theirs: standing in
    such a path would make two leaders, so a candidate refuses it, ahead or behind."""
    for me in (elect(1), elect(0)):
        line = _dialects.ZKLOCKS.line_up_to(me, [foreign, me.name])
        assert line is not None
        decision = decide(me, line)
        assert isinstance(decision, Refused)
        assert foreign in decision.reason and whose in decision.reason


def test_other_children_stop_no_election_and_foreign_candidates_stop_no_lock() -> None:
    me = elect(1)
    line = _dialects.ZKLOCKS.line_up_to(me, ["config", "notes-0000000002", me.name])
    assert line == [me] and decide(me, line) is GRANTED
    lock = _nodes.parse(f"{_nodes.sequential_prefix('lock', ATTEMPT)}0000000001")
    assert lock is not None
    foreign = f"_c_{CURATOR_UUID}-latch-0000000000"
    assert _dialects.ZKLOCKS.line_up_to(lock, [foreign, lock.name]) == [lock]
