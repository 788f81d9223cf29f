"""``auth`` and ``acl`` on a real ZooKeeper: what another client can and cannot do.

The outsiders are kazoo clients (an independent implementation), unauthenticated or
with other digest credentials. Every test checks the lock still works for the owners.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

import zklocks
from acl_support import (
    Holder,
    assert_outsider_refused,
    assert_shared_in_fifo_order,
    wait_for_children,
)
from helpers import run
from zklocks.server import ZooKeeperServer

SECRET = "alice-s3cret"
ALICE = ("digest", f"alice:{SECRET}")


@pytest.fixture
def root() -> str:
    return f"/acl-{uuid.uuid4().hex[:10]}"


def outsider(hosts: str, auth: list[tuple[str, str]] | None) -> KazooClient:
    client = KazooClient(hosts=hosts, auth_data=auth)
    client.start(timeout=15)
    return client


@pytest.fixture(params=["unauthenticated", "other-digest"])
def stranger(request: pytest.FixtureRequest, zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    auth = None if request.param == "unauthenticated" else [("digest", "mallory:guess")]
    client = outsider(zk_server.hosts, auth)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def alice(zk_server: ZooKeeperServer) -> Iterator[zklocks.Client]:
    with zklocks.Client(zk_server.hosts, auth=[ALICE], acl="creator") as client:
        yield client


@pytest.fixture
def alice_kazoo(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """Alice's credentials in an independent client, to look at her tree."""
    client = outsider(zk_server.hosts, [ALICE])
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_outsiders_can_neither_delete_nor_plant_nor_remove_the_directory(
    alice: zklocks.Client, alice_kazoo: KazooClient, stranger: KazooClient, root: str
) -> None:
    path = f"{root}/locks/orders"
    lock = alice.lock(path)
    first, second = Holder(lock), Holder(lock)
    first.start()
    assert first.granted.wait(15)
    second.start()
    holder_name, waiter_name = wait_for_children(alice_kazoo, path, 2)
    assert_outsider_refused(stranger, path, [holder_name, waiter_name])
    with pytest.raises(NoAuthError):
        stranger.set_acls(path, [make_digest_acl("mallory", "guess", all=True)])
    with pytest.raises(NoAuthError):
        stranger.get_children(path)
    # the owners' lock is untouched: held, then handed over in order
    assert first.lease is not None and not first.lease.lost
    assert sorted(alice_kazoo.get_children(path)) == sorted([holder_name, waiter_name])
    first.release_now.set()
    assert second.granted.wait(15)
    assert second.lease is not None and second.lease.node == f"{path}/{waiter_name}"
    assert second.lease.token > first.lease.token
    second.release_now.set()
    first.join(15)
    second.join(15)
    # Empty now: deleting it takes delete permission on its parent, which we made too.
    # (Not the topmost one: its parent is "/", open by default; docs/security.md.)
    assert alice_kazoo.get_children(path) == []
    for directory in (path, f"{root}/locks"):
        with pytest.raises(NoAuthError):
            stranger.delete(directory)
    assert alice_kazoo.exists(path) is not None


def test_same_credentials_share_the_lock_as_before_fifo_fencing_and_loss(
    zk_server: ZooKeeperServer, alice_kazoo: KazooClient, root: str
) -> None:
    path = f"{root}/fifo"
    clients = [
        zklocks.Client(zk_server.hosts, auth=[ALICE], acl="creator").start() for _ in range(3)
    ]
    try:
        assert_shared_in_fifo_order(clients, path, alice_kazoo)
        # loss notice: someone with the same credentials deletes the holder's node
        lease = clients[0].lock(path).acquire(timeout=10)
        alice_kazoo.delete(lease.node)
        assert lease.wait_lost(10)
        assert lease.lost
    finally:
        for client in clients:
            client.stop()


def test_contenders_with_credentials_and_access_denied_without(
    zk_server: ZooKeeperServer, alice: zklocks.Client, root: str
) -> None:
    path = f"{root}/watched"
    lock = alice.lock(path, identifier="alice-worker")
    lease = lock.acquire(timeout=10)
    try:
        (holder,) = lock.contenders()
        assert holder.holder and holder.identifier == "alice-worker"
        assert holder.token == lease.token
        for auth in (None, [("digest", "mallory:guess")]):
            with zklocks.Client(zk_server.hosts, auth=auth) as other:
                with pytest.raises(zklocks.AccessDenied) as denied:
                    other.lock(path).contenders()
                assert denied.value.path == path
                assert denied.value.operation == "list"
                assert path in str(denied.value) and "list" in str(denied.value)
                assert isinstance(denied.value, zklocks.LockError)
    finally:
        lock.release()


@pytest.mark.parametrize("auth", [None, [("digest", "mallory:guess")]])
def test_acquire_by_an_outsider_is_access_denied_and_leaves_nothing(
    zk_server: ZooKeeperServer,
    alice: zklocks.Client,
    alice_kazoo: KazooClient,
    root: str,
    auth: list[tuple[str, str]] | None,
) -> None:
    path = f"{root}/guarded"
    lock = alice.lock(path)
    lease = lock.acquire(timeout=10)
    try:
        with zklocks.Client(zk_server.hosts, auth=auth) as other:
            for fair in (True, False):
                with pytest.raises(zklocks.AccessDenied) as denied:
                    other.lock(path, fair=fair).acquire(timeout=5)
                assert denied.value.operation == "create"
                assert denied.value.path == path
        assert alice_kazoo.get_children(path) == [lease.node.rsplit("/", 1)[1]]
        assert not lease.lost
    finally:
        lock.release()


def test_async_client_with_credentials_and_without(
    zk_server: ZooKeeperServer, alice_kazoo: KazooClient, root: str
) -> None:
    path = f"{root}/async"

    async def main() -> None:
        async with zklocks.AsyncClient(zk_server.hosts, auth=[ALICE], acl="creator") as client:
            lock = client.lock(path)
            async with lock as lease:
                assert [c.node for c in await lock.contenders()] == [lease.node]
                async with zklocks.AsyncClient(zk_server.hosts) as other:
                    with pytest.raises(zklocks.AccessDenied):
                        await other.lock(path).contenders()
                    with pytest.raises(zklocks.AccessDenied):
                        await other.lock(path).acquire(timeout=5)

    run(main())
    acl, _ = alice_kazoo.get_acls(path)
    assert [(a.id.scheme, a.id.id.split(":")[0]) for a in acl] == [("digest", "alice")]


@pytest.mark.parametrize("kind", ["fair", "one-node", "read", "semaphore"])
def test_an_open_directory_is_refused_with_the_fix_and_nothing_left(
    alice: zklocks.Client, kazoo: KazooClient, root: str, kind: str
) -> None:
    path = f"{root}/open"
    kazoo.create(path, makepath=True)  # world:anyone, all permissions
    lock: zklocks.Lock
    if kind == "fair":
        lock = alice.lock(path)
    elif kind == "one-node":
        lock = alice.lock(path, fair=False)
    elif kind == "read":
        lock = alice.read_write_lock(path).read
    else:
        lock = alice.semaphore(path, permits=2)
    with pytest.raises(zklocks.AccessDenied) as refused:
        lock.acquire(timeout=10)
    error = refused.value
    assert error.path == path and error.operation == "use"
    message = str(error)
    assert path in message
    assert "world:anyone=cdrwa" in message  # its ACL, as zkCli shows it
    assert "setAcl" in message and "deleteall" in message  # the fix
    assert SECRET not in message
    assert kazoo.get_children(path) == []  # our node was deleted on the way out
    assert not lock.held


def test_a_stricter_or_equal_directory_is_accepted(
    zk_server: ZooKeeperServer, alice: zklocks.Client, alice_kazoo: KazooClient, root: str
) -> None:
    path = f"{root}/made-by-hand"
    alice_kazoo.create(path, acl=[make_digest_acl("alice", SECRET, all=True)], makepath=True)
    with alice.lock(path) as lease:
        assert lease.node.startswith(path + "/")


def test_a_custom_acl_lets_operators_read_but_not_touch(
    zk_server: ZooKeeperServer, kazoo: KazooClient, root: str
) -> None:
    path = f"{root}/readable"
    readable = [zklocks.ACL("auth", "", 31), zklocks.ACL("world", "anyone", 1)]
    client = zklocks.Client(zk_server.hosts, auth=[ALICE], acl=readable)
    with client, client.lock(path, identifier="job") as lease:
        with zklocks.Client(zk_server.hosts) as operator:
            (seen,) = operator.lock(path).contenders()
            assert seen.identifier == "job" and seen.holder
        with pytest.raises(NoAuthError):
            kazoo.delete(lease.node)
        with pytest.raises(NoAuthError):
            kazoo.create(f"{path}/lock-x-0000000000")


def test_refused_credentials_end_start_with_connection_failed(
    zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "not-a-real-credential-42"
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(zk_server.hosts, auth=[("nosuchscheme", secret)], connect_timeout=10).start()
    assert time.monotonic() - started < 9  # refused at once, not timed out
    assert "AUTH_FAILED" in str(failed.value) and "credentials" in str(failed.value)
    assert secret not in str(failed.value) and secret not in caplog.text

    async def main() -> None:
        client = zklocks.AsyncClient(zk_server.hosts, auth=[("nosuchscheme", secret)])
        with pytest.raises(zklocks.ConnectionFailed, match="AUTH_FAILED"):
            await client.start()

    run(main(), 30)


def test_secrets_stay_out_of_reprs_logs_and_errors(
    zk_server: ZooKeeperServer, kazoo: KazooClient, caplog: pytest.LogCaptureFixture, root: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="zklocks")
    kazoo.create(f"{root}/open", makepath=True)
    shown: list[str] = []
    with zklocks.Client(zk_server.hosts, auth=[ALICE], acl="creator") as client:
        shown += [repr(client), repr(client._credentials), repr(client.lock(f"{root}/x"))]
        with client.lock(f"{root}/x") as lease:
            shown.append(repr(lease))
            shown += [repr(c) for c in client.lock(f"{root}/x").contenders()]
        with pytest.raises(zklocks.AccessDenied) as refused:
            client.lock(f"{root}/open").acquire(timeout=5)
        shown.append(str(refused.value))
    for text in [*shown, caplog.text]:
        assert SECRET not in text
        assert "alice:" + SECRET not in text
    # the digest identity's password hash is not shown either
    from zklocks._protocol.records import digest_id

    digest = digest_id("alice", SECRET).id.split(":", 1)[1]
    assert all(digest not in text for text in shown)


def test_bad_arguments_are_refused_before_connecting() -> None:
    hosts = "127.0.0.1:1"
    hidden = "Hunter2-secret"
    cases: list[dict[str, object]] = [
        {"acl": "creator"},  # no credentials: ZooKeeper would refuse every create
        {"acl": [zklocks.ACL("auth", "", 31)]},
        {"acl": "secret"},
        {"acl": []},
        {"auth": [("digest", hidden)]},  # no ':' between user and password
        {"auth": [("digest", f":{hidden}")]},  # no user
        {"auth": f"digest:user:{hidden}"},
        {"auth": [("digest",)]},
        {"auth": [("", hidden)]},
        {"ssl": "yes"},
    ]
    for kwargs in cases:
        with pytest.raises(zklocks.InvalidArgument) as refused:
            zklocks.Client(hosts, **kwargs)  # type: ignore[arg-type]
        assert hidden not in str(refused.value)
        with pytest.raises(zklocks.InvalidArgument):
            zklocks.AsyncClient(hosts, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(zklocks.InvalidArgument):
        zklocks.ACL("world", "anyone", 0)
    with pytest.raises(zklocks.InvalidArgument):
        zklocks.ACL("world", "anyone", 32)


def test_other_identities_can_share_ancestors_we_created(
    zk_server: ZooKeeperServer, alice: zklocks.Client, kazoo: KazooClient, root: str
) -> None:
    with alice.lock(f"{root}/locks/orders"):
        pass
    bob_auth = [("digest", "bob:bob-pw")]
    with zklocks.Client(zk_server.hosts, auth=bob_auth, acl="creator") as bob:
        with bob.lock(f"{root}/locks/billing") as lease:  # beside alice's, under hers
            assert lease.node.startswith(f"{root}/locks/billing/")
        with pytest.raises(zklocks.AccessDenied):
            bob.lock(f"{root}/locks/orders").acquire(timeout=5)  # hers stays hers
    with pytest.raises(NoAuthError):
        kazoo.delete(f"{root}/locks/orders")  # an empty directory: no delete on its parent


def test_an_election_carries_the_clients_acl(
    alice: zklocks.Client, alice_kazoo: KazooClient, stranger: KazooClient, root: str
) -> None:
    """An election is a lock kind: its directory and candidates get the client's ACL too,
    so an outsider can neither read who leads nor remove the leader's node."""
    path = f"{root}/elections/scheduler"
    with alice.election(path, identifier="node-a") as term:
        acls, _ = alice_kazoo.get_acls(path)
        assert [(acl.id.scheme, acl.id.id) for acl in acls] == [("digest", acls[0].id.id)]
        assert acls[0].id.id.startswith("alice:")
        with pytest.raises(NoAuthError):
            stranger.get_children(path)
        with pytest.raises(NoAuthError):
            stranger.delete(term.node)
        leader = alice.election(path).leader()
        assert leader is not None and leader.identifier == "node-a"
    assert alice_kazoo.get_children(path) == []
