"""SASL DIGEST-MD5 logins on a real ZooKeeper (Debian's 3.8, a JAAS ``Server`` section).

The enforcing server refuses every session that has not logged in with SASL
(``enforce.auth.enabled``); the outsider is kazoo logged in as another SASL user (an
independent implementation of the same login, through pure-sasl).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import ACL, Id

import zklocks
from acl_support import (
    Holder,
    assert_outsider_refused,
    assert_shared_in_fifo_order,
    wait_for_children,
)
from helpers import run
from zklocks.server import ZooKeeperServer

ALICE_SECRET = "alice-Pa55-s3cret"
BOB_SECRET = "bob-0ther-s3cret"
USERS = {"alice": ALICE_SECRET, "bob": BOB_SECRET}


def alice_login() -> zklocks.SASL:
    return zklocks.SASL(mechanism="DIGEST-MD5", username="alice", password=ALICE_SECRET)


@pytest.fixture(scope="module")
def enforcing() -> Iterator[ZooKeeperServer]:
    """A server that lets in only sessions logged in with SASL."""
    with ZooKeeperServer(
        tick_time=200, max_session_timeout=60_000, sasl_users=USERS, enforce_auth=True
    ) as server:
        yield server


@pytest.fixture(scope="module")
def lenient() -> Iterator[ZooKeeperServer]:
    """SASL logins offered, not required: a refused login is AUTH_FAILED there."""
    with ZooKeeperServer(tick_time=200, max_session_timeout=60_000, sasl_users=USERS) as server:
        yield server


@pytest.fixture
def root() -> str:
    return f"/sasl-{uuid.uuid4().hex[:10]}"


def kazoo_as(hosts: str, user: str) -> KazooClient:
    client = KazooClient(
        hosts=hosts,
        sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": USERS[user]},
    )
    client.start(timeout=15)
    return client


@pytest.fixture
def bob(enforcing: ZooKeeperServer) -> Iterator[KazooClient]:
    client = kazoo_as(enforcing.hosts, "bob")
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def alice_kazoo(enforcing: ZooKeeperServer) -> Iterator[KazooClient]:
    client = kazoo_as(enforcing.hosts, "alice")
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_a_lock_cycle_with_creator_acl_gives_nodes_the_sasl_identity(
    enforcing: ZooKeeperServer, alice_kazoo: KazooClient, root: str
) -> None:
    path = f"{root}/orders"
    with zklocks.Client(enforcing.hosts, sasl=alice_login(), acl="creator") as client:
        with client.lock(path) as lease:
            node_acl, _ = alice_kazoo.get_acls(lease.node)
            dir_acl, _ = alice_kazoo.get_acls(path)
            assert [(a.id.scheme, a.id.id, a.perms) for a in node_acl] == [("sasl", "alice", 31)]
            assert [(a.id.scheme, a.id.id, a.perms) for a in dir_acl] == [("sasl", "alice", 31)]
        # the directory it made passes the weaker-ACL check the next time
        with client.lock(path) as again:
            assert again.token > lease.token


def test_the_async_client_logs_in_and_cycles_a_lock(
    enforcing: ZooKeeperServer, alice_kazoo: KazooClient, root: str
) -> None:
    async def main() -> list[tuple[str, str]]:
        async with (
            zklocks.AsyncClient(enforcing.hosts, sasl=alice_login(), acl="creator") as client,
            client.lock(f"{root}/async") as lease,
        ):
            acl, _ = alice_kazoo.get_acls(lease.node)
            return [(a.id.scheme, a.id.id) for a in acl]

    assert run(main(), 30) == [("sasl", "alice")]


def test_another_sasl_user_can_neither_delete_nor_forge_nor_jump(
    enforcing: ZooKeeperServer, alice_kazoo: KazooClient, bob: KazooClient, root: str
) -> None:
    path = f"{root}/guarded"
    with zklocks.Client(enforcing.hosts, sasl=alice_login(), acl="creator") as client:
        lock = client.lock(path)
        order: list[str] = []
        first, second = Holder(lock, order), Holder(lock, order)
        first.start()
        assert first.granted.wait(15)
        second.start()
        holder_name, waiter_name = wait_for_children(alice_kazoo, path, 2)
        assert_outsider_refused(bob, path, [holder_name, waiter_name])
        # bob's own zklocks client is refused by the directory's ACL, not let in
        with (
            zklocks.Client(
                enforcing.hosts,
                sasl=zklocks.SASL(username="bob", password=BOB_SECRET),
                acl="creator",
            ) as other,
            pytest.raises(zklocks.AccessDenied),
        ):
            other.lock(path).acquire(timeout=5)
        assert first.lease is not None and not first.lease.lost
        first.release_now.set()
        assert second.granted.wait(15)
        assert second.lease is not None and second.lease.node == f"{path}/{waiter_name}"
        second.release_now.set()
        first.join(15)
        second.join(15)


def test_the_same_user_shares_the_lock_in_fifo_order(
    enforcing: ZooKeeperServer, alice_kazoo: KazooClient, root: str
) -> None:
    path = f"{root}/fifo"
    clients = [
        zklocks.Client(enforcing.hosts, sasl=alice_login(), acl="creator").start() for _ in range(3)
    ]
    try:
        assert_shared_in_fifo_order(clients, path, alice_kazoo)
    finally:
        for client in clients:
            client.stop()


def test_the_weaker_acl_check_reads_sasl_ids(
    enforcing: ZooKeeperServer, alice_kazoo: KazooClient, root: str
) -> None:
    alice_only = [ACL(31, Id("sasl", "alice"))]
    shared = [*alice_only, ACL(31, Id("sasl", "bob"))]
    alice_kazoo.create(f"{root}/mine", acl=alice_only, makepath=True)
    alice_kazoo.create(f"{root}/shared", acl=shared, makepath=True)
    with zklocks.Client(enforcing.hosts, sasl=alice_login(), acl="creator") as client:
        with client.lock(f"{root}/mine") as lease:  # as strict as asked: accepted
            assert lease.node.startswith(f"{root}/mine/")
        with pytest.raises(zklocks.AccessDenied) as refused:
            client.lock(f"{root}/shared").acquire(timeout=10)
    message = str(refused.value)
    assert "sasl:bob=cdrwa" in message  # the entry that grants more than asked
    assert ALICE_SECRET not in message
    assert alice_kazoo.get_children(f"{root}/shared") == []


@pytest.mark.parametrize("server", ["enforcing", "lenient"])
def test_a_wrong_password_fails_start_fast_and_for_good(
    server: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    zk: ZooKeeperServer = request.getfixturevalue(server)
    caplog.set_level(logging.DEBUG)
    wrong = "not-alices-password-7"
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(
            zk.hosts, sasl=zklocks.SASL(username="alice", password=wrong), connect_timeout=15
        ).start()
    assert time.monotonic() - started < 2
    assert "SASL authentication failed" in str(failed.value)
    assert wrong not in str(failed.value) and wrong not in caplog.text

    async def main() -> None:
        client = zklocks.AsyncClient(
            zk.hosts, sasl=zklocks.SASL(username="alice", password=wrong), connect_timeout=15
        )
        with pytest.raises(zklocks.ConnectionFailed, match="SASL authentication failed"):
            await client.start()

    started = time.monotonic()
    run(main(), 30)
    assert time.monotonic() - started < 2


def test_no_login_on_an_enforcing_server_says_so_and_names_the_option(
    enforcing: ZooKeeperServer,
) -> None:
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(enforcing.hosts, connect_timeout=15).start()
    assert time.monotonic() - started < 5
    message = str(failed.value)
    assert "requires authentication" in message and "sasl=" in message

    async def main() -> None:
        client = zklocks.AsyncClient(enforcing.hosts, connect_timeout=15)
        with pytest.raises(zklocks.ConnectionFailed, match="requires authentication"):
            await client.start()

    run(main(), 30)


def test_secrets_stay_out_of_reprs_logs_and_errors(
    enforcing: ZooKeeperServer, caplog: pytest.LogCaptureFixture, root: str
) -> None:
    caplog.set_level(logging.DEBUG)
    login = alice_login()
    shown = [repr(login), str(login)]
    with zklocks.Client(enforcing.hosts, sasl=login, acl="creator") as client:
        shown += [repr(client), repr(client._credentials)]
        with client.lock(f"{root}/x") as lease:
            shown.append(repr(lease))
            shown += [repr(c) for c in client.lock(f"{root}/x").contenders()]
    assert "alice" in shown[0]
    for text in [*shown, caplog.text]:
        assert ALICE_SECRET not in text


def test_bad_sasl_arguments_are_refused_at_once() -> None:
    with pytest.raises(zklocks.InvalidArgument, match="mechanism"):
        zklocks.SASL(mechanism="PLAIN", username="a", password="b")
    with pytest.raises(zklocks.InvalidArgument, match="username"):
        zklocks.SASL(password="b")
    with pytest.raises(zklocks.InvalidArgument, match="password"):
        zklocks.SASL(username="a")
    with pytest.raises(zklocks.InvalidArgument, match=r"zklocks\.SASL"):
        zklocks.Client("127.0.0.1:2181", sasl=("alice", "pw"))  # type: ignore[arg-type]


def test_the_login_is_made_again_after_a_server_restart_and_leases_continue(root: str) -> None:
    with ZooKeeperServer(
        tick_time=200, max_session_timeout=60_000, sasl_users=USERS, enforce_auth=True
    ) as server:
        states: list[zklocks.ConnectionState] = []
        reconnected = threading.Event()
        with zklocks.Client(
            server.hosts, sasl=alice_login(), acl="creator", session_timeout=15
        ) as client:

            def on_state(state: zklocks.ConnectionState) -> None:
                states.append(state)
                if state is zklocks.ConnectionState.CONNECTED:
                    reconnected.set()

            client.add_listener(on_state)
            kept = client.lock(f"{root}/kept")
            lease = kept.acquire(timeout=10)
            server.restart()
            assert reconnected.wait(30), states
            assert zklocks.ConnectionState.SUSPENDED in states
            # the enforcing server answers only a session that logged in again
            (holder,) = client.lock(f"{root}/kept").contenders()
            assert holder.holder and holder.token == lease.token
            assert not lease.lost
            with client.lock(f"{root}/second") as other:
                assert other.token > 0
            kept.release()
            assert lease.ended and not lease.lost


def test_a_login_refused_on_reconnect_ends_the_client_instead_of_retrying(
    tmp_path: Path, root: str
) -> None:
    data = tmp_path / "data"
    first = ZooKeeperServer(
        data_dir=data, tick_time=200, max_session_timeout=60_000, sasl_users=USERS
    )
    first.start()
    try:
        states: list[zklocks.ConnectionState] = []
        closed = threading.Event()

        def on_state(state: zklocks.ConnectionState) -> None:
            states.append(state)
            if state is zklocks.ConnectionState.CLOSED:
                closed.set()

        client = zklocks.Client(first.hosts, sasl=alice_login(), session_timeout=15).start()
        client.add_listener(on_state)
        lease = client.lock(f"{root}/held").acquire(timeout=10)
        first.stop()
        # the same port and data, but alice's password has changed meanwhile
        changed = {**USERS, "alice": "a-new-password"}
        second = ZooKeeperServer(
            port=first.port, data_dir=data, tick_time=200, max_session_timeout=60_000,
            sasl_users=changed,
        )  # fmt: skip
        second.start()
        try:
            assert closed.wait(15), states
            assert lease.wait_lost(5)
            with pytest.raises(zklocks.ClientClosed):
                client.lock(f"{root}/held").acquire(timeout=1)
            client.stop()
        finally:
            second.stop()
    finally:
        first.stop()
