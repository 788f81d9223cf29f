"""SASL GSSAPI (Kerberos) logins on a real ZooKeeper that enforces them, with a real MIT
KDC started by the tests (``tests/kdc_support.py``).

Clients reach the server as ``localhost`` (the service principal is
``zookeeper/localhost@ZKLOCKS.TEST``); the realm's ``krb5.conf`` reaches libkrb5 through
``KRB5_CONFIG``, the tickets through ``KRB5CCNAME`` (a ``kinit``) or
``KRB5_CLIENT_KTNAME`` (a client keytab).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_cli_security import finish
from test_cli_security import zklocks as run_cli

import zklocks
from helpers import run
from kdc_support import KDC, REALM
from zklocks._protocol.records import Id
from zklocks.server import ServerKerberos, ZooKeeperServer


@dataclass
class Realm:
    kdc: KDC
    server: ZooKeeperServer
    keytabs: dict[str, Path]

    @property
    def hosts(self) -> str:
        return f"localhost:{self.server.port}"  # the host in the service principal


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    kdc = KDC(tmp_path_factory.mktemp("kdc"))
    kdc.start()
    try:
        service = kdc.add_principal("zookeeper/localhost")
        keytabs = {user: kdc.add_principal(user) for user in ("alice", "bob")}
        kerberos = ServerKerberos(service, f"zookeeper/localhost@{REALM}", kdc.krb5_conf)
        with ZooKeeperServer(
            tick_time=200, max_session_timeout=60_000, kerberos=kerberos, enforce_auth=True
        ) as server:
            yield Realm(kdc, server, keytabs)
    finally:
        kdc.stop()


@pytest.fixture
def as_alice(realm: Realm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """alice's client keytab, and an empty credential cache collection of the test's own."""
    monkeypatch.setenv("KRB5_CONFIG", str(realm.kdc.krb5_conf))
    # a collection of caches (DIR:), so that tickets of several principals can coexist
    (tmp_path / "ccaches").mkdir()
    monkeypatch.setenv("KRB5CCNAME", f"DIR:{tmp_path / 'ccaches'}")
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", str(realm.keytabs["alice"]))


def kinit(realm: Realm, user: str) -> None:
    """A ticket for ``user`` in the credential cache ``KRB5CCNAME`` names."""
    subprocess.run(
        ["kinit", "-kt", str(realm.keytabs[user]), user],
        env={**os.environ},
        check=True,
        capture_output=True,
        timeout=30,
    )


def gssapi(principal: str | None = None) -> zklocks.SASL:
    return zklocks.SASL(mechanism="GSSAPI", service="zookeeper", principal=principal)


@pytest.mark.usefixtures("as_alice")
def test_a_lock_cycle_with_the_client_keytab_keeps_the_realm(realm: Realm) -> None:
    login = gssapi()
    assert login.identity() == Id("sasl", f"alice@{REALM}")
    path = f"/krb/{uuid.uuid4().hex[:8]}"
    with zklocks.Client(realm.hosts, sasl=login, acl="creator") as client:
        with client.lock(path) as lease:
            (holder,) = client.lock(path).contenders()
            assert holder.holder and holder.token == lease.token
        # the directory made with the realm-qualified id passes the weaker-ACL check
        with client.lock(path) as again:
            assert again.token > lease.token
    # status shows the directory's ACL, realm included
    code, out, err = finish(
        run_cli("status", path, "--sasl-mechanism", "GSSAPI", env={"ZKLOCKS_HOSTS": realm.hosts})
    )
    assert code == 0, err
    assert out.splitlines()[-1] == f"ACL of the lock directory: sasl:alice@{REALM}=cdrwa"


@pytest.mark.usefixtures("as_alice")
def test_the_async_client_logs_in_with_kerberos(realm: Realm) -> None:
    async def main() -> int:
        async with (
            zklocks.AsyncClient(realm.hosts, sasl=gssapi(), acl="creator") as client,
            client.lock(f"/krb/{uuid.uuid4().hex[:8]}") as lease,
        ):
            return lease.token

    assert run(main(), 30) > 0


@pytest.mark.usefixtures("as_alice")
def test_the_credential_cache_and_principal_choose_the_identity(realm: Realm) -> None:
    kinit(realm, "bob")  # bob's ticket in the cache; alice's key in the client keytab
    path = f"/krb/{uuid.uuid4().hex[:8]}"
    assert gssapi().identity() == Id("sasl", f"bob@{REALM}")
    assert gssapi("alice").identity() == Id("sasl", f"alice@{REALM}")
    with zklocks.Client(realm.hosts, sasl=gssapi("alice"), acl="creator") as alice:
        lease = alice.lock(path).acquire(timeout=10)
        # bob (the cache's default principal) is another identity: kept out
        with (
            zklocks.Client(realm.hosts, sasl=gssapi(), acl="creator") as bob,
            pytest.raises(zklocks.AccessDenied),
        ):
            bob.lock(path).acquire(timeout=5)
        assert not lease.lost


@pytest.mark.usefixtures("as_alice")
def test_an_unknown_principal_fails_start_fast(realm: Realm) -> None:
    started = time.monotonic()
    with pytest.raises(zklocks.ConnectionFailed) as failed:
        zklocks.Client(realm.hosts, sasl=gssapi("carol"), connect_timeout=15).start()
    assert time.monotonic() - started < 2
    assert "SASL authentication failed" in str(failed.value)
    assert "carol" in str(failed.value)
