"""Issue 11, item 1: another client deletes a contender's node (an operator, a clean-up
script; here the ``kazoo`` fixture). A waiter whose node is gone never holds on a
wake-up; it joins the line again at the back. A holder whose node is gone is told."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import zklocks
from zklocks.server import ZooKeeperServer

WAIT = 15.0  # generous bound for anything that should happen at once


def watch_children(
    kazoo: Any,
    path: str,
    done: Callable[[list[str]], bool],
    changed: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> list[str]:
    """Wait on child watches (no sleeps) until ``done(children)`` or ``stop`` is set.

    Whoever sets ``stop`` sets ``changed`` too, so that it ends the wait at once.
    """
    changed = changed or threading.Event()
    deadline = time.monotonic() + WAIT
    while True:
        changed.clear()
        children = kazoo.get_children(path, watch=lambda event: changed.set())
        if done(children) or (stop is not None and stop.is_set()):
            return children
        remaining = deadline - time.monotonic()
        assert remaining > 0 and changed.wait(remaining), f"{path}: stuck at {children}"


class Contender(threading.Thread):
    """Acquires ``lock`` in its own thread, holds it until told, then releases it."""

    def __init__(self, lock: zklocks.Lock, granted_also: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.lock = lock
        self.granted = threading.Event()
        self.granted_also = granted_also
        self.let_go = threading.Event()
        self.lease: zklocks.Lease | None = None
        self.lost_at_grant: bool | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.lease = self.lock.acquire(timeout=60)
            self.lost_at_grant = self.lease.lost
            self.granted.set()
            if self.granted_also is not None:
                self.granted_also.set()
            self.let_go.wait(60)
            self.lock.release()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.granted.set()

    def finish(self) -> None:
        self.let_go.set()
        self.join(WAIT)
        assert not self.is_alive()
        assert self.error is None, self.error


def test_a_waiter_whose_node_was_deleted_never_holds_beside_the_one_behind_it(
    zk_server: ZooKeeperServer, kazoo: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """H holds; W waits on H; C waits on W. Another client deletes W's node: C re-lists
    and waits on H. When H releases, only C may hold; W joins the line again behind C
    (with a warning) and holds after C."""
    caplog.set_level(logging.WARNING, logger="zklocks.lock")
    path = f"/deleted/hwc-{time.monotonic_ns()}"
    with (
        zklocks.Client(zk_server.hosts) as h_client,
        zklocks.Client(zk_server.hosts) as w_client,
        zklocks.Client(zk_server.hosts) as c_client,
    ):
        h = h_client.lock(path)
        h_lease = h.acquire(timeout=WAIT)
        h_node = h_lease.node.rsplit("/", 1)[1]

        changed = threading.Event()
        w = Contender(w_client.lock(path), granted_also=changed)
        w.start()
        w_node = next(n for n in watch_children(kazoo, path, lambda c: len(c) == 2) if n != h_node)
        c = Contender(c_client.lock(path))
        c.start()
        c_node = next(
            n
            for n in watch_children(kazoo, path, lambda c: len(c) == 3)
            if n not in (h_node, w_node)
        )

        kazoo.delete(f"{path}/{w_node}")  # W's node goes; W itself goes on waiting on H
        h.release()

        assert c.granted.wait(WAIT) and c.error is None, c.error
        assert c.lease is not None and c.lease.node.endswith(c_node)
        # W must now be back in line, behind C, and not holding: wait for either
        known = {h_node, w_node, c_node}
        children = watch_children(
            kazoo, path, lambda now: any(n not in known for n in now), changed, stop=w.granted
        )
        assert not w.granted.is_set(), (
            f"two holders: W returned from acquire (lost={w.lost_at_grant}, "
            f"error={w.error!r}) while C holds; its node {w_node} was deleted"
        )
        assert not c.lease.lost
        rejoined = [n for n in children if n not in known]
        assert sorted(children) == sorted([c_node, *rejoined]) and len(rejoined) == 1
        assert any(
            w_node in r.getMessage() and "deleted by another client" in r.getMessage()
            for r in caplog.records
        ), caplog.text
        # behind C: W holds once C lets go, on its new node
        assert not w.granted.wait(0)
        c.finish()
        assert w.granted.wait(WAIT) and w.error is None, w.error
        assert w.lease is not None and w.lease.node.endswith(rejoined[0])
        assert not w.lease.lost
        w.finish()
        assert kazoo.get_children(path) == []


def test_a_waiter_whose_node_was_deleted_rejoins_within_its_deadline(
    zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    """Joining the line again does not start a new timeout: the call's one deadline holds,
    and its second node goes with the timeout."""
    path = f"/deleted/deadline-{time.monotonic_ns()}"
    with (
        zklocks.Client(zk_server.hosts) as h_client,
        zklocks.Client(zk_server.hosts) as w_client,
        zklocks.Client(zk_server.hosts) as c_client,
    ):
        h = h_client.lock(path)
        h.acquire(timeout=WAIT)
        outcome: list[object] = []
        started = time.monotonic()

        def wait_briefly() -> None:
            try:
                outcome.append(w_client.lock(path).acquire(timeout=4.0))
            except BaseException as exc:
                outcome.append(exc)

        w = threading.Thread(target=wait_briefly, daemon=True)
        w.start()
        w_node = max(watch_children(kazoo, path, lambda c: len(c) == 2), key=_sequence)
        c = Contender(c_client.lock(path))
        c.start()
        watch_children(kazoo, path, lambda c: len(c) == 3)
        kazoo.delete(f"{path}/{w_node}")
        h.release()  # C holds; W (its node gone) rejoins behind C and times out there
        assert c.granted.wait(WAIT) and c.error is None, c.error
        w.join(WAIT)
        elapsed = time.monotonic() - started
        assert len(outcome) == 1 and isinstance(outcome[0], zklocks.LockTimeout), outcome
        assert 4.0 <= elapsed < 4.0 + WAIT / 3, elapsed  # the one deadline, not a new one
        assert c.lease is not None
        assert kazoo.get_children(path) == [c.lease.node.rsplit("/", 1)[1]]
        c.finish()


def _sequence(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def test_a_holder_whose_node_was_deleted_is_told_its_lease_is_lost(
    zk_server: ZooKeeperServer, kazoo: Any
) -> None:
    path = f"/deleted/holder-{time.monotonic_ns()}"
    for fair in (True, False):
        with zklocks.Client(zk_server.hosts) as client:
            lock = client.lock(f"{path}-{fair}", fair=fair)
            lease = lock.acquire(timeout=WAIT)
            kazoo.delete(lease.node)
            assert lease.wait_lost(WAIT)
            assert lease.lost_reason is not None and "deleted" in lease.lost_reason
            lock.release()  # does not raise, deletes nothing of anyone else's
            assert kazoo.get_children(f"{path}-{fair}") == []
