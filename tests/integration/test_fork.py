"""A client inherited across ``fork`` is the parent's: the child gets ``ClientClosed`` at
once (saying fork, and what to do), sends nothing on the parent's connection, and leaves
the parent's session and leases as they were; a client made in the child works.

What the server received on the parent's connection is read from ZooKeeper's ``cons``
(per-connection packet counts), with the parent's session timeout long enough (60 s,
pings every 20 s) that the parent itself sends nothing while the child runs; the test
checks that too, rather than trusting it.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import select
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import zklocks
from helpers import run, wait_for_watch
from zklocks.server import ZooKeeperServer

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform"),
    # Python 3.12+ warns whenever a process with threads forks; forking one is the point
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]


def unique(name: str) -> str:
    return f"/fork/{name}-{time.monotonic_ns()}"


@pytest.fixture
def observer(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts) as client:
        yield client


def received_on(server: ZooKeeperServer, session_id: int) -> int:
    """Packets the server has received on the connection of ``session_id`` (``cons``)."""
    for line in server.four_letter("cons").splitlines():
        if f"sid=0x{session_id:x}," in line or f"sid=0x{session_id:x})" in line:
            found = re.search(r"recved=(\d+)", line)
            assert found, line
            return int(found.group(1))
    raise AssertionError(f"no connection of session 0x{session_id:x} in cons")


def attempt(call: Callable[[], object]) -> str:
    """What a call on an inherited object did: "returned" or the error's class name."""
    try:
        call()
    except (zklocks.ClientClosed, zklocks.NotHeld) as error:
        return type(error).__name__
    return "returned"


def in_forked_child(work: Callable[[], dict[str, Any]], limit: float = 30.0) -> dict[str, Any]:
    """Run ``work`` in a child made by a bare ``os.fork()`` (as prefork servers do); its
    result comes back as JSON on a pipe. A child that hangs is killed and fails the test."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0
        try:
            os.close(read_end)
            payload = json.dumps(work()).encode()
        except BaseException as error:
            payload = json.dumps({"error": repr(error)}).encode()
            status = 1
        try:
            os.write(write_end, payload)
        finally:
            os._exit(status)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + limit
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"the forked child hung for {limit} s")
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(b"".join(chunks) or b"{}")
    assert os.waitstatus_to_exitcode(status) == 0, result
    return result


def test_sync_client_inherited_across_fork_refuses_at_once_and_leaves_the_parent_alone(
    zk_server: ZooKeeperServer, observer: zklocks.Client
) -> None:
    path, other = unique("sync"), unique("sync-child")
    states: list[zklocks.ConnectionState] = []
    with zklocks.Client(zk_server.hosts, session_timeout=60) as client:
        client.add_listener(states.append)
        lock = client.lock(path)
        lease = lock.acquire(timeout=5)
        session_id = lease.owner
        # The lease's watch on its own node goes out from the loop thread after acquire
        # returned: wait for it, or it lands after the count and reads as the child's.
        wait_for_watch(zk_server, session_id, lease.node)
        before = received_on(zk_server, session_id)
        session: Any = client._session
        last_send = session._connection._liveness.last_send
        # the child's copies of what the parent's session runs on (private, for the test)
        inherited = {
            "socket": session._connection._out.wire.transport.get_extra_info("socket").fileno(),
            "direct socket": session._connection._writer.socket.fileno(),
            "epoll": session._loop._selector.fileno(),
        }

        def child() -> dict[str, Any]:
            started = time.monotonic()
            try:  # a lock nobody holds: unguarded, this writes on the parent's socket
                client.lock(unique("first")).acquire(timeout=1)
                first = "acquire returned"
            except zklocks.ClientClosed as error:
                first = str(error)
            took = time.monotonic() - started
            result = {
                "first": first,
                "took": took,
                "held lock": attempt(lambda: lock.acquire(timeout=1)),
                "lost": lease.lost,
                "connected": client.connected,
                "descriptors": {
                    name: os.readlink(f"/proc/self/fd/{fd}") for name, fd in inherited.items()
                },
                "lease.release": attempt(lease.release),
                "lock.release": attempt(lock.release),
                "contenders": attempt(lock.contenders),
                "start": attempt(client.start),
                "stop": attempt(client.stop),
            }
            with zklocks.Client(zk_server.hosts) as own:  # a client of the child's own
                result["parent's lock, to the child"] = own.lock(path).try_acquire() is None
                result["child's token"] = own.lock(other).acquire(timeout=10).token
            return result

        seen = in_forked_child(child)

        assert "fork" in seen["first"] and "Make a new client" in seen["first"], seen
        assert seen["took"] < 2.0, seen
        assert seen["held lock"] == "ClientClosed", seen
        # dropped quietly: the child's descriptors name /dev/null, the parent's are its own
        assert set(seen["descriptors"].values()) == {os.devnull}, seen
        for name, fd in inherited.items():
            assert os.readlink(f"/proc/self/fd/{fd}") != os.devnull, name
        assert seen["lost"] is True and seen["connected"] is False, seen
        for call in ("lease.release", "lock.release", "contenders", "start"):
            assert seen[call] in ("ClientClosed", "NotHeld", "returned"), seen
        assert seen["contenders"] == "ClientClosed" and seen["start"] == "ClientClosed"
        assert seen["stop"] == "returned", seen
        assert seen["parent's lock, to the child"] is True, seen
        assert seen["child's token"] > lease.token

        # Nothing reached the server on the parent's connection, and the parent sent
        # nothing itself meanwhile (so the count is the child's doing, if it moved).
        assert session._connection._liveness.last_send == last_send
        assert received_on(zk_server, session_id) == before
        # The parent: same session, still connected, still holding with the same token.
        assert states == [] and client.connected
        assert lock.held and not lease.lost
        (holder,) = observer.lock(path).contenders()
        assert holder.holder and holder.node == lease.node and holder.token == lease.token
        assert lock.contenders()[0].token == lease.token  # its own calls still work
        lock.release()
    assert observer.lock(path).contenders() == []


def test_async_client_inherited_across_fork_refuses_at_once_and_leaves_the_parent_alone(
    zk_server: ZooKeeperServer, observer: zklocks.Client
) -> None:
    path, other = unique("async"), unique("async-child")
    context = multiprocessing.get_context("fork")

    async def parent() -> None:
        async with zklocks.AsyncClient(zk_server.hosts, session_timeout=60) as client:
            lock = client.lock(path)
            lease = await lock.acquire(timeout=5)
            # the lease's own-node watch goes out on the loop's next turns: counted first
            await asyncio.to_thread(wait_for_watch, zk_server, lease.owner, lease.node)
            before = received_on(zk_server, lease.owner)

            async def in_child() -> dict[str, Any]:
                started = time.monotonic()
                try:
                    await lock.acquire(timeout=1)
                    first = "acquire returned"
                except zklocks.ClientClosed as error:
                    first = str(error)
                result: dict[str, Any] = {"first": first, "took": time.monotonic() - started}
                result["lost"] = lease.lost
                for name, call in (("lease.release", lease.release), ("stop", client.stop)):
                    try:
                        await call()
                        result[name] = "returned"
                    except (zklocks.ClientClosed, zklocks.NotHeld) as error:
                        result[name] = type(error).__name__
                async with zklocks.AsyncClient(zk_server.hosts) as own:
                    result["child's token"] = (await own.lock(other).acquire(timeout=10)).token
                return result

            receiver, sender = context.Pipe(duplex=False)

            def child() -> None:  # a new loop in the child: the parent's is not ours
                sender.send(asyncio.run(in_child()))

            process = context.Process(target=child)
            process.start()
            sender.close()
            try:
                assert await asyncio.to_thread(receiver.poll, 30), "the forked child hung"
                seen = receiver.recv()
            finally:
                await asyncio.to_thread(process.join, 30)
                if process.is_alive():
                    process.kill()
            assert process.exitcode == 0, seen

            assert "fork" in seen["first"], seen
            assert seen["took"] < 2.0, seen
            assert seen["lost"] is True, seen
            assert seen["lease.release"] in ("ClientClosed", "NotHeld"), seen
            assert seen["stop"] == "returned", seen
            assert seen["child's token"] > lease.token
            assert received_on(zk_server, lease.owner) == before
            assert lock.held and not lease.lost and client.connected
            (holder,) = await asyncio.to_thread(observer.lock(path).contenders)
            assert holder.node == lease.node and holder.token == lease.token
            await lease.release()

    run(parent(), 90)
    assert observer.lock(path).contenders() == []


def test_a_client_never_started_before_the_fork_starts_in_the_child(
    zk_server: ZooKeeperServer,
) -> None:
    client = zklocks.Client(zk_server.hosts)  # made, not started: nothing to inherit
    path = unique("unstarted")

    def child() -> dict[str, Any]:
        with client:
            return {"token": client.lock(path).acquire(timeout=10).token}

    assert in_forked_child(child)["token"] > 0
