"""The election kind's name and rule, and the multi-lock's order and shared fate (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from zklocks._core import election as _election
from zklocks._core import multilock as _multilock
from zklocks._core import nodes as _nodes
from zklocks._core.errors import InvalidArgument
from zklocks._core.lease import Lease
from zklocks._core.nodes import NodeName
from zklocks._core.strategies import GRANTED, Refused, WaitFor, decide, holders
from zklocks._vocabulary import SessionFacts

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
    parts = [Part("/b", "lock"), Part("/a/x", "write"), Part("/a", "lease")]
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
    assert _multilock.remaining(None, 5.0) is None
    assert _multilock.remaining(4.0, 5.0) == 0.0


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
