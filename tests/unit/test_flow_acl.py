"""The acquire flow with an ACL, stepped by hand: the directory check in the create's
round trip, our identities learnt from our own node, refusal with nothing left."""

from __future__ import annotations

import pytest

import zklocks
from flow_support import ATTEMPT, MARKED, PATH, SESSION, Stepper, created, mine, spec
from zklocks._core import security as _security
from zklocks._core.flow import Acquired, acquire
from zklocks._core.ops import Pipeline, SessionId
from zklocks._protocol.errors import NoAuthError, NoNodeError
from zklocks._protocol.records import (
    Create,
    Delete,
    GetACL,
    GetChildren,
    GetData,
    Id,
    Multi,
    NodeACL,
    NodeData,
    Stat,
    WireACL,
    digest_id,
)

CREDS = _security.credentials([("digest", "alice:pw")])
POLICY = _security.acl_policy("creator", CREDS)
OURS = NodeACL((WireACL(31, digest_id("alice", "pw")),))
OPEN = NodeACL((WireACL(31, Id("world", "anyone")),))
X509 = WireACL(31, Id("x509", "CN=client"))


def test_with_an_acl_the_directory_is_read_in_the_same_round_trip() -> None:
    s = Stepper(acquire(spec(acl=POLICY)))
    op = s.expect(Pipeline, (created(mine(0), czxid=42), [mine(0)], OURS))
    create, listing, directory = op.requests
    assert isinstance(create, Create) and create.acl == POLICY.wire  # type: ignore[union-attr]
    assert isinstance(listing, GetChildren)
    assert isinstance(directory, GetACL) and directory.path == PATH
    assert s.done and s.result == Acquired(f"{PATH}/{mine(0)}", 42, SESSION)


def test_missing_parents_are_made_with_the_acl() -> None:
    s = Stepper(acquire(spec(acl=POLICY)))
    s.expect(Pipeline, (NoNodeError(), NoNodeError(), NoNodeError()))
    op = s.expect(Pipeline, (None, None))  # /locks and the lock path, as containers
    assert [c.acl[: len(POLICY.wire)] for c in op.requests] == [POLICY.wire, POLICY.wire]
    assert op.requests[-1].acl == POLICY.wire  # the lock path: exactly the policy
    s.expect(Pipeline, (created(mine(0)), [mine(0)], OURS))
    assert s.done


def test_an_open_directory_is_refused_and_our_node_deleted() -> None:
    s = Stepper(acquire(spec(acl=POLICY)))
    s.expect(Pipeline, (created(mine(0)), [mine(0)], OPEN))
    own = s.expect(GetACL, OURS)  # what auth: became for us, before refusing
    assert own.path == f"{PATH}/{mine(0)}"  # type: ignore[union-attr]
    with pytest.raises(zklocks.AccessDenied) as refused:
        s.expect(Multi, MARKED)
    assert refused.value.operation == "use" and "world:anyone=cdrwa" in str(refused.value)


def test_an_identity_the_server_added_is_learnt_from_our_own_node() -> None:
    both = NodeACL((*OURS.entries, X509))  # e.g. a TLS client certificate's identity
    s = Stepper(acquire(spec(acl=POLICY)))
    s.expect(Pipeline, (created(mine(0), czxid=7), [mine(0)], both))
    s.expect(GetACL, both)
    assert s.done and s.result == Acquired(f"{PATH}/{mine(0)}", 7, SESSION)


def test_one_node_lock_checks_too_and_releases_when_refused() -> None:
    s = Stepper(acquire(spec(acl=POLICY, fair=False)))
    op = s.expect(Pipeline, (created("lock", czxid=9), ["lock"], OPEN))
    assert isinstance(op.requests[2], GetACL)
    s.expect(GetACL, OURS)
    s.expect(GetData, NodeData(b"", Stat(czxid=9, ephemeral_owner=SESSION)))  # still ours?
    s.expect(SessionId, SESSION)
    with pytest.raises(zklocks.AccessDenied):
        s.expect(Delete, None)


def test_no_auth_is_access_denied_naming_path_and_operation() -> None:
    s = Stepper(acquire(spec(acl=POLICY)))
    with pytest.raises(zklocks.AccessDenied) as denied:
        s.expect(Pipeline, (NoAuthError(), NoAuthError(), NoAuthError()))
    assert denied.value.path == PATH and denied.value.operation == "create"
    assert ATTEMPT not in str(denied.value)
