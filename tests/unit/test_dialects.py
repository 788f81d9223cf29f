"""Node-name dialects (ours, Curator's, kazoo's), the rules tables, and layouts: what a
contender creates, reads, and how it orders the line as its peer does."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zklocks import InvalidArgument
from zklocks._core import dialects, kinds, layouts
from zklocks._core.nodes import NodeName
from zklocks._core.strategies import (
    CURATOR_RULES,
    GRANTED,
    KAZOO_RULES,
    ZKLOCKS_RULES,
    Rules,
    UnknownKind,
    WaitFor,
)

A = "0123456789abcdef0123456789abcdef"
B = "fedcba9876543210fedcba9876543210"
UA = str(uuid.UUID(hex=A))


def seq(n: int) -> str:
    return f"{n:010d}"


# -- creating and reading ------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "kind", "permits", "prefix"),
    [
        (dialects.ZKLOCKS, "lock", None, f"lock-{A}-"),
        (dialects.ZKLOCKS, "permit", 3, f"lease-3-{A}-"),
        (dialects.CURATOR, "lock", None, f"_c_{UA}-lock-"),
        (dialects.CURATOR, "read", None, f"_c_{UA}-__READ__"),
        (dialects.CURATOR, "write", None, f"_c_{UA}-__WRIT__"),
        (dialects.CURATOR, "permit", 3, f"_c_{UA}-lease-"),
        (dialects.KAZOO, "lock", None, f"{A}__lock__"),
        (dialects.KAZOO, "write", None, f"{A}__lock__"),  # kazoo's Lock and WriteLock: one node
        (dialects.KAZOO, "read", None, f"{A}__rlock__"),
    ],
)
def test_prefix_and_read_round_trip(
    dialect: dialects.Dialect, kind: str, permits: int | None, prefix: str
) -> None:
    assert dialect.prefix(kind, A, permits) == prefix
    node = dialect.read(prefix + seq(42))
    assert node is not None
    assert (node.attempt, node.sequence, node.dialect) == (A, 42, dialect.name)
    assert node.kind == ("write" if dialect is dialects.KAZOO and kind == "lock" else kind)
    assert dialects.read_any(prefix + seq(42)) == node  # every dialect is understood


@pytest.mark.parametrize(
    "name",
    [
        "locks",  # SemaphoreV2's inner directories
        "leases",
        f"_c_{UA}-lock-12",  # too short a suffix
        f"_c_{UA[:-1]}-lock-{seq(1)}",  # not a UUID
        f"{A[:-1]}__lock__{seq(1)}",  # kazoo's token is 32 hex
        f"{A}__lock__",
        f"{A}__wlock__{seq(1)}",
    ],
)
def test_names_no_dialect_reads(name: str) -> None:
    assert dialects.read_any(name) is None


def test_unprotected_curator_names_are_read_without_a_token() -> None:
    node = dialects.CURATOR.read(f"lock-{seq(7)}")
    assert node is not None and (node.kind, node.attempt, node.sequence) == ("lock", "", 7)


def test_a_layout_without_a_kind_refuses_to_name_it() -> None:
    with pytest.raises(ValueError, match="kazoo"):
        dialects.KAZOO.prefix("permit", A, 2)
    with pytest.raises(ValueError, match="kazoo"):
        dialects.KAZOO.prefix("elect", A)


# -- ordering: the peers' own ------------------------------------------------------------


def curator(kind: str, token: str, n: int) -> str:
    return dialects.CURATOR.prefix(kind, token) + seq(n)


def test_curator_counts_every_child_and_sorts_foreign_ones_by_their_whole_name() -> None:
    me = curator("lock", A, 5)
    kazoo_node = f"{B}__lock__{seq(1)}"  # older, but no "lock-" in it: sorts by "fedc..."
    ours_default = f"lock-{B}-{seq(2)}"  # "lock-" at 0: sorts by the hex after it
    early = "!early"  # sorts before any digit: first, for ever
    node = dialects.CURATOR.read(me)
    assert node is not None
    line = dialects.CURATOR.line_up_to(node, [kazoo_node, me, ours_default, early])
    assert line is not None
    assert [n.name for n in line] == [early, me, ours_default, kazoo_node]
    assert [n.kind for n in line] == ["foreign", "lock", "foreign", "foreign"]
    assert dialects.CURATOR.line_up_to(node, [kazoo_node]) is None  # we are gone


def test_a_curator_election_candidate_is_a_leader_latch_node_in_latch_order() -> None:
    """LeaderLatch (LAYOUTS.md, section 9): ``_c_<uuid>-latch-<seq>``, every child in line
    ordered by the text after the last ``latch-``; the first leads, each waits for the one
    just before it."""
    mine, theirs, later = curator("elect", A, 4), curator("elect", B, 2), curator("elect", B, 7)
    assert mine == f"_c_{uuid.UUID(hex=A)}-latch-{seq(4)}"
    me = dialects.CURATOR.read(mine)
    assert me is not None and me.kind == "elect" and me.attempt == A and me.sequence == 4
    line = dialects.CURATOR.line_up_to(me, [later, mine, f"lock-{A}-{seq(1)}", theirs])
    assert line is not None
    assert [n.name for n in line] == [theirs, mine, later, f"lock-{A}-{seq(1)}"]
    assert CURATOR_RULES.decide(me, line) == WaitFor((theirs,))
    assert CURATOR_RULES.decide(line[0], line) == GRANTED
    assert layouts.choose("curator", kinds.ELECT) is layouts.CURATOR


def test_a_leader_selector_candidate_is_a_curator_mutex_node() -> None:
    """LeaderSelector stands in an InterProcessMutex: ``_c_<uuid>-lock-<seq>`` nodes read
    as candidates, every child in ``lock-`` order, the first leads."""
    selector = dialects.CURATOR_SELECTOR
    mine = selector.prefix("elect", A) + seq(4)
    theirs = dialects.CURATOR.prefix("lock", B) + seq(2)
    assert mine == curator("lock", A, 4)
    me = selector.read(mine)
    assert me is not None and me.kind == "elect" and me.dialect == "curator-selector"
    assert selector.read(curator("elect", B, 1)) is None  # a LeaderLatch node is not one
    line = selector.line_up_to(me, [mine, theirs])
    assert line is not None and [n.name for n in line] == [theirs, mine]
    assert CURATOR_RULES.decide(me, line) == WaitFor((theirs,))
    assert layouts.choose("curator-selector", kinds.ELECT) is layouts.CURATOR_SELECTOR
    with pytest.raises(InvalidArgument, match="curator-selector layout has no"):
        layouts.choose("curator-selector", kinds.LOCK)


def test_curator_read_write_order_and_who_is_a_writer() -> None:
    r1, w2, r3 = curator("read", A, 1), curator("write", B, 2), curator("read", B, 3)
    me = dialects.CURATOR.read(r3)
    assert me is not None
    line = dialects.CURATOR.line_up_to(me, [r3, r1, w2, f"x__WRIT__{seq(0)}"])
    assert line is not None
    assert [n.name for n in line] == [f"x__WRIT__{seq(0)}", r1, w2, r3]
    assert [n.kind for n in line] == ["write", "read", "write", "read"]  # by "__WRIT__"
    assert CURATOR_RULES.decide(me, line) == WaitFor((w2,))  # the nearest writer


@given(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=12, unique=True))
def test_peer_string_order_is_sequence_order_before_the_wrap(sequences: list[int]) -> None:
    for dialect, kind in ((dialects.CURATOR, "lock"), (dialects.KAZOO, "write")):
        names = [dialect.prefix(kind, uuid.uuid4().hex) + seq(n) for n in sequences]
        me = dialect.read(names[0])
        assert me is not None
        line = dialect.line_up_to(me, names)
        assert line is not None
        assert [n.sequence for n in line] == sorted(sequences)


def test_kazoo_sees_only_its_own_markers() -> None:
    me = f"{A}__rlock__{seq(9)}"
    node = dialects.KAZOO.read(me)
    assert node is not None
    children = [me, f"{B}__lock__{seq(3)}", curator("write", B, 1), f"lock-{B}-{seq(2)}"]
    line = dialects.KAZOO.line_up_to(node, children)
    assert line is not None
    assert [n.sequence for n in line] == [3, 9]
    assert KAZOO_RULES.decide(node, line) == WaitFor((f"{B}__lock__{seq(3)}",))


def test_contenders_of_every_dialect_are_listed_in_creation_order() -> None:
    names = [curator("lock", A, 4), f"{B}__lock__{seq(2)}", f"read-{A}-{seq(3)}", "locks"]
    line = dialects.line_of_any(names)
    assert [(n.dialect, n.sequence) for n in line] == [("kazoo", 2), ("zklocks", 3), ("curator", 4)]


def test_holders_are_judged_by_each_contenders_own_layout() -> None:
    c1, c2 = curator("lock", A, 1), curator("lock", B, 2)
    k3 = f"{A}__lock__{seq(3)}"
    children = [c1, c2, k3]
    read = dialects.line_of_any(children)
    # Curator's first holds; kazoo sees no other kazoo node, so it holds too: two
    # holders at once on a path used by two layouts, shown as they are
    assert layouts.holders(read, children) == {c1, k3}


# -- the rules tables -------------------------------------------------------------------


def test_an_unknown_kind_raises_instead_of_borrowing_a_rule() -> None:
    stranger = NodeName("x", "mutex", "", 1)
    for rules in (ZKLOCKS_RULES, CURATOR_RULES, KAZOO_RULES):
        with pytest.raises(UnknownKind, match="mutex"):
            rules.decide(stranger, [stranger])
    with pytest.raises(UnknownKind):
        KAZOO_RULES.decide(NodeName("l", "permit", "", 1, 2), [])


def test_every_kind_we_create_has_a_rule_in_its_layout() -> None:
    for layout in layouts.LAYOUTS.values():
        for kind in layout.dialect.kinds:
            name = layout.dialect.prefix(kind, A, 2) + seq(1)
            me = dialects.with_permits(layout.dialect.read(name), 2)  # type: ignore[arg-type]
            line = layout.dialect.line_up_to(me, [name])
            assert line is not None
            assert layout.rules.decide(me, line) == GRANTED, (layout, kind)


def test_semaphore_v2_counts_every_lease_child_its_own_included() -> None:
    names = [curator("permit", uuid.uuid4().hex, n) for n in range(3)]
    me = dialects.with_permits(dialects.CURATOR.read(names[2]), 2)  # type: ignore[arg-type]
    line = dialects.CURATOR.line_up_to(me, [*names, "someone-else"])
    assert line is not None
    others = tuple(sorted([names[0], names[1], "someone-else"]))
    assert CURATOR_RULES.decide(me, line) == WaitFor(others)  # 4 children > 2
    three = [n for n in line if n.name != "someone-else"]
    assert CURATOR_RULES.decide(me, three) == WaitFor(tuple(sorted(names[:2])))
    assert CURATOR_RULES.decide(me, [n for n in line if n.name in names[1:]]) == GRANTED


def test_curator_readers_ignore_mutex_nodes_but_writers_do_not() -> None:
    lock1, r2, w3 = curator("lock", A, 1), curator("read", A, 2), curator("write", B, 3)
    reader, writer = dialects.CURATOR.read(r2), dialects.CURATOR.read(w3)
    assert reader is not None and writer is not None
    line = dialects.CURATOR.line_up_to(reader, [lock1, r2, w3])
    assert line is not None
    assert CURATOR_RULES.decide(reader, line) == GRANTED
    assert CURATOR_RULES.decide(writer, line) == WaitFor((r2,))


def test_planted_rules_apply_to_every_kind() -> None:
    planted = Rules.everywhere("planted", lambda me, queue: GRANTED, kinds.NAMES)
    for kind in kinds.NAMES:
        me = NodeName("n", kind, "", 1, 2)
        assert planted.decide(me, [me]) == GRANTED


# -- layouts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "fair", "message"),
    [
        ("kazoo", "permit", True, "kazoo layout has no semaphore"),
        ("curator", "lock", False, "no one-node lock"),
        ("kazoo", "lock", False, "no one-node lock"),
        ("kazoo", "elect", True, "has no leader election"),
        ("Curator", "lock", True, "layout must be one of"),
        (None, "lock", True, "layout must be one of"),
    ],
)
def test_a_layout_refuses_what_it_lacks(name: object, kind: str, fair: bool, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("no a ", "no an? ")):
        layouts.choose(name, kinds.of(kind), fair=fair)


def test_the_clients_refuse_a_missing_kind_before_any_request() -> None:
    import zklocks

    client = zklocks.Client("127.0.0.1:1")  # never started: no request can be made
    with pytest.raises(InvalidArgument, match="semaphore"):
        client.semaphore("/x", permits=2, layout="kazoo")
    with pytest.raises(InvalidArgument, match="one-node"):
        client.lock("/x", fair=False, layout="curator")
    with pytest.raises(InvalidArgument, match="layout"):
        client.read_write_lock("/x", layout="etcd")
    assert client.lock("/x", layout="kazoo").path == "/x"
