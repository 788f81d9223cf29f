"""The Python API as a user meets it: help(), warnings for misuse, the self-wait check
across lock objects, and words a user reads."""

from __future__ import annotations

import asyncio
import gc
import pydoc
import re
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import zklocks
from helpers import run
from zklocks.cli import COMMANDS, main
from zklocks.server import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]


def unique(name: str) -> str:
    return f"/polish/{name}-{time.monotonic_ns()}"


def help_text(thing: object) -> str:
    return one_line_signatures(pydoc.render_doc(thing, renderer=pydoc.plaintext))


def one_line_signatures(text: str) -> str:
    """pydoc's text with each method signature on one line, as Python 3.11 and 3.12 write
    it: 3.13 breaks a long one after ``(``, a parameter a line, then ``) -> 'T'``."""

    def join(match: re.Match[str]) -> str:
        lines = match.group(1).splitlines()
        return "(" + ", ".join(line.removeprefix(" |").strip().rstrip(",") for line in lines)

    return re.sub(r"\(\n((?: \|      .*\n)+?) \|  (?=\))", join, text)


def test_signatures_read_the_same_from_both_pydoc_layouts() -> None:
    wrapped = (
        " |  lock(\n |      self,\n |      path: 'str',\n |      *,\n"
        " |      fair: 'bool' = True\n |  ) -> 'Lock'\n"
    )
    flat = " |  lock(self, path: 'str', *, fair: 'bool' = True) -> 'Lock'\n"
    assert one_line_signatures(wrapped) == flat == one_line_signatures(flat)


def test_help_of_lease_shows_token_and_node_and_no_internal_hooks() -> None:
    for cls in (zklocks.Lease, zklocks.AsyncLease):
        text = help_text(cls)
        assert re.search(r"^ \|  token\n \|      The fencing token", text, re.M), text
        assert re.search(r"^ \|  node\n", text, re.M)
        for hook in ("end", "mark_lost"):
            assert not re.search(rf"^ \|  {hook}\(", text, re.M), hook
            assert not hasattr(cls, hook), hook
        # the clock rule's own look is internal; check() and time_left() are the public
        # checkpoint and bound (issue 35)
        for public in ("check", "time_left"):
            assert re.search(rf"^ \|  {public}\(self\)", text, re.M), public


def test_help_of_clients_shows_concrete_return_types() -> None:
    client = help_text(zklocks.Client)
    assert "lock(self, path: 'str', *, fair: 'bool' = True" in client
    assert re.search(r"\block\(self, path.*\) -> 'Lock'", client)
    assert re.search(r"read_write_lock\(self, .*\) -> 'ReadWriteLock'", client)
    assert re.search(r"semaphore\(self, .*\) -> 'Lock'", client)
    assert "LockT" not in client and "ReadWriteT" not in client
    async_client = help_text(zklocks.AsyncClient)
    assert re.search(r"\block\(self, path.*\) -> 'AsyncLock'", async_client)
    assert re.search(r"read_write_lock\(self, .*\) -> 'AsyncReadWriteLock'", async_client)
    assert "a chroot must already exist" in client.lower()


def test_docstrings_say_what_calls_raise() -> None:
    acquire = zklocks.Lock.acquire.__doc__ or ""
    for error in ("LockTimeout", "AlreadyHeld", "ClientClosed", "InvalidArgument", "LockError"):
        assert error in acquire, error
    assert "ConnectionFailed" in (zklocks.Client.start.__doc__ or "")
    assert "fair=False" in (zklocks.Client.lock.__doc__ or "")


def test_sync_client_in_a_running_loop_warns(zk_server: ZooKeeperServer) -> None:
    async def misuse() -> None:
        with pytest.warns(RuntimeWarning, match="use zklocks.AsyncClient") as started:
            client = zklocks.Client(zk_server.hosts).start()
        assert started[0].filename == __file__  # points at the caller's line
        try:
            with pytest.warns(RuntimeWarning, match="AsyncClient") as acquired:
                client.lock(unique("in-loop")).acquire()
            assert acquired[0].filename == __file__
        finally:
            client.stop()

    asyncio.run(misuse())


def test_sync_client_outside_a_loop_does_not_warn(
    zk_server: ZooKeeperServer, recwarn: pytest.WarningsRecorder
) -> None:
    with zklocks.Client(zk_server.hosts) as client, client.lock(unique("quiet")):
        pass
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_client_never_stopped_warns_when_collected(zk_server: ZooKeeperServer) -> None:
    client = zklocks.Client(zk_server.hosts).start()
    session = client._session
    assert session is not None
    try:
        with pytest.warns(ResourceWarning, match="was never stopped"):
            del client
            gc.collect()
    finally:
        session.close()


def test_a_stopped_client_does_not_warn(
    zk_server: ZooKeeperServer, recwarn: pytest.WarningsRecorder
) -> None:
    client = zklocks.Client(zk_server.hosts).start()
    client.stop()
    del client
    gc.collect()
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]


def test_an_async_client_never_stopped_warns(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        client = await zklocks.AsyncClient(zk_server.hosts).start()
        connection = client._session.connection  # type: ignore[union-attr]
        with pytest.warns(ResourceWarning, match="was never stopped"):
            del client
            gc.collect()
        await connection.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("first", "second"),
    [("lock", "lock"), ("unfair", "lock"), ("write", "read"), ("read", "write"), ("lock", "read")],
)
def test_a_second_lock_object_that_would_wait_on_itself_is_refused(
    zk_server: ZooKeeperServer, first: str, second: str
) -> None:
    path = unique("self-wait")

    def make(client: zklocks.Client, kind: str) -> zklocks.Lock:
        if kind in ("read", "write"):
            return getattr(client.read_write_lock(path), kind)  # type: ignore[no-any-return]
        return client.lock(path, fair=kind != "unfair")

    with zklocks.Client(zk_server.hosts) as client:
        holder = make(client, first)
        with holder:
            started = time.monotonic()
            with pytest.raises(zklocks.AlreadyHeld, match="would wait on itself"):
                make(client, second).acquire()  # no timeout: it must not wait
            assert time.monotonic() - started < 5
            # another thread is a different contender: it waits, as it should
            other: list[BaseException] = []

            def contend() -> None:
                try:
                    make(client, second).acquire(timeout=0.3)
                except zklocks.LockTimeout as error:
                    other.append(error)

            thread = threading.Thread(target=contend)
            thread.start()
            thread.join(30)
            assert other
        with make(client, second):  # released: the second object may take it now
            pass
        assert holder.contenders() == []


def test_two_readers_through_two_objects_are_allowed(zk_server: ZooKeeperServer) -> None:
    path = unique("readers")
    with zklocks.Client(zk_server.hosts) as client:
        first, second = client.read_write_lock(path), client.read_write_lock(path)
        with first.read, second.read:
            assert len(first.contenders()) == 2


def test_async_second_lock_object_that_would_wait_on_itself_is_refused(
    zk_server: ZooKeeperServer,
) -> None:
    path = unique("async-self-wait")

    async def scenario() -> None:
        async with zklocks.AsyncClient(zk_server.hosts) as client, client.lock(path):
            with pytest.raises(zklocks.AlreadyHeld):
                await client.lock(path).acquire()

    run(scenario())


SEED = re.compile(r"(?<!random )(?<!--)\bseeds?\b", re.IGNORECASE)


def test_no_seed_jargon_where_users_read() -> None:
    """The project's first notes called its scenarios "seeds"; users never saw those.
    (The simulator's random seeds are real seeds and are left alone.)"""
    for name in zklocks.__all__:
        thing = getattr(zklocks, name)
        if not isinstance(thing, str):
            assert not SEED.search(help_text(thing)), name
    runner = CliRunner()
    assert not SEED.search(runner.invoke(main, ["--help"]).output)
    for command in COMMANDS:
        output = runner.invoke(main, [command, "--help"]).output
        assert not SEED.search(output), command
    for doc in ("README.md", "docs/locks.md", "docs/cli.md", "docs/architecture.md"):
        assert not SEED.search((ROOT / doc).read_text()), doc
    demo_modules = sorted((ROOT / "src/zklocks/_cli").glob("demo*.py"))
    assert len(demo_modules) >= 3, demo_modules  # the demo, its stage and its stories
    for module in demo_modules:
        assert not SEED.search(module.read_text()), module.name


def test_lock_objects_for_many_paths_are_not_remembered(zk_server: ZooKeeperServer) -> None:
    """A service that makes one lock object per order must not grow a table per path."""
    with zklocks.Client(zk_server.hosts) as client:
        for n in range(1000):
            client.lock(f"/polish/order-{n}")
        assert len(client._peers._by_path) < 130
