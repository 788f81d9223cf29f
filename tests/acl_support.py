"""Helpers of the ACL tests (digest and SASL): a waiter's view of a queue, and a holder
in a thread of its own."""

from __future__ import annotations

import threading
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

import zklocks
from helpers import wait_for_children as wait_for_children  # the tests' import


class Holder(threading.Thread):
    """Acquires in its own thread, records the lease, releases when told."""

    def __init__(self, lock: zklocks.Lock, order: list[str] | None = None) -> None:
        super().__init__(daemon=True)
        self.lock = lock
        self.order = order
        self.lease: zklocks.Lease | None = None
        self.granted = threading.Event()
        self.release_now = threading.Event()

    def run(self) -> None:
        self.lease = self.lock.acquire(timeout=60)
        if self.order is not None:
            self.order.append(self.name)
        self.granted.set()
        self.release_now.wait(60)
        self.lock.release()


def assert_outsider_refused(outsider: KazooClient, path: str, nodes: list[str]) -> None:
    """``outsider`` (another identity) can delete none of ``nodes`` under ``path``, cannot
    plant a low sequence there in any mode (no forgery, no queue jumping), and cannot
    remove the lock directory."""
    for name in nodes:
        with pytest.raises(NoAuthError):
            outsider.delete(f"{path}/{name}")
    forged = f"{path}/lock-{uuid.uuid4().hex}-"
    for kwargs in ({}, {"ephemeral": True}, {"sequence": True}):
        with pytest.raises(NoAuthError):
            outsider.create(forged + "0000000000", b"", **kwargs)
    with pytest.raises(NoAuthError):
        outsider.delete(path, recursive=True)
