"""SASL on the wire, against bytes captured from Debian's ZooKeeper 3.8 (DIGEST-MD5
enforced), and the ``SASL`` login object: what it sends, what it shows, what it refuses."""

from __future__ import annotations

import pytest

import zklocks
from zklocks._core.security import acl_policy, credentials
from zklocks._protocol import codec
from zklocks._protocol.constants import OpCode
from zklocks._protocol.errors import AuthFailedError, SessionClosedRequireSaslAuthError
from zklocks._protocol.jute import INT, REPLY_HEADER
from zklocks._protocol.records import GetSASLRequest, Id, SetSASLResponse
from zklocks._protocol.session import Session, WireReply
from zklocks._transport.sasl import SASL, login_of, plain_packets, with_login

# The opening step: xid 1, opcode sasl (102), an empty token.
CAPTURED_FIRST_REQUEST = bytes.fromhex("0000000c000000010000006600000000")
# The server's DIGEST-MD5 challenge in answer (xid 1, zxid 0, err 0, buffer).
CAPTURED_CHALLENGE_REPLY = bytes.fromhex(
    "0000007900000001000000000000000000000000000000657265616c6d3d227a6b2d7361736c2d6d"
    "6435222c6e6f6e63653d2263626e54654a6a672b664d655a53654c72572b3668324c633878353451"
    "754b4e6a5a4f357242782f222c636861727365743d7574662d382c616c676f726974686d3d6d6435"
    "2d73657373"
)
CHALLENGE = (
    b'realm="zk-sasl-md5",nonce="cbnTeJjg+fMeZSeLrW+6h2Lc8x54QuKNjZO5rBx/",'
    b"charset=utf-8,algorithm=md5-sess"
)
# An enforcing server's answer to a ping from a session that has not logged in.
CAPTURED_REFUSED_PING = bytes.fromhex("00000010fffffffe0000000000000000ffffff84")
SECRET = "s3cret-Pa55"


def connected_session() -> Session:
    session = Session(timeout_ms=10_000)
    session.connect()
    body = INT.pack(0) + INT.pack(10_000) + (1).to_bytes(8, "big") + INT.pack(16) + b"p" * 16
    session.receive(INT.pack(len(body) + 1) + body + b"\x00")
    assert session.connected
    return session


def test_the_first_step_encodes_as_the_server_accepted_it() -> None:
    session = connected_session()
    assert session.request(GetSASLRequest(b""), "step") == CAPTURED_FIRST_REQUEST
    assert codec.plan(GetSASLRequest(b"x"), "", False).opcode == OpCode.SASL == 102


def test_the_challenge_reply_decodes_to_the_servers_token() -> None:
    session = connected_session()
    session.request(GetSASLRequest(b""), "step")
    (reply,) = session.receive(CAPTURED_CHALLENGE_REPLY)
    assert isinstance(reply, WireReply) and reply.ok and reply.token == "step"
    assert reply.value == SetSASLResponse(CHALLENGE)
    assert session.in_flight == 0


@pytest.mark.parametrize(
    ("code", "error"), [(-115, AuthFailedError), (-124, SessionClosedRequireSaslAuthError)]
)
def test_a_refused_step_is_a_failed_reply(code: int, error: type[Exception]) -> None:
    session = connected_session()
    session.request(GetSASLRequest(b"response"), "step")
    header = INT.pack(16) + REPLY_HEADER.pack(1, 0, code)
    (reply,) = session.receive(header)
    assert isinstance(reply, WireReply) and not reply.ok and isinstance(reply.value, error)


def test_an_enforcing_servers_refused_ping_is_a_failed_reply() -> None:
    session = connected_session()
    session.ping("ping")
    (reply,) = session.receive(CAPTURED_REFUSED_PING)
    assert isinstance(reply, WireReply) and reply.token == "ping" and not reply.ok
    assert isinstance(reply.value, SessionClosedRequireSaslAuthError)


def test_tokens_stay_out_of_reprs() -> None:
    assert "nonce" not in repr(GetSASLRequest(CHALLENGE))
    assert "nonce" not in repr(SetSASLResponse(CHALLENGE))
    assert str(len(CHALLENGE)) in repr(SetSASLResponse(CHALLENGE))


def test_the_digest_md5_answer_to_the_captured_challenge() -> None:
    mechanism = SASL(username="alice", password=SECRET).mechanism_for("127.0.0.1")
    assert mechanism.first() == b""  # DIGEST-MD5: the server speaks first
    answer = mechanism.answer(CHALLENGE)
    fields = dict(part.split(b"=", 1) for part in answer.split(b","))
    assert fields[b"username"] == b'"alice"'
    assert fields[b"realm"] == b'"zk-sasl-md5"'
    assert fields[b"digest-uri"] == b'"zookeeper/zk-sasl-md5"'  # the server's fixed name
    assert SECRET.encode() not in answer
    assert not mechanism.complete
    with pytest.raises(Exception, match="SASL authentication failed"):
        mechanism.answer(b'rspauth="0123456789abcdef0123456789abcdef"')  # a forged server
    mechanism.dispose()


def test_the_login_shows_its_user_never_its_password() -> None:
    login = zklocks.SASL(mechanism="DIGEST-MD5", username="alice", password=SECRET)
    assert "alice" in repr(login) and SECRET not in repr(login) and SECRET not in str(login)
    assert login.identity() == Id("sasl", "alice")
    assert login == zklocks.SASL(username="alice", password=SECRET)
    assert login != zklocks.SASL(username="alice", password="other")


def test_the_login_gives_creator_acls_its_identity_and_is_no_auth_packet() -> None:
    login = SASL(username="alice", password=SECRET)
    creds = credentials(with_login([("digest", "ops:pw")], login))
    assert plain_packets(creds) == [("digest", b"ops:pw")]
    assert login_of(creds) is login
    policy = acl_policy("creator", creds)
    assert policy is not None
    assert [(entry.scheme, entry.id) for entry in policy.stored][-1] == ("sasl", "alice")
    assert credentials(with_login(None, login)) == (login,)


def test_a_gssapi_login_has_no_password_and_shows_its_principal() -> None:
    login = zklocks.SASL(mechanism="GSSAPI", service="zookeeper", principal="alice@EXAMPLE.COM")
    assert repr(login) == (
        "SASL(mechanism='GSSAPI', service='zookeeper', principal='alice@EXAMPLE.COM')"
    )
    assert login.identity() == Id("sasl", "alice@EXAMPLE.COM")  # the realm is kept
    assert login != zklocks.SASL(mechanism="GSSAPI", principal="bob@EXAMPLE.COM")


def test_missing_mechanism_packages_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "kerberos" else real(name)
    )
    with pytest.raises(zklocks.InvalidArgument, match=r"zklocks\[kerberos\]"):
        zklocks.SASL(mechanism="GSSAPI")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "puresasl" else real(name)
    )
    with pytest.raises(zklocks.InvalidArgument, match=r"zklocks\[sasl\]"):
        zklocks.SASL(username="alice", password="pw")


def test_bad_values_are_refused_with_what_to_do() -> None:
    with pytest.raises(zklocks.InvalidArgument, match="no username or password"):
        zklocks.SASL(mechanism="GSSAPI", username="alice", password="pw")
    with pytest.raises(zklocks.InvalidArgument, match="service"):
        zklocks.SASL(username="a", password="b", service="")
    with pytest.raises(zklocks.InvalidArgument, match="principal"):
        zklocks.SASL(username="a", password="b", principal="a@REALM")
