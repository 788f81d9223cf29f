"""Every lock kind behind one factory, so each contract case runs for all of them."""

from __future__ import annotations

from collections.abc import Callable

import zklocks

LockFactory = Callable[[zklocks.Client, str], zklocks.Lock]

KINDS: dict[str, LockFactory] = {
    "fair": lambda client, path: client.lock(path),
    "unfair": lambda client, path: client.lock(path, fair=False),
    "write": lambda client, path: client.read_write_lock(path).write,
    "read": lambda client, path: client.read_write_lock(path).read,
    "semaphore": lambda client, path: client.semaphore(path, permits=1),
    "election": lambda client, path: client.election(path),
}
EXCLUSIVE = ["fair", "unfair", "write", "semaphore", "election"]
QUEUED_EXCLUSIVE = ["fair", "write", "semaphore", "election"]


def blocker_kind(kind: str) -> str:
    """A kind that excludes ``kind`` (readers are excluded by a writer)."""
    return "write" if kind == "read" else kind
