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


def assert_shared_in_fifo_order(
    clients: list[zklocks.Client], path: str, kazoo: KazooClient
) -> None:
    """Clients of one identity queue on ``path`` one after another (``kazoo`` sees the
    line grow) and are granted in that order, with rising fencing tokens."""
    order: list[str] = []
    holders = [Holder(client.lock(path), order) for client in clients]
    for index, holder in enumerate(holders):
        holder.name = f"client-{index}"
        holder.start()
        wait_for_children(kazoo, path, index + 1)  # queue in a known order
    tokens = []
    for holder in holders:
        assert holder.granted.wait(15)
        assert holder.lease is not None
        tokens.append(holder.lease.token)
        holder.release_now.set()
        holder.join(15)
    assert order == [holder.name for holder in holders]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(holders)
