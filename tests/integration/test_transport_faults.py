"""Faults on a real ZooKeeper: resets, stalls, pauses, crashes, member loss, oversized requests.

A small asyncio TCP proxy (tests/proxy.py) sits between the Connection and the server when a test
needs to reset or stall the wire. Every wait has a deadline; the only ``time.sleep`` is
the fault of "the client process paused", which blocks the event loop on purpose.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid

import pytest
from kazoo.client import KazooClient
from nemesis.proxy import Proxy

from broken_server import StrayReplyRelay
from connection_support import WAIT, Connection, States, Watched, until
from helpers import run as run_bounded
from zklocks._protocol import records as _records
from zklocks._protocol.errors import (
    ConnectionLossError,
    NoAuthError,
    RequestTooLargeError,
    SessionExpiredError,
)
from zklocks._protocol.records import digest_acl
from zklocks._vocabulary import SessionState, WatchEvent, WatchKind
from zklocks.server import ZooKeeperEnsemble, ZooKeeperServer

run = functools.partial(run_bounded, timeout=90.0)  # faults wait out session timeouts


def kazoo_client(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=20)
    return client


@pytest.fixture
def base(kazoo: KazooClient) -> str:
    path = f"/test-faults-{uuid.uuid4().hex[:8]}"
    kazoo.create(path)
    return path


# ---------------------------------------------------------------- resets


def test_reset_fails_in_flight_queues_new_and_resumes(
    zk_server: ZooKeeperServer, base: str
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=10.0)
            states = States(conn)
            await conn.start()
            session = conn.session_id
            try:
                await conn.create(base + "/eph", ephemeral=True)
                proxy.stall()
                in_flight = conn.submit(_records.Exists(base + "/eph"))
                proxy.reset()
                with pytest.raises(ConnectionLossError):
                    await asyncio.wait_for(in_flight, WAIT)
                suspended = await states.wait(SessionState.SUSPENDED)
                queued = conn.submit(_records.Exists(base + "/eph"))
                assert not queued.done()
                proxy.unstall()
                await states.wait(SessionState.CONNECTED, after=suspended)
                stat = await asyncio.wait_for(queued, WAIT)
                assert stat is not None and stat.ephemeral_owner == session
                assert conn.session_id == session
                assert states.seen == [
                    SessionState.CONNECTED,
                    SessionState.SUSPENDED,
                    SessionState.CONNECTED,
                ]
            finally:
                await conn.close()

    run(main())


def test_watch_is_restored_and_fires_for_a_deletion_missed_while_away(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    """The lock waiter's case: its predecessor goes while the connection is down."""

    async def main() -> None:
        await asyncio.to_thread(kazoo.create, base + "/predecessor")
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=10.0)
            states = States(conn)
            await conn.start()
            try:
                waiter = Watched()
                assert await conn.submit(_records.Exists(base + "/predecessor"), watcher=waiter)
                proxy.stall()
                proxy.reset()
                suspended = await states.wait(SessionState.SUSPENDED)
                await asyncio.to_thread(kazoo.delete, base + "/predecessor")
                proxy.unstall()
                await states.wait(SessionState.CONNECTED, after=suspended)
                event = await waiter.next()
                assert event == WatchEvent(WatchKind.DELETED, base + "/predecessor")
            finally:
                await conn.close()

    run(main())


def test_persistent_recursive_watch_survives_a_reconnect(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=10.0)
            states = States(conn)
            await conn.start()
            try:
                watched = Watched()
                await conn.add_watch(base, watched)
                proxy.reset()
                suspended = await states.wait(SessionState.SUSPENDED)
                await states.wait(SessionState.CONNECTED, after=suspended)
                await asyncio.to_thread(kazoo.create, base + "/a/b", makepath=True)
                seen = [await watched.next(), await watched.next()]
                assert [(e.kind, e.path) for e in seen] == [
                    (WatchKind.CREATED, base + "/a"),
                    (WatchKind.CREATED, base + "/a/b"),
                ]
            finally:
                await conn.close()

    run(main())


def test_auth_is_sent_again_after_a_reconnect(zk_server: ZooKeeperServer, base: str) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, auth=[("digest", b"alice:secret")])
            states = States(conn)
            stranger = Connection(zk_server.hosts)
            await conn.start()
            await stranger.start()
            try:
                acl = (digest_acl("alice", "secret"),)
                await conn.create(base + "/secret", b"s", acl=acl)
                with pytest.raises(NoAuthError):
                    await stranger.get_data(base + "/secret")
                await conn.add_auth("digest", b"bob:other")  # added later, also re-sent
                await conn.create(base + "/bobs", acl=(digest_acl("bob", "other"),))
                proxy.reset()
                suspended = await states.wait(SessionState.SUSPENDED)
                await states.wait(SessionState.CONNECTED, after=suspended)
                assert (await conn.get_data(base + "/secret")).data == b"s"
                assert (await conn.get_data(base + "/bobs")).data == b""
            finally:
                await conn.close()
                await stranger.close()

    run(main())


# ---------------------------------------------------------------- stalls


def test_stall_suspends_within_two_thirds_then_resumes(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=3.0)
            states = States(conn)
            await conn.start()
            session = conn.session_id
            try:
                await conn.create(base + "/eph", ephemeral=True)
                stalled_at = time.monotonic()
                proxy.stall()
                suspended = await states.wait(SessionState.SUSPENDED)
                assert states.times[suspended] - stalled_at <= 2.0 + 0.25
                proxy.unstall()
                await states.wait(SessionState.CONNECTED, after=suspended)
                assert conn.session_id == session
                stat = await asyncio.to_thread(kazoo.exists, base + "/eph")
                assert stat is not None and stat.ephemeralOwner == session
            finally:
                await conn.close()

    run(main())


def test_long_stall_is_lost_when_the_server_expires_the_session(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=2.0)
            states = States(conn)
            await conn.start()
            old_session = conn.session_id
            try:
                await conn.create(base + "/eph", ephemeral=True)
                waiter = Watched()
                await conn.exists(base + "/eph", watcher=waiter)
                proxy.stall()
                lost = await states.wait(SessionState.LOST)
                answered = conn.last_answered_sent
                assert answered is not None
                # never LOST before the server could have expired the session ...
                assert states.times[lost] >= answered + conn.session_timeout
                # ... and the server does expire it (kazoo sees the ephemeral go) soon after
                await until(lambda: kazoo.exists(base + "/eph") is None, timeout=3.0)
                assert waiter.events == [WatchEvent(WatchKind.SESSION_LOST, base + "/eph")]
                assert states.seen[:3] == [
                    SessionState.CONNECTED,
                    SessionState.SUSPENDED,
                    SessionState.LOST,
                ]
                queued = conn.submit(_records.Exists("/"))
                proxy.unstall()
                await states.wait(SessionState.CONNECTED, after=lost)
                assert conn.session_id not in (0, old_session)
                assert await asyncio.wait_for(queued, WAIT) is not None  # on the new session
            finally:
                await conn.close()

    run(main())


# ---------------------------------------------------------------- pauses and crashes


def test_client_paused_past_its_session_timeout(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts, session_timeout=1.0)
        states = States(conn)
        await conn.start()
        old_session = conn.session_id
        try:
            await conn.create(base + "/eph", ephemeral=True)
            waiter = Watched()
            await conn.exists(base, watcher=waiter)  # a node the expiry does not touch
            time.sleep(1.8)  # the fault: the whole process (its event loop) stops
            lost = await states.wait(SessionState.LOST)
            await states.wait(SessionState.CONNECTED, after=lost)
            assert conn.session_id not in (0, old_session)
            assert waiter.events == [WatchEvent(WatchKind.SESSION_LOST, base)]
            await until(lambda: kazoo.exists(base + "/eph") is None, timeout=3.0)
            assert await conn.exists("/") is not None
        finally:
            await conn.close()

    run(main())


def test_server_paused_past_the_session_timeout(fresh_zk_server: ZooKeeperServer) -> None:
    async def main() -> None:
        conn = Connection(fresh_zk_server.hosts, session_timeout=2.0)
        states = States(conn)
        await conn.start()
        old_session = conn.session_id
        try:
            await asyncio.to_thread(fresh_zk_server.pause)
            paused_at = time.monotonic()
            suspended = await states.wait(SessionState.SUSPENDED)
            assert states.times[suspended] - paused_at <= 2 * 2.0 / 3 + 0.25
            lost = await states.wait(SessionState.LOST, after=suspended)
            await asyncio.to_thread(fresh_zk_server.resume)
            await states.wait(SessionState.CONNECTED, after=lost)
            assert conn.session_id not in (0, old_session)
            assert await conn.exists("/") is not None
        finally:
            if fresh_zk_server.paused:
                fresh_zk_server.resume()
            await conn.close()

    run(main())


def test_server_killed_and_restarted_sessions_resume(fresh_zk_server: ZooKeeperServer) -> None:
    async def main() -> None:
        # A long session: on a loaded machine the JVM may take many seconds to come back,
        # and the client (rightly) declares LOST after a whole timeout without a server.
        conn = Connection(fresh_zk_server.hosts, session_timeout=60.0)
        states = States(conn)
        await conn.start()
        session = conn.session_id
        try:
            await conn.create("/eph", ephemeral=True)
            await conn.create("/watched")
            waiter = Watched()
            await conn.exists("/watched", watcher=waiter)
            await asyncio.to_thread(fresh_zk_server.kill)
            suspended = await states.wait(SessionState.SUSPENDED)
            await asyncio.to_thread(fresh_zk_server.start)
            await states.wait(SessionState.CONNECTED, after=suspended, timeout=45.0)
            assert conn.session_id == session
            assert SessionState.LOST not in states.seen
            stat = await conn.exists("/eph")
            assert stat is not None and stat.ephemeral_owner == session
            other = kazoo_client(fresh_zk_server.hosts)
            try:
                await asyncio.to_thread(other.delete, "/watched")
            finally:
                await asyncio.to_thread(other.stop)
                other.close()
            event = await waiter.next()
            assert (event.kind, event.path) == (WatchKind.DELETED, "/watched")
        finally:
            await conn.close()

    run(main())


def test_a_server_that_never_answers_the_handshake_costs_one_share_not_the_session(
    zk_server: ZooKeeperServer,
) -> None:
    """One host, and the first reconnect lands on a server that accepts TCP and never
    answers (as a restarted ZooKeeper can while it starts): that attempt must give up in
    time for another one to resume the session, not wait until the session is gone."""

    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=6.0)
            states = States(conn)
            await conn.start()
            session = conn.session_id
            try:
                proxy.swallow_next = 1
                proxy.reset()
                suspended = await states.wait(SessionState.SUSPENDED)
                await states.wait(SessionState.CONNECTED, after=suspended)
                assert proxy.accepted >= 3  # the first, the black hole, the one that worked
                assert SessionState.LOST not in states.seen, states.seen
                assert conn.session_id == session
            finally:
                await conn.close()

    run(main())


def test_ensemble_member_lost_client_moves_with_session_and_watches(
    zk_ensemble: ZooKeeperEnsemble,
) -> None:
    async def main() -> None:
        conn = Connection(zk_ensemble.hosts, session_timeout=60.0)  # see the test above
        states = States(conn)
        await conn.start()
        session = conn.session_id
        try:
            await conn.create("/eph", ephemeral=True)
            await conn.create("/watched", b"1")
            waiter = Watched()
            await conn.get_data("/watched", watcher=waiter)
            first = conn.last_host
            (member,) = [m for m in zk_ensemble.members if m.hosts == first]
            await asyncio.to_thread(member.kill)
            suspended = await states.wait(SessionState.SUSPENDED)
            await states.wait(SessionState.CONNECTED, after=suspended, timeout=45.0)
            assert conn.session_id == session
            assert conn.last_host != first
            stat = await conn.exists("/eph")
            assert stat is not None and stat.ephemeral_owner == session
            survivors = ",".join(m.hosts for m in zk_ensemble.members if m is not member)
            other = kazoo_client(survivors)
            try:
                await asyncio.to_thread(other.set, "/watched", b"2")
            finally:
                await asyncio.to_thread(other.stop)
                other.close()
            event = await waiter.next()
            assert (event.kind, event.path) == (WatchKind.CHANGED, "/watched")
        finally:
            await conn.close()

    run(main(), timeout=110.0)


# ---------------------------------------------------------------- expiry and size


def test_session_expired_by_the_server_starts_a_new_session(
    zk_server: ZooKeeperServer, kazoo: KazooClient, base: str
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=10.0)
            states = States(conn)
            await conn.start()
            old_session = conn.session_id
            try:
                await conn.create(base + "/eph", ephemeral=True)
                await conn.create(base + "/kept")
                waiters = [Watched(), Watched()]
                await conn.get_data(base + "/kept", watcher=waiters[0])
                await conn.exists(base + "/absent", watcher=waiters[1])

                def expire() -> None:  # the classic trick: attach to the session, close it
                    thief = KazooClient(
                        hosts=zk_server.hosts, client_id=(old_session, conn.session_password)
                    )
                    thief.start(timeout=10)
                    thief.stop()
                    thief.close()

                # Keep our client from winning the session back while the thief holds it.
                proxy.stall()
                await asyncio.to_thread(expire)
                assert await asyncio.to_thread(kazoo.exists, base + "/eph") is None
                proxy.unstall()
                lost = await states.wait(SessionState.LOST)
                await states.wait(SessionState.CONNECTED, after=lost)
                assert conn.session_id not in (0, old_session)
                assert [w.events for w in waiters] == [
                    [WatchEvent(WatchKind.SESSION_LOST, base + "/kept")],
                    [WatchEvent(WatchKind.SESSION_LOST, base + "/absent")],
                ]
                created = await conn.create(base + "/again", ephemeral=True)
                assert created.stat.ephemeral_owner == conn.session_id
            finally:
                await conn.close()

    run(main())


def test_queued_requests_fail_when_the_session_is_lost(
    zk_server: ZooKeeperServer, base: str
) -> None:
    async def main() -> None:
        async with Proxy("127.0.0.1", zk_server.port) as proxy:
            conn = Connection(proxy.hosts, session_timeout=1.0)
            states = States(conn)
            await conn.start()
            try:
                proxy.stall()
                proxy.reset()
                suspended = await states.wait(SessionState.SUSPENDED)
                queued = conn.submit(_records.Delete(base + "/whatever"))
                await states.wait(SessionState.LOST, after=suspended)
                with pytest.raises(SessionExpiredError):
                    await asyncio.wait_for(queued, WAIT)
            finally:
                proxy.unstall()
                await conn.close()

    run(main())


def test_request_over_jute_maxbuffer_is_refused_and_connection_survives(
    zk_server: ZooKeeperServer, base: str
) -> None:
    async def main() -> None:
        conn = Connection(zk_server.hosts)
        states = States(conn)
        await conn.start()
        try:
            with pytest.raises(RequestTooLargeError, match=r"jute\.maxbuffer"):
                await conn.create(base + "/big", b"x" * (1024 * 1024))
            fits = b"x" * (1024 * 1024 - 200)
            assert (await conn.create(base + "/almost", fits)).stat.data_length == len(fits)
            assert states.seen == [SessionState.CONNECTED]
        finally:
            await conn.close()

    run(main())


def test_what_the_server_does_with_an_oversized_request(
    zk_server: ZooKeeperServer, base: str
) -> None:
    """Why the client checks: the server drops the whole connection on such a frame."""

    async def main() -> None:
        conn = Connection(zk_server.hosts, max_request_size=16 * 1024 * 1024)
        states = States(conn)
        await conn.start()
        session = conn.session_id
        try:
            with pytest.raises(ConnectionLossError):
                await conn.create(base + "/big", b"x" * (1024 * 1024))
            suspended = await states.wait(SessionState.SUSPENDED)
            await states.wait(SessionState.CONNECTED, after=suspended)
            assert conn.session_id == session
        finally:
            await conn.close()

    run(main())


# ---------------------------------------------------------------- a connection dead at birth


def test_a_connection_that_dies_at_birth_is_a_drop_and_the_session_resumes(
    zk_server: ZooKeeperServer, base: str
) -> None:
    """Issue 21, item 3: a reply nobody asked for, read with the handshake's answer, kills
    the connection before it is set up. Setting up the sync client's direct writes then
    duplicated a closed socket: the EBADF killed the supervisor (no reconnect, ever) and
    close() raised it. It is a dropped connection like any other."""

    async def main() -> None:
        async with StrayReplyRelay(zk_server.port) as relay:
            conn = Connection(relay.hosts, session_timeout=10.0)
            conn.thread_writes = True  # as the sync client's: callers write to a dup
            states = States(conn)
            await conn.start()
            session = conn.session_id
            try:
                await conn.create(base + "/eph", ephemeral=True)
                relay.stray_next = 1
                relay.reset()
                suspended = await states.wait(SessionState.SUSPENDED)
                born = await states.wait(SessionState.CONNECTED, after=suspended)
                died = await states.wait(SessionState.SUSPENDED, after=born)
                await states.wait(SessionState.CONNECTED, after=died)
                assert relay.strays == 1
                assert conn.session_id == session  # resumed, as after any drop
                stat = await conn.exists(base + "/eph")
                assert stat is not None and stat.ephemeral_owner == session
            finally:
                await conn.close()  # raised the supervisor's OSError

    run(main())
