"""The asyncio Connection against a real ZooKeeper: handshake, pipelining, replies, watches,
states, send times, close. Faults (drops, stalls, kills, expiry) are in
``test_transport_faults.py``.

kazoo (a dev dependency) inspects the server independently where a test must not trust
the code under test, always from a worker thread so our event loop keeps running.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient

from connection_support import WAIT, Connection, States, Watched, until
from helpers import run
from zklocks._protocol import records as _records
from zklocks._protocol.constants import CreateMode
from zklocks._protocol.errors import (
    BadVersionError,
    ClientClosedError,
    ConnectionFailedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    UnimplementedError,
)
from zklocks._protocol.records import (
    Check,
    Children,
    Create,
    Created,
    CreatedPath,
    Delete,
    GetChildren,
    NodeData,
    SetData,
    Stat,
)
from zklocks._vocabulary import SessionState, WatchEvent, WatchKind
from zklocks.server import ZooKeeperServer


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def base(kazoo: KazooClient) -> str:
    path = f"/test-connection-{uuid.uuid4().hex[:8]}"
    kazoo.create(path)
    return path


def test_start_negotiates_and_close_leaves_nothing_behind(zk_server: ZooKeeperServer) -> None:
    async def main() -> None:
        tasks_before = asyncio.all_tasks()
        fds_before = open_fds()
        threads_before = threading.active_count()
        conn = Connection(zk_server.hosts, session_timeout=5.0)
        states = States(conn)
        assert conn.state is SessionState.CONNECTING
        await conn.start()
        assert conn.state is SessionState.CONNECTED
        assert conn.session_id != 0
        assert conn.session_timeout == 5.0  # within the server's bounds: granted as asked
        assert conn.last_host == f"127.0.0.1:{zk_server.port}"
        assert open_fds() > fds_before
        await conn.close()
        assert conn.state is SessionState.CLOSED
        assert states.seen == [SessionState.CONNECTED, SessionState.CLOSED]
        await conn.close()  # idempotent
        assert states.seen == [SessionState.CONNECTED, SessionState.CLOSED]
        assert asyncio.all_tasks() == tasks_before
        assert open_fds() == fds_before
        assert threading.active_count() == threads_before
        assert conn._liveness.timer is None

    run(main())


def test_session_timeout_is_clamped_by_the_server(zk_server: ZooKeeperServer) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts, session_timeout=0.1)
        await conn.start()
        try:
            assert conn.session_timeout == 0.4  # 2 ticks of 200 ms
        finally:
            await conn.close()

    run(main())


def test_start_fails_naming_every_host_and_leaks_nothing() -> None:
    async def main() -> None:
        fds_before = open_fds()
        tasks_before = asyncio.all_tasks()
        dead = ["127.0.0.1:9", "127.0.0.1:1"]
        conn = Connection(",".join(dead), session_timeout=2.0)
        started = time.monotonic()
        with pytest.raises(ConnectionFailedError) as caught:
            await conn.start(timeout=0.5)
        assert time.monotonic() - started < 2.0
        assert set(caught.value.hosts) == set(dead)
        assert all(host in str(caught.value) for host in dead)
        assert isinstance(caught.value, TimeoutError)
        assert conn.state is SessionState.CLOSED
        assert asyncio.all_tasks() == tasks_before
        assert open_fds() == fds_before
        future = conn.submit(_records.Exists("/"))
        with pytest.raises(ClientClosedError):
            await future

    run(main())


def test_start_ends_after_one_round_when_every_host_fails_for_a_known_cause() -> None:
    async def main() -> None:
        hosts = "127.0.0.1:1,no-such-host.invalid:2181"
        conn = Connection(hosts, session_timeout=30.0)
        started = time.monotonic()
        with pytest.raises(ConnectionFailedError) as caught:
            await conn.start(timeout=30.0)
        assert time.monotonic() - started < 2.0  # one round, not the 30 s allowed
        reasons = caught.value.reasons
        assert len(reasons) == 2
        assert any("127.0.0.1:1 refused the connection" in reason for reason in reasons)
        assert any("no-such-host.invalid:2181: unknown host" in reason for reason in reasons)
        assert conn.state is SessionState.CLOSED

    run(main())


def test_a_silent_host_or_a_bare_hang_up_keeps_start_trying_until_its_timeout() -> None:
    """A refusal beside a host that accepts and says nothing, or one that hangs up as a
    member without quorum does, is not the end: they may answer yet."""

    async def main() -> None:
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nobody ever answers
        hang_ups = 0

        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal hang_ups
            hang_ups += 1
            await reader.read(1)
            writer.close()

        closer = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        try:
            quiet = f"127.0.0.1:{silent.getsockname()[1]}"
            hanging = f"127.0.0.1:{closer.sockets[0].getsockname()[1]}"
            for hosts, why in ((f"127.0.0.1:1,{quiet}", "did not answer"), (hanging, "")):
                conn = Connection(hosts, session_timeout=30.0)
                started = time.monotonic()
                with pytest.raises(ConnectionFailedError) as caught:
                    await conn.start(timeout=1.5)
                assert time.monotonic() - started >= 1.4
                assert why in str(caught.value)
                assert not caught.value.refused
            assert hang_ups > 2  # retried, and the TLS question did not stop it
        finally:
            silent.close()
            closer.close()
            await closer.wait_closed()

    run(main())


def test_lock_operations_answer_with_ops_types(zk_server: ZooKeeperServer, base: str) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        try:
            created = await conn.submit(_records.Create(base + "/lock-", b"me", sequential=True))
            assert type(created) is Created and type(created.stat) is Stat
            assert created.path.startswith(base + "/lock-")
            assert created.stat.ephemeral_owner == conn.session_id
            assert created.stat.czxid > 0
            assert await conn.submit(_records.GetChildren(base)) == [created.path.rsplit("/")[-1]]
            data = await conn.submit(_records.GetData(created.path))
            assert type(data) is NodeData and data.data == b"me"
            assert data.stat.czxid == created.stat.czxid
            stat = await conn.submit(_records.Exists(created.path))
            assert type(stat) is Stat and stat.czxid == created.stat.czxid
            assert await conn.submit(_records.Delete(created.path)) is None
            assert await conn.submit(_records.Exists(created.path)) is None
            with pytest.raises(NoNodeError) as caught:
                await conn.submit(_records.Delete(created.path))
            assert caught.value.path == created.path
            with pytest.raises(NoNodeError):
                await conn.submit(_records.GetData(created.path))
            container = await conn.submit(
                _records.Create(base + "/c", ephemeral=False, container=True)
            )
            assert container.path == base + "/c"
        finally:
            await conn.close()

    run(main())


def test_pipelined_submits_are_answered_in_order(zk_server: ZooKeeperServer, base: str) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        try:
            futures = [
                conn.submit(_records.Create(base + "/n-", ephemeral=True, sequential=True))
                for _ in range(500)
            ]
            assert not any(f.done() for f in futures)  # all written before any answer
            created = await asyncio.gather(*futures)
            sequence = [int(c.path.rsplit("-", 1)[1]) for c in created]
            assert sequence == list(range(500))
            assert len(await conn.submit(_records.GetChildren(base))) == 500
        finally:
            await conn.close()

    run(main())


def test_close_removes_ephemerals_at_once(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts, session_timeout=30.0)
        await conn.start()
        await conn.create(base + "/eph", ephemeral=True)
        assert await asyncio.to_thread(kazoo.exists, base + "/eph") is not None
        await conn.close()
        # a 30 s session: only closeSession can have removed it this soon
        assert await asyncio.to_thread(kazoo.exists, base + "/eph") is None

    run(main())


def test_refused_requests_raise_typed_errors(zk_server: ZooKeeperServer, base: str) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        try:
            await conn.create(base + "/x", b"1")
            with pytest.raises(NodeExistsError):
                await conn.create(base + "/x")
            with pytest.raises(BadVersionError):
                await conn.set_data(base + "/x", b"2", version=5)
            with pytest.raises(NotEmptyError):
                await conn.delete(base)
            with pytest.raises(NoNodeError):
                await conn.create(base + "/missing/child")
            with pytest.raises(UnimplementedError):  # this server has TTL nodes disabled
                await conn.create(base + "/ttl", ttl=5.0)
            with pytest.raises(BadVersionError):
                await conn.delete(base + "/x", version=3)
            with pytest.raises(ValueError, match="TTL node cannot be ephemeral"):
                await conn.create(base + "/ttl-e", ephemeral=True, ttl=5.0)  # no such mode
            with pytest.raises(ValueError, match="at least one ACL"):
                await conn.create(base + "/no-acl", acl=())
            assert await conn.get_children(base) == ["x"]  # nothing made by the refused ones
            # the connection carries on after refusals
            assert (await conn.get_data(base + "/x")).data == b"1"
        finally:
            await conn.close()

    run(main())


def test_user_operations(zk_server: ZooKeeperServer, base: str) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        try:
            created = await conn.create(base + "/d", b"v1")
            assert isinstance(created.stat, Stat) and created.stat.data_length == 2
            stat = await conn.set_data(base + "/d", b"v22", version=0)
            assert stat.version == 1 and stat.data_length == 3
            data = await conn.get_data(base + "/d")
            assert data.data == b"v22" and data.stat.mzxid == stat.mzxid
            exists = await conn.exists(base + "/d")
            assert exists is not None and exists.version == 1
            await conn.create(base + "/d/child", ephemeral=True)
            assert await conn.get_children(base + "/d") == ["child"]
            await conn.sync(base)
            results = await conn.multi(
                Create(base + "/m", b"a", ephemeral=False),
                SetData(base + "/m", b"b", 0),
                Check(base + "/m", 1),
                Delete(base + "/d/child"),
            )
            assert results[0] == base + "/m" and results[2] is None and results[3] is None
            assert isinstance(results[1], Stat) and results[1].version == 1
            # one type whatever the server: 3.8.0 sends the path only, 3.8.2+ its Stat too
            assert type(results[0]) is CreatedPath
            if results[0].stat is not None:  # one multi, one zxid: created and set at once
                assert results[0].stat.czxid == results[1].mzxid == results[1].czxid
            with pytest.raises(BadVersionError) as caught:
                await conn.multi(Create(base + "/m2", ephemeral=False), Check(base + "/m", 0))
            assert caught.value.results is not None
            assert type(caught.value.results[0]) is RolledBackError
            assert await conn.exists(base + "/m2") is None  # nothing applied
            seq = await conn.create(base + "/s-", sequential=True, ephemeral=True)
            assert seq.path == base + "/s-0000000002"  # d and m came before; m2 was rolled back
            persistent = Create(base + "/p", ephemeral=False)
            assert persistent.mode is CreateMode.PERSISTENT
            assert (await conn.submit(persistent)).stat.ephemeral_owner == 0
            listing = await conn.submit(GetChildren(base, with_stat=True))  # getChildren2
            assert isinstance(listing, Children) and listing.stat.num_children == len(listing.names)
            await conn.delete(base + "/p", version=0)
            assert await conn.exists(base + "/p") is None
        finally:
            await conn.close()

    run(main())


def test_watches_fire_once_with_the_right_event(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        try:
            exist, data, child = Watched(), Watched(), Watched()
            assert await conn.exists(base + "/w", watcher=exist) is None
            await asyncio.to_thread(kazoo.create, base + "/w", b"1")
            event = await exist.next()
            assert event == WatchEvent(WatchKind.CREATED, base + "/w")
            await conn.get_data(base + "/w", watcher=data)
            await conn.get_children(base, watcher=child)
            await asyncio.to_thread(kazoo.set, base + "/w", b"2")
            assert (await data.next()).kind is WatchKind.CHANGED
            await asyncio.to_thread(kazoo.create, base + "/w2")
            assert (await child.next()) == WatchEvent(WatchKind.CHILD, base)
            # one-shot: a second change is not reported to watchers that already fired
            await asyncio.to_thread(kazoo.set, base + "/w", b"3")
            await conn.sync(base)
            assert len(exist.events) == 1 and len(data.events) == 1
            # a lock waiter's watch: exists on the predecessor, woken by its deletion
            waiter = Watched()
            assert await conn.submit(_records.Exists(base + "/w2"), watcher=waiter) is not None
            await asyncio.to_thread(kazoo.delete, base + "/w2")
            assert (await waiter.next()).kind is WatchKind.DELETED
        finally:
            await conn.close()

    run(main())


def test_persistent_recursive_watch(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        try:
            watched = Watched()
            await conn.add_watch(base, watched)
            await asyncio.to_thread(kazoo.create, base + "/a/b", makepath=True)
            seen = [await watched.next(), await watched.next()]
            assert [(e.kind, e.path) for e in seen] == [
                (WatchKind.CREATED, base + "/a"),
                (WatchKind.CREATED, base + "/a/b"),
            ]
            await asyncio.to_thread(kazoo.delete, base + "/a/b")
            assert (await watched.next()).path == base + "/a/b"  # still registered
        finally:
            await conn.close()

    run(main())


def test_close_wakes_every_watcher(zk_server: ZooKeeperServer, base: str) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        await conn.start()
        watched = Watched()
        await conn.exists(base + "/never", watcher=watched)
        await conn.close()
        assert watched.events == [WatchEvent(WatchKind.CLOSED, base + "/never")]
        with pytest.raises(ClientClosedError):
            await conn.submit(_records.Exists("/"))

    run(main())


def test_last_answered_sent_is_the_send_time_of_the_last_answer(
    zk_server: ZooKeeperServer,
) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts, session_timeout=1.2)
        before_start = time.monotonic()
        await conn.start()
        try:
            assert conn.last_answered_sent is not None
            assert before_start <= conn.last_answered_sent <= time.monotonic()
            before = time.monotonic()
            future = conn.submit(_records.Exists("/"))
            after_submit = time.monotonic()
            await future
            assert before <= conn.last_answered_sent <= after_submit
            # Idle: pings go out every 0.4 s; their answers move the time forward.
            idle_from = time.monotonic()
            await until(lambda: (conn.last_answered_sent or 0) > idle_from, timeout=2.0)
            assert conn.last_answered_sent is not None
            assert conn.last_answered_sent <= time.monotonic()
            assert conn.state is SessionState.CONNECTED
        finally:
            await conn.close()

    run(main())


def test_submit_before_start_is_queued_until_connected(zk_server: ZooKeeperServer) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        future = conn.submit(_records.Exists("/"))
        assert not future.done()
        await conn.start()
        try:
            stat = await asyncio.wait_for(future, WAIT)
            assert stat is not None
        finally:
            await conn.close()

    run(main())


def test_chroot(zk_server: ZooKeeperServer, kazoo: KazooClient, base: str) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts + base)
        await conn.start()
        try:
            assert conn.chroot == base
            created = await conn.create("/inside-", sequential=True)
            assert created.path.startswith("/inside-")
            assert await asyncio.to_thread(kazoo.exists, base + created.path) is not None
            watched = Watched()
            await conn.exists("/later", watcher=watched)
            await asyncio.to_thread(kazoo.create, base + "/later")
            assert (await watched.next()).path == "/later"
            assert sorted(await conn.get_children("/")) == sorted(
                ["later", created.path.lstrip("/")]
            )
            results = await conn.multi(Create("/m", ephemeral=False))
            assert results == ["/m"]
        finally:
            await conn.close()

    run(main())


def test_listener_remover_and_failing_listener(zk_server: ZooKeeperServer) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        seen: list[Any] = []

        def broken(state: SessionState) -> None:
            raise RuntimeError("listener bug")

        conn.add_state_listener(broken)
        remove = conn.add_state_listener(seen.append)
        await conn.start()
        remove()
        await conn.close()
        assert seen == [SessionState.CONNECTED]  # removed before CLOSED; the bug hurt no one

    run(main())


def test_close_during_start_stops_it_cleanly() -> None:
    async def main() -> None:
        # A server that accepts and never answers: the handshake hangs.
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        tasks_before = asyncio.all_tasks()
        try:
            conn = Connection(f"127.0.0.1:{port}", session_timeout=30.0)
            starting = asyncio.ensure_future(conn.start())
            await until(
                lambda: (
                    conn._opener.attempt is not None and conn._opener.attempt.transport is not None
                )
            )
            attempt = conn._opener.attempt
            assert attempt is not None and attempt.transport is not None
            client_socket = attempt.transport.get_extra_info("socket")
            assert client_socket.fileno() >= 0
            await conn.close()
            assert client_socket.fileno() == -1  # closed by the time close() returns
            with pytest.raises(ClientClosedError):
                await asyncio.wait_for(starting, WAIT)
            assert conn.state is SessionState.CLOSED
            ours = [t for t in asyncio.all_tasks() - tasks_before if "silent" not in repr(t)]
            assert ours == []
        finally:
            server.close()
            await server.wait_closed()

    run(main())
