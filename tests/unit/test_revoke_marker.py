"""The revoke marker: what the asker writes and what a holder recognises, per dialect."""

from __future__ import annotations

import json

import pytest

from zklocks._core import nodes as _nodes
from zklocks._core import validate as _validate
from zklocks._core.revoke import CURATOR_MARKER, is_request, marked
from zklocks._errors import InvalidArgument

OURS = _nodes.encode_payload(_nodes.Payload("worker-7", "abc", "vm", 42))


def test_our_payload_keeps_who_holds_and_gains_the_request() -> None:
    data = marked(OURS, "zklocks")
    assert is_request(data)
    assert _nodes.decode_payload(data) == _nodes.decode_payload(OURS)  # status unchanged
    assert json.loads(data)["revoke"] is True


@pytest.mark.parametrize("dialect", ["curator", "kazoo"])
def test_a_peers_node_gets_curators_bytes(dialect: str) -> None:
    assert marked(b"127.0.0.1", dialect) == CURATOR_MARKER == b"__REVOKE__"
    assert is_request(CURATOR_MARKER)


@pytest.mark.parametrize(
    "data", [b"", b"127.0.0.1", OURS, b'{"revoke": "yes"}', b"[1]", b"{", b"\xff", b"__revoke__"]
)
def test_anything_else_is_not_a_request(data: bytes) -> None:
    assert not is_request(data)


def test_unreadable_data_of_ours_gets_curators_bytes() -> None:
    assert marked(b"\xff{", "zklocks") == CURATOR_MARKER


@pytest.mark.parametrize("good", [0.001, 1, 30.0, 86400])
def test_max_hold_takes_positive_seconds(good: float) -> None:
    assert _validate.max_hold(good) == float(good)
    assert _validate.max_hold(None) is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "5", 1e10])
def test_max_hold_refuses_the_rest(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="max_hold"):
        _validate.max_hold(bad)
