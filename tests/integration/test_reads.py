"""The public reads (``get``, ``exists``, ``get_children``) and their one-shot watches, on
a real ZooKeeper, through both clients, with and without a chroot."""

from __future__ import annotations

import asyncio
import pickle
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
    """A fresh persistent node under which the test writes (with kazoo, another client)."""
    name = request.node.name.replace("[", "-").rstrip("]")
    path = f"/reads/{name}-{time.monotonic_ns()}"
    kazoo.ensure_path(path)
    return path


class Heard:
    """A watch that records its events (from any thread) and can be waited on."""

    def __init__(self) -> None:
        self.events: list[zklocks.WatchedEvent] = []
        self._first = threading.Event()

    def __call__(self, event: zklocks.WatchedEvent) -> None:
        self.events.append(event)
        self._first.set()

    def first(self) -> zklocks.WatchedEvent:
        assert self._first.wait(WAIT), "the watch never fired"
        return self.events[0]


def test_get_returns_the_data_and_the_stat_that_a_versioned_write_needs(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    kazoo.create(f"{base}/config", b"v1")
    kazoo.set(f"{base}/config", b"v2")
    data, stat = client.get(f"{base}/config")
    assert data == b"v2"
    assert isinstance(stat, zklocks.Stat)
    assert stat.version == 1
    assert stat.data_length == 2
    assert stat.czxid == kazoo.exists(f"{base}/config").czxid
    txn = client.transaction()
    txn.set_data(f"{base}/config", b"v3", version=stat.version)
    (after,) = txn.commit()
    assert isinstance(after, zklocks.Stat)
    assert after.version == 2


def test_a_missing_node_is_nonode_for_get_and_children_and_none_for_exists(
    client: zklocks.Client, base: str
) -> None:
    with pytest.raises(zklocks.NoNode) as raised:
        client.get(f"{base}/missing")
    assert raised.value.path == f"{base}/missing"
    assert isinstance(raised.value, LookupError)
    assert isinstance(raised.value, zklocks.LockError)
    assert str(raised.value).startswith("no node '/reads/")  # shown, shortened if long
    again = pickle.loads(pickle.dumps(raised.value))
    assert (type(again), again.path) == (zklocks.NoNode, f"{base}/missing")
    with pytest.raises(zklocks.NoNode):
        client.get_children(f"{base}/missing")
    assert client.exists(f"{base}/missing") is None


def test_get_children_names_every_child(client: zklocks.Client, kazoo: Any, base: str) -> None:
    for name in ("a", "b", "c"):
        kazoo.create(f"{base}/{name}")
    assert sorted(client.get_children(base)) == ["a", "b", "c"]
    assert client.get_children(f"{base}/a") == []
    assert "zookeeper" in client.get_children("/")  # the root and /zookeeper may be read


def test_a_data_watch_fires_once_for_the_first_change_on_a_thread_that_may_read_again(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    kazoo.create(f"{base}/node", b"1")
    client = zklocks.Client(zk_server.hosts).start()
    reread: list[bytes] = []
    heard = Heard()

    def watch(event: zklocks.WatchedEvent) -> None:
        heard(event)
        # A sync read from inside a watch: it must not deadlock the connection's thread.
        reread.append(client.get(f"{base}/node")[0])

    client.get(f"{base}/node", watch=watch)
    client.get(f"{base}/node", watch=watch)  # the same watch twice: still called once
    later = Heard()
    kazoo.set(f"{base}/node", b"2")
    first = heard.first()
    assert first == zklocks.WatchedEvent(zklocks.WatchKind.CHANGED, f"{base}/node")
    client.get(f"{base}/node", watch=later)
    kazoo.set(f"{base}/node", b"3")
    assert later.first().kind is zklocks.WatchKind.CHANGED
    client.stop()  # joins the watches' threads: every call made by now has ended
    assert len(heard.events) == 1, heard.events  # one-shot: the second change was not told
    assert len(later.events) == 1, later.events  # nor the session's end, once it fired
    assert reread == [b"2"]


def test_exists_watches_a_missing_node_for_its_creation_and_children_for_a_new_child(
    client: zklocks.Client, kazoo: Any, base: str
) -> None:
    created, child = Heard(), Heard()
    assert client.exists(f"{base}/later", watch=created) is None
    assert client.get_children(base, watch=child) == []
    kazoo.create(f"{base}/later")
    assert created.first() == zklocks.WatchedEvent(zklocks.WatchKind.CREATED, f"{base}/later")
    assert child.first() == zklocks.WatchedEvent(zklocks.WatchKind.CHILD, base)


def test_a_watch_left_set_hears_the_client_close(zk_server: ZooKeeperServer, base: str) -> None:
    heard = Heard()
    with zklocks.Client(zk_server.hosts) as client:
        client.get(base, watch=heard)
    assert heard.first() == zklocks.WatchedEvent(zklocks.WatchKind.CLOSED, base)


def test_reads_inside_a_chroot_name_and_report_paths_inside_it(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    kazoo.create(f"{base}/app")
    kazoo.create(f"{base}/app/config", b"inside")
    heard = Heard()
    with zklocks.Client(f"{zk_server.hosts}{base}") as client:
        assert client.get("/app/config", watch=heard)[0] == b"inside"
        assert client.get_children("/") == ["app"]
        assert client.exists("/config") is None  # not the server's root
        kazoo.delete(f"{base}/app/config")
        assert heard.first() == zklocks.WatchedEvent(zklocks.WatchKind.DELETED, "/app/config")


@pytest.mark.parametrize(
    ("path", "watch", "error"),
    [
        ("relative", None, zklocks.InvalidPath),
        ("/trailing/", None, zklocks.InvalidPath),
        (b"/bytes", None, zklocks.InvalidPath),
        ("/ok", "not callable", zklocks.InvalidArgument),
    ],
)
def test_bad_input_is_refused_before_anything_is_sent(
    client: zklocks.Client, path: Any, watch: Any, error: type[Exception]
) -> None:
    for read in (client.get, client.exists, client.get_children):
        with pytest.raises(error):
            read(path, watch=watch)


def test_a_read_on_a_stopped_client_is_client_closed(zk_server: ZooKeeperServer) -> None:
    client = zklocks.Client(zk_server.hosts)
    with pytest.raises(zklocks.ClientClosed):
        client.get("/")
    client.start()
    client.stop()
    with pytest.raises(zklocks.ClientClosed):
        client.exists("/")


def test_async_reads_and_one_shot_watches_match_the_sync_client(
    zk_server: ZooKeeperServer, kazoo: Any, base: str
) -> None:
    kazoo.create(f"{base}/app")
    kazoo.create(f"{base}/app/config", b"v1")

    async def main() -> None:
        heard: list[zklocks.WatchedEvent] = []
        fired = asyncio.Event()

        def watch(event: zklocks.WatchedEvent) -> None:
            heard.append(event)
            fired.set()

        async with zklocks.AsyncClient(f"{zk_server.hosts}{base}") as client:
            data, stat = await client.get("/app/config", watch=watch)
            assert (data, stat.version) == (b"v1", 0)
            assert await client.get_children("/app") == ["config"]
            assert (await client.exists("/app")) is not None
            assert await client.exists("/app/none") is None
            with pytest.raises(zklocks.NoNode):
                await client.get("/app/none")
            with pytest.raises(zklocks.InvalidArgument):
                await client.get("/app", watch=42)  # type: ignore[arg-type]

            async def not_awaited(event: zklocks.WatchedEvent) -> None: ...

            with pytest.raises(zklocks.InvalidArgument, match="async function"):
                await client.exists("/app", watch=not_awaited)
            await asyncio.to_thread(kazoo.set, f"{base}/app/config", b"v2")
            await asyncio.wait_for(fired.wait(), WAIT)
            await asyncio.to_thread(kazoo.set, f"{base}/app/config", b"v3")
            # A round trip after the second change: its event, had the watch still been
            # set, would have come before this reply (ZooKeeper keeps one session's order).
            assert (await client.get("/app/config"))[0] == b"v3"
            assert heard == [zklocks.WatchedEvent(zklocks.WatchKind.CHANGED, "/app/config")]

    run(main())
