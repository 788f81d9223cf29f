"""The client's watch table: which callers each event is for, and setWatches restoration."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from zklocks._protocol.constants import EventType, OpCode, WatchTable
from zklocks._protocol.jute import read_long, read_string_vector
from zklocks._protocol.watches import SET_WATCHES_MAX_BYTES, WatchRegistry


def caller(name: str) -> Callable[[Any], None]:
    def fn(event: Any) -> None:
        pass

    fn.__name__ = name
    return fn


A, B, C, D = (caller(n) for n in "ABCD")

# (kind the watch is registered as, path, event, event path) -> fired?
TABLE = [
    (WatchTable.DATA, "/n", EventType.CHANGED, "/n", True),
    (WatchTable.DATA, "/n", EventType.CREATED, "/n", True),
    (WatchTable.DATA, "/n", EventType.DELETED, "/n", True),
    (WatchTable.DATA, "/n", EventType.CHILD, "/n", False),
    (WatchTable.EXIST, "/n", EventType.CREATED, "/n", True),
    (WatchTable.EXIST, "/n", EventType.DELETED, "/n", True),
    (WatchTable.CHILD, "/n", EventType.CHILD, "/n", True),
    (WatchTable.CHILD, "/n", EventType.DELETED, "/n", True),
    (WatchTable.CHILD, "/n", EventType.CHANGED, "/n", False),
    (WatchTable.DATA, "/n", EventType.CHANGED, "/n/x", False),
    (WatchTable.PERSISTENT, "/n", EventType.CHILD, "/n", True),
    (WatchTable.PERSISTENT, "/n", EventType.CHANGED, "/n", True),
    (WatchTable.PERSISTENT, "/n", EventType.CREATED, "/n/x", False),
    (WatchTable.PERSISTENT_RECURSIVE, "/n", EventType.CREATED, "/n/x/y", True),
    (WatchTable.PERSISTENT_RECURSIVE, "/n", EventType.DELETED, "/n", True),
    (WatchTable.PERSISTENT_RECURSIVE, "/n", EventType.CHILD, "/n", False),
    (WatchTable.PERSISTENT_RECURSIVE, "/n", EventType.CHANGED, "/nx", False),
    (WatchTable.PERSISTENT_RECURSIVE, "/", EventType.CHANGED, "/a/b", True),
]


@pytest.mark.parametrize(("kind", "path", "event", "event_path", "fired"), TABLE)
def test_which_events_reach_which_watch(
    kind: WatchTable, path: str, event: EventType, event_path: str, fired: bool
) -> None:
    registry = WatchRegistry()
    registry.add(kind, path, A)
    assert registry.trigger(event, event_path) == ([A] if fired else [])
    persistent = kind in (WatchTable.PERSISTENT, WatchTable.PERSISTENT_RECURSIVE)
    still_there = persistent or not fired
    assert registry.paths(kind) == ([path] if still_there else [])


def test_one_shot_watches_fire_once_and_callers_are_deduplicated() -> None:
    registry = WatchRegistry()
    registry.add(WatchTable.DATA, "/n", A)
    registry.add(WatchTable.DATA, "/n", A)  # same caller twice: called once
    registry.add(WatchTable.EXIST, "/n", B)
    registry.add(WatchTable.CHILD, "/n", A)
    registry.add(WatchTable.PERSISTENT_RECURSIVE, "/", C)
    assert len(registry) == 4
    assert registry.trigger(EventType.DELETED, "/n") == [A, B, C]
    assert registry.trigger(EventType.DELETED, "/n") == [C]
    assert len(registry) == 1


def test_remove_and_drain() -> None:
    registry = WatchRegistry()
    registry.add(WatchTable.DATA, "/a", A)
    registry.add(WatchTable.EXIST, "/a", A)
    registry.add(WatchTable.CHILD, "/b", B)
    assert registry.remove(WatchTable.CHILD, "/b", B)
    assert not registry.remove(WatchTable.CHILD, "/b", B)
    registry.add(WatchTable.PERSISTENT, "/c", D)
    assert registry.drain() == [("/a", A), ("/c", D)]  # one notice per (path, caller)
    assert not registry and len(registry) == 0


def _decode_set_watches(body: bytes, version2: bool) -> tuple[int, list[list[str]]]:
    zxid, offset = read_long(body, 0)
    lists = []
    for _ in range(5 if version2 else 3):
        items, offset = read_string_vector(body, offset)
        lists.append(items)
    assert offset == len(body)
    return zxid, lists


def test_set_watches_uses_version_1_without_persistent_watches_and_adds_chroot() -> None:
    registry = WatchRegistry()
    assert registry.set_watches_bodies(5, "") == []
    registry.add(WatchTable.DATA, "/d", A)
    registry.add(WatchTable.EXIST, "/e", A)
    registry.add(WatchTable.CHILD, "/", A)
    ((opcode, body),) = registry.set_watches_bodies(42, "/app")
    assert opcode == OpCode.SET_WATCHES
    assert _decode_set_watches(body, False) == (42, [["/app/d"], ["/app/e"], ["/app"]])
    registry.add(WatchTable.PERSISTENT_RECURSIVE, "/r", B)
    ((opcode, body),) = registry.set_watches_bodies(42, "")
    assert opcode == OpCode.SET_WATCHES2
    assert _decode_set_watches(body, True) == (42, [["/d"], ["/e"], ["/"], [], ["/r"]])


def test_set_watches_is_split_below_the_size_limit() -> None:
    registry = WatchRegistry()
    paths = [f"/lock/node-{i:010d}-{'x' * 80}" for i in range(3000)]
    for path in paths:
        registry.add(WatchTable.EXIST, path, A)
    bodies = registry.set_watches_bodies(7, "")
    assert len(bodies) > 1
    restored: list[str] = []
    for opcode, body in bodies:
        assert opcode == OpCode.SET_WATCHES
        assert len(body) <= SET_WATCHES_MAX_BYTES + 8 + 3 * 4
        zxid, (data, exist, child) = _decode_set_watches(body, False)
        assert zxid == 7 and data == [] and child == []
        restored.extend(exist)
    assert restored == paths
    assert struct.calcsize(">q") == 8
