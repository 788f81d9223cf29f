"""Who blocks whom, as tables, including the seed 003 read/write timeline."""

from __future__ import annotations

import itertools

import pytest

from zklocks._core.nodes import NodeName
from zklocks._core.strategies import GRANTED, Refused, WaitFor, decide, holders


def line(spec: str, permits: int | None = None) -> list[NodeName]:
    """'R W L S' -> nodes read/write/lock/lease with sequences 1, 2, 3..."""
    kinds = {"R": "read", "W": "write", "L": "lock", "S": "permit"}
    return [
        NodeName(
            f"{kinds[k]}-{i}",
            kinds[k],
            "",
            i,
            permits if k == "S" else None,
        )
        for i, k in enumerate(spec.split(), start=1)
    ]


@pytest.mark.parametrize(
    ("spec", "index", "expected"),
    [
        ("L", 0, GRANTED),
        ("L L", 1, WaitFor(("lock-1",))),
        ("L L L", 2, WaitFor(("lock-2",))),  # only the immediate predecessor: no herd
        ("W", 0, GRANTED),
        ("R W", 1, WaitFor(("read-1",))),  # a writer waits for the node before it
        ("R R", 1, GRANTED),  # readers share
        ("W R", 1, WaitFor(("write-1",))),
        ("W R R", 2, WaitFor(("write-1",))),  # a reader waits for the nearest earlier writer
        ("W W R", 2, WaitFor(("write-2",))),
        ("W R W R", 3, WaitFor(("write-3",))),  # never a *later* writer (kazoo #649)
        ("L R", 1, WaitFor(("lock-1",))),  # a plain lock excludes readers too
    ],
)
def test_exclusive_and_read_rules(spec: str, index: int, expected: object) -> None:
    queue = line(spec)
    assert decide(queue[index], queue) == expected


def test_seed_003_timeline() -> None:
    """R1 R2 R3 W4 W5 R6 W7: who holds and whom each waiter watches, step by step."""
    queue = line("R R R W W R W")
    names = [n.name for n in queue]
    assert [n.name for n in holders(queue)] == names[:3]
    expected_waits = {
        "write-4": ("read-3",),
        "write-5": ("write-4",),
        "read-6": ("write-5",),
        "write-7": ("read-6",),
    }
    for node in queue[3:]:
        assert decide(node, queue) == WaitFor(expected_waits[node.name])
    steps = [
        (["read-1", "read-2", "read-3"], ["write-4"]),
        (["write-4"], ["write-5"]),
        (["write-5"], ["read-6"]),
        (["read-6"], ["write-7"]),
        (["write-7"], []),
    ]
    for released, now_holding in steps:
        queue = [n for n in queue if n.name not in released]
        assert [n.name for n in holders(queue)] == now_holding


@pytest.mark.parametrize("permits", [1, 2, 3])
def test_semaphore_admits_the_first_n_and_waits_on_n_predecessors(permits: int) -> None:
    queue = line(" ".join("S" * 6), permits)
    assert [n.sequence for n in holders(queue)] == list(range(1, permits + 1))
    for index in range(permits, 6):
        expected = tuple(n.name for n in queue[index - permits : index])
        assert decide(queue[index], queue) == WaitFor(expected)


def test_semaphore_never_misses_a_wake_up() -> None:
    """Any single deletion that makes a waiter a holder deletes a node it watches."""
    for permits in (1, 2, 3):
        queue = line(" ".join("S" * 7), permits)
        for victim, waiter in itertools.product(queue, queue):
            if victim is waiter:
                continue
            before = decide(waiter, queue)
            after = decide(waiter, [n for n in queue if n is not victim])
            if isinstance(before, WaitFor) and after == GRANTED:
                assert victim.name in before.nodes


def test_semaphore_permits_disagreement_is_refused() -> None:
    queue = line("S S", 2)
    odd = NodeName("lease-3", "permit", "", 3, 5)
    result = decide(odd, [*queue, odd])
    assert isinstance(result, Refused) and "permits" in result.reason


def test_semaphore_and_lock_on_one_path_are_refused() -> None:
    queue = line("L S", 2)
    assert isinstance(decide(queue[1], queue), Refused)
    assert isinstance(decide(queue[0], queue), Refused)


def test_rules_are_monotone() -> None:
    """Removing predecessors never turns a grant into a wait (the flow relies on it)."""
    for spec in ("R R W R W W R", "L L L", "S S S S"):
        queue = line(spec, permits=2)
        for node in queue:
            if decide(node, queue) != GRANTED:
                continue
            for drop in queue:
                if drop is not node:
                    assert decide(node, [n for n in queue if n is not drop]) == GRANTED
