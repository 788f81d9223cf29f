"""Node names: parsing, foreign children, integer sequences ordered across the wrap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zklocks._core import nodes as _nodes

A = "0123456789abcdef0123456789abcdef"
B = "fedcba9876543210fedcba9876543210"


def zk_suffix(sequence: int) -> str:
    """What ZooKeeper appends: Java's %010d of a signed 32-bit int."""
    return f"{sequence:010d}" if sequence >= 0 else "-" + f"{-sequence:09d}"


@pytest.mark.parametrize(
    ("name", "kind", "sequence", "permits"),
    [
        (f"lock-{A}-0000000007", "lock", 7, None),
        (f"read-{A}-0000000000", "read", 0, None),
        (f"write-{A}-2147483647", "write", 2**31 - 1, None),
        (f"write-{A}--000000001", "write", -1, None),
        (f"lock-{A}--2147483648", "lock", -(2**31), None),
        (f"lease-3-{A}-0000000012", "permit", 12, 3),
        ("lock", "lock", 0, None),
    ],
)
def test_parse(name: str, kind: str, sequence: int, permits: int | None) -> None:
    node = _nodes.parse(name)
    assert node is not None
    assert (node.kind, node.sequence, node.permits) == (kind, sequence, permits)


@pytest.mark.parametrize(
    "name",
    [
        "zookeeper",
        "lock-",
        f"lock-{A}-12",  # too short a suffix
        f"lock-{A[:-1]}-0000000001",  # short token
        f"mutex-{A}-0000000001",
        f"lease-0-{A}-0000000001",  # permits < 1
        f"lease-{A}-0000000001",  # lease without permits
        f"lock-{A.upper()}-0000000001",
        "_c_1234-lock-0000000001",  # a kazoo/Curator node under the same path
    ],
)
def test_foreign_children_are_not_contenders(name: str) -> None:
    assert _nodes.parse(name) is None


def test_prefix_round_trips_through_parse() -> None:
    for kind in ("lock", "read", "write"):
        node = _nodes.parse(_nodes.sequential_prefix(kind, A) + "0000000042")
        assert node is not None and node.kind == kind and node.attempt == A
    lease = _nodes.parse(_nodes.sequential_prefix("permit", A, permits=5) + "0000000042")
    assert lease is not None and lease.permits == 5


def test_queue_orders_by_integer_not_string() -> None:
    names = [f"lock-{A}-0000000010", f"lock-{B}-0000000009", f"lock-{A}-0000000100"]
    assert [n.sequence for n in _nodes.queue(names)] == [9, 10, 100]


def test_queue_orders_across_the_32_bit_wrap() -> None:
    # Created in this order: 2147483646, 2147483647, then the counter wraps.
    created = [2**31 - 2, 2**31 - 1, -(2**31), -(2**31) + 1]
    names = [f"lock-{A}-{zk_suffix(s)}" for s in reversed(created)]
    names.append("foreign-node")
    assert [n.sequence for n in _nodes.queue(names)] == created


def test_one_node_lock_heads_the_line() -> None:
    line = _nodes.queue([f"write-{A}-0000000001", "lock"])
    assert [n.name for n in line] == ["lock", f"write-{A}-0000000001"]


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.integers(1, 2**31 - 1))
def test_serial_order_is_right_within_half_the_space(start: int, distance: int) -> None:
    later = (start + distance + 2**31) % 2**32 - 2**31
    assert _nodes.sequence_precedes(start, later)
    assert not _nodes.sequence_precedes(later, start)


def test_payload_round_trip_and_foreign_data() -> None:
    payload = _nodes.Payload("me", attempt=A, host="h", pid=7)
    assert _nodes.decode_payload(_nodes.encode_payload(payload)) == payload
    assert _nodes.decode_payload(b"plain text").identifier == "plain text"
    assert _nodes.decode_payload(b"[1,2]").identifier == "[1,2]"


def test_line_up_to_orders_the_whole_line_around_us() -> None:
    me = _nodes.parse(f"write-{A}-0000000005")
    assert me is not None
    children = [
        f"read-{B}-0000000007",  # after us: last
        f"lock-{B}-0000000003",
        "foreign",
        me.name,
        f"read-{B}-0000000001",
        "lock",  # the one-node lock holder heads every line
    ]
    line = _nodes.line_up_to(me, children)
    assert line is not None
    assert [n.name for n in line] == [
        "lock",
        f"read-{B}-0000000001",
        f"lock-{B}-0000000003",
        me.name,
        f"read-{B}-0000000007",
    ]
    assert _nodes.line_up_to(me, [c for c in children if c != me.name]) is None


def test_line_up_to_orders_across_the_wrap() -> None:
    me = _nodes.parse(f"lock-{A}-{zk_suffix(-(2**31) + 1)}")
    assert me is not None
    earlier = [f"lock-{B}-{zk_suffix(s)}" for s in (2**31 - 2, 2**31 - 1, -(2**31))]
    later = [f"lock-{B}-{zk_suffix(-(2**31) + 5)}"]
    line = _nodes.line_up_to(me, [*later, me.name, *reversed(earlier)])
    assert line is not None
    assert [n.name for n in line] == [*earlier, me.name, *later]
