"""The client's tools (``locks``, ``contenders``, ``holders``, ``break_holders``,
``get_acl``, ``delete_tree``, ``watch_lock``, ``watch_tree``, ``session_id``): what the
CLI and ``zklocks serve`` use, public on both clients, against a real ZooKeeper."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import zklocks
from helpers import run
from zklocks.server import ZooKeeperServer

WAIT = 15.0  # a watch that has not fired by then never will: the test fails


@pytest.fixture
def base(kazoo: Any, request: pytest.FixtureRequest) -> str:
    name = request.node.name.replace("[", "-").rstrip("]")
    path = f"/tools/{name}-{time.monotonic_ns()}"
    kazoo.ensure_path(path)
    return path


def test_locks_sums_up_every_lock_under_a_root(client: zklocks.Client, base: str) -> None:
    with zklocks.Client(client.hosts) as other:
        lease = client.lock(f"{base}/a/orders").acquire()
        waiter = threading.Thread(target=other.lock(f"{base}/a/orders").acquire, daemon=True)
        waiter.start()
        client.semaphore(f"{base}/b/pool", permits=3).acquire()
        deadline = time.monotonic() + WAIT
        while len(client.contenders(f"{base}/a/orders")) < 2:  # the waiter's node is in
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.01)
        found = client.locks(base)
        assert [summary.path for summary in found] == [f"{base}/a/orders", f"{base}/b/pool"]
        orders, pool = found
        assert (orders.kind, orders.holders, orders.waiters) == ("lock", 1, 1)
        assert orders.tokens == (lease.token,)
        assert (pool.kind, pool.holders, pool.waiters) == ("semaphore(3)", 1, 0)
        lease.release()
        waiter.join(WAIT)
    assert isinstance(found[0], zklocks.LockSummary)


def test_left_behind_lists_empty_directories_and_names_strangers(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    client.lock(f"{base}/kazoo", layout="kazoo").acquire().release()  # persistent: stays
    lease = client.lock(f"{base}/odd").acquire()
    kazoo.create(f"{base}/odd/notes.txt")
    assert [s.path for s in client.locks(base)] == [f"{base}/odd"]  # as ls sees them
    assert client.locks(base)[0].strangers == ()
    left, odd = client.locks(base, left_behind=True)
    assert (left.path, left.left_behind, left.holders) == (f"{base}/kazoo", True, 0)
    assert (odd.path, odd.left_behind, odd.strangers) == (f"{base}/odd", False, ("notes.txt",))
    lease.release()


def test_holders_are_read_and_broken_only_while_unchanged(
    client: zklocks.Client, base: str
) -> None:
    path = f"{base}/lock"
    with zklocks.Client(client.hosts) as holder_client:
        lease = holder_client.lock(path, identifier="the holder").acquire()
        (holder,) = client.holders(path)
        assert isinstance(holder, zklocks.Holder)
        assert (holder.node, holder.token, holder.identifier) == (
            lease.node,
            lease.token,
            "the holder",
        )
        assert client.break_holders([holder]) is None
        assert lease.wait_lost(timeout=WAIT)
        assert client.holders(path) == []
        # read before, broken after it changed: nothing is deleted
        again = holder_client.lock(path).acquire()
        assert "changed" in (client.break_holders([holder]) or "")
        assert client.holders(path)[0].token == again.token
        assert client.break_holders([]) == "no holder to break"


def test_get_acl_is_none_for_no_node_and_the_entries_otherwise(
    client: zklocks.Client, base: str
) -> None:
    assert client.get_acl(f"{base}/none") is None
    assert client.get_acl(base) == [zklocks.ACL("world", "anyone", 31)]


def test_delete_tree_deletes_deepest_first_and_says_what_is_left(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    kazoo.ensure_path(f"{base}/x/y/z")
    kazoo.ensure_path(f"{base}/x/w")
    assert client.delete_tree(f"{base}/x") == []
    assert kazoo.exists(f"{base}/x") is None
    assert client.delete_tree(f"{base}/gone") == []


def test_watch_lock_fires_when_a_contender_joins_or_the_path_is_created(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    changed = threading.Event()
    path = f"{base}/lock"
    assert client.watch_lock(path, lambda _event: changed.set())  # exists-watch: no path yet
    assert not changed.is_set()
    kazoo.create(path)
    assert changed.wait(WAIT)
    changed.clear()
    assert client.watch_lock(path, lambda _event: changed.set())
    lease = client.lock(path).acquire()
    assert changed.wait(WAIT)
    lease.release()
    with pytest.raises(zklocks.InvalidArgument):
        client.watch_lock(path, None)  # type: ignore[arg-type]


def test_watch_tree_hears_every_change_below_its_roots_for_the_session(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    heard: list[str] = []
    two = threading.Event()

    def watch(event: zklocks.WatchedEvent) -> None:
        heard.append(event.path)
        if len(heard) >= 2:
            two.set()

    session = client.session_id()
    assert session == client.session_id() != 0
    client.watch_tree([base], watch)
    kazoo.create(f"{base}/a")
    kazoo.create(f"{base}/a/b")  # a persistent watch: the second change is heard too
    assert two.wait(WAIT)
    assert heard[:2] == [f"{base}/a", f"{base}/a/b"]


def test_the_asyncio_client_offers_the_same_tools(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    async def main() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client:
            path = f"{base}/orders"
            changed = asyncio.Event()
            assert await client.watch_lock(path, lambda _event: changed.set())
            lease = await client.lock(path, identifier="async").acquire()
            await asyncio.wait_for(changed.wait(), WAIT)
            (summary,) = await client.locks(base)
            assert (summary.path, summary.holders, summary.tokens) == (path, 1, (lease.token,))
            (contender,) = await client.contenders(path)
            assert contender.identifier == "async"
            (holder,) = await client.holders(path)
            assert holder.token == lease.token
            assert await client.get_acl(path) == [zklocks.ACL("world", "anyone", 31)]
            heard = asyncio.Event()
            await client.watch_tree([base], lambda _event: heard.set())
            assert await client.session_id() != 0
            assert await client.break_holders([holder]) is None
            await asyncio.wait_for(heard.wait(), WAIT)  # the deletion, below base
            assert await client.delete_tree(path) == []
            assert await client.get_acl(path) is None

    run(main())
