"""The pure security pieces: credentials, ACL policies and checks, the wire encoding."""

from __future__ import annotations

import ssl
import struct

import pytest

import zklocks
from zklocks._core import security as _security
from zklocks._core.steps import parent_creates
from zklocks._protocol import codec
from zklocks._protocol import records as _records
from zklocks._protocol.constants import OpCode
from zklocks._protocol.jute import write_string
from zklocks._protocol.records import Id, WireACL, digest_id
from zklocks._transport import diagnose as _diagnose

SECRET = "pa55:word"  # a ':' in a password is allowed (split on the first one)


def test_a_credential_hides_its_secret_and_knows_its_identity() -> None:
    (cred,) = _security.credentials([("digest", f"alice:{SECRET}")])
    assert cred.packet == ("digest", f"alice:{SECRET}".encode())
    assert SECRET not in repr(cred) and "alice" in repr(cred)
    assert cred.identity() == digest_id("alice", SECRET)
    (raw,) = _security.credentials([("ip", b"10.0.0.1")])
    assert raw.identity() is None and "10.0.0.1" not in repr(raw)


def test_creator_expands_to_our_digest_identities() -> None:
    creds = _security.credentials([("digest", f"alice:{SECRET}")])
    policy = _security.acl_policy("creator", creds)
    assert policy is not None
    assert policy.wire == (WireACL(31, Id("auth", "")),)
    ident = digest_id("alice", SECRET)
    assert policy.stored == (zklocks.ACL("digest", ident.id, 31),)
    assert _security.acl_policy("open", creds) is None


def test_weaker_entries_are_what_the_directory_grants_beyond_the_policy() -> None:
    ident = digest_id("alice", SECRET)
    allowed = (zklocks.ACL("digest", ident.id, 31), zklocks.ACL("world", "anyone", 1))
    same = [WireACL(31, ident)]
    assert _security.weaker_entries(same, allowed) == []
    assert _security.weaker_entries([WireACL(1, Id("world", "anyone"))], allowed) == []
    opened = [WireACL(31, Id("world", "anyone"))]
    assert _security.weaker_entries(opened, allowed) == [zklocks.ACL("world", "anyone", 31)]
    # a redacted digest (we lacked ADMIN) cannot be checked: weaker
    redacted = [WireACL(31, Id("digest", "alice:x"))]
    assert _security.weaker_entries(redacted, allowed)
    other = [WireACL(8, Id("digest", digest_id("bob", "b").id))]
    assert _security.weaker_entries(other, allowed)


def test_descriptions_never_show_a_password_hash() -> None:
    ident = digest_id("alice", SECRET)
    text = _security.describe([WireACL(31, ident), WireACL(5, Id("world", "anyone"))])
    assert text == "digest:alice=cdrwa, world:anyone=cr"
    assert ident.id.split(":")[1] not in text
    assert str(zklocks.ACL("auth", "", 31)) == "auth (the creator)=cdrwa"


def test_ssl_argument_forms() -> None:
    assert _security.ssl_context(None) is None
    default = _security.ssl_context(True)
    assert isinstance(default, ssl.SSLContext) and default.check_hostname
    custom = ssl.create_default_context()
    assert _security.ssl_context(custom) is custom
    with pytest.raises(zklocks.InvalidArgument):
        _security.ssl_context("yes")


def test_a_create_carries_our_acl_on_the_wire() -> None:
    acl = (WireACL(31, Id("auth", "")), WireACL(1, Id("world", "anyone")))
    plan = codec.plan(_records.Create("/l/n-", b"d", sequential=True, acl=acl), "", False)
    assert plan.opcode == OpCode.CREATE2
    expected_acl = (
        struct.pack(">i", 2)
        + struct.pack(">i", 31) + write_string("auth") + write_string("")
        + struct.pack(">i", 1) + write_string("world") + write_string("anyone")
    )  # fmt: skip
    path = write_string("/l/n-")
    assert plan.body == path + write_string("d")[:4] + b"d" + expected_acl + struct.pack(">i", 3)
    # the open ACL when none is given (the precomputed fast path)
    open_plan = codec.plan(_records.Create("/l/n-", b"d", sequential=True), "", False)
    assert b"world" in open_plan.body and b"auth" not in open_plan.body


def test_get_acl_round_trip() -> None:
    plan = codec.plan(_records.GetACL("/l"), "/chroot", False)
    assert plan.opcode == OpCode.GET_ACL and plan.body == write_string("/chroot/l")
    reply = (
        struct.pack(">i", 1) + struct.pack(">i", 31) + write_string("digest")
        + write_string("alice:hash") + bytes(68)
    )  # fmt: skip
    decoded = plan.decode(reply, 0, "/chroot")
    assert decoded == _records.NodeACL((WireACL(31, Id("digest", "alice:hash")),))


def test_created_ancestors_let_others_share_them_but_not_delete() -> None:
    acl = (WireACL(31, Id("auth", "")),)
    creates = parent_creates("/a/b/lock", acl)
    assert [c.acl for c in creates[:2]] == [(*acl, WireACL(5, Id("world", "anyone")))] * 2
    assert creates[2].acl == acl  # the lock directory: ours alone
    assert all(c.acl == () for c in parent_creates("/a/b/lock"))  # open: as before


def test_the_simulator_refuses_security_options_it_does_not_model() -> None:
    import zklocks.sim

    make = zklocks.sim.session_factory(zklocks.sim.SimServer())
    for kwargs in ({"acl": "creator", "auth": [("digest", "a:b")]}, {"ssl": True}):
        with pytest.raises(zklocks.InvalidArgument, match="simulator"):
            zklocks.Client("sim", session_factory=make, **kwargs)  # type: ignore[arg-type]
    zklocks.Client("sim", session_factory=make)  # without them: as before


def _tls_alert(reason: str) -> ssl.SSLError:
    """An ``ssl.SSLError`` as the ssl module raises it for an alert from the server, whatever
    OpenSSL this machine has (the module sets ``reason`` and ``library`` itself)."""
    error = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower().replace('_', ' ')} (_ssl.c:992)")
    error.reason = reason
    error.library = "SSL"
    return error


@pytest.mark.parametrize(
    "reason",
    [
        "TLSV13_ALERT_CERTIFICATE_REQUIRED",  # TLS 1.3: the server names the cause itself
        "SSLV3_ALERT_BAD_CERTIFICATE",  # TLS 1.2, a JDK that answers bad_certificate
        # TLS 1.2, Debian 12's ZooKeeper and OpenJDK 17 (Debian's python3, OpenSSL 3.0):
        # no certificate_required alert in 1.2, so a plain handshake_failure
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
    ],
)
def test_a_refused_tls_handshake_names_the_missing_client_certificate(reason: str) -> None:
    message = _diagnose.connect_failure_reason(_tls_alert(reason))
    assert message is not None
    assert reason in message
    assert "client certificate" in message
    assert "load_cert_chain" in message
    assert "--tls" not in message  # the library names its own arguments; the CLI adds flags


def test_other_tls_failures_say_what_they_are() -> None:
    plain = _diagnose.connect_failure_reason(_tls_alert("WRONG_VERSION_NUMBER"))
    assert plain is not None and "plaintext" in plain and "ssl=" in plain
    other = _diagnose.connect_failure_reason(_tls_alert("TLSV1_ALERT_PROTOCOL_VERSION"))
    assert other == "TLS handshake failed (TLSV1_ALERT_PROTOCOL_VERSION)"
    assert _diagnose.connect_failure_reason(ConnectionRefusedError()) is None
