"""The sans-IO session fed hostile bytes: every request it sent ends, nothing else escapes.

Two promises, checked on hand-made frames and then by Hypothesis on any bytes:

* ``receive()`` returns events or raises the session's own ``ReceiveError`` (a
  ``MarshallingError``): never ``UnicodeDecodeError``, ``struct.error`` or another
  stray exception into the connection's event loop.
* After ``disconnect()`` every request sent is accounted for exactly once: answered by a
  ``WireReply`` (returned, or carried by the error as ``events``) or handed back by
  ``disconnect()`` so the connection fails it with ``ConnectionLossError``.
"""

from __future__ import annotations

import itertools
import struct
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zklocks._protocol import records as _records
from zklocks._protocol.constants import OpCode, Xid
from zklocks._protocol.errors import MarshallingError
from zklocks._protocol.records import (
    Create,
    Delete,
    GetChildren,
    Multi,
    Sync,
)
from zklocks._protocol.session import (
    Established,
    Event,
    ReceiveError,
    Session,
    WatchFired,
    WireReply,
)

INT = struct.Struct(">i")
HEADER = struct.Struct(">iqi")  # xid, zxid, err
PASSWD = bytes(range(16))


def connect_response(timeout_ms: int = 4000, session_id: int = 0x1234) -> bytes:
    body = struct.pack(">iiq", 0, timeout_ms, session_id) + INT.pack(16) + PASSWD + b"\x00"
    return INT.pack(len(body)) + body


def frame(xid: int, body: bytes = b"", err: int = 0, zxid: int = 7) -> bytes:
    payload = HEADER.pack(xid, zxid, err) + body
    return INT.pack(len(payload)) + payload


def string(raw: bytes) -> bytes:
    return INT.pack(len(raw)) + raw


def established() -> Session:
    session = Session(timeout_ms=4000)
    session.connect()
    (event,) = session.receive(connect_response())
    assert isinstance(event, Established)
    return session


def feed(session: Session, data: bytes) -> tuple[list[Event], ReceiveError | None]:
    """What ``receive`` gave: its events, and the error it raised (with its events)."""
    try:
        return session.receive(data), None
    except ReceiveError as error:
        return list(error.events), error


def answered(events: list[Event]) -> list[Any]:
    return [event.token for event in events if isinstance(event, WireReply)]


# -- the defects, one frame each ---------------------------------------------------------


def test_an_undecodable_reply_leaves_its_request_in_flight() -> None:
    session = established()
    session.request(_records.GetChildren("/lock"), "listing")
    session.request(Sync("/"), "after")
    bad_name = INT.pack(1) + string(b"lock-\xff\xfe")  # a child name that is not UTF-8
    events, error = feed(session, frame(1, bad_name))
    assert isinstance(error, MarshallingError)
    assert events == []
    assert session.disconnect() == ["listing", "after"]


def test_answers_before_broken_bytes_ride_on_the_error() -> None:
    session = established()
    session.request(Sync("/a"), "first")
    session.request(_records.GetChildren("/lock"), "second")
    good = frame(1, string(b"/a"))
    bad = frame(2, INT.pack(1) + string(b"\xc3"))  # a cut UTF-8 sequence
    events, error = feed(session, good + bad)
    assert error is not None
    assert answered(events) == ["first"]
    assert session.disconnect() == ["second"]


def test_a_notification_path_that_is_not_utf8_is_a_protocol_error() -> None:
    session = established()
    session.request(Sync("/"), "pending")
    body = struct.pack(">ii", 2, 3) + string(b"/lock/\x80")  # deleted, on a non-UTF-8 path
    _, error = feed(session, frame(Xid.NOTIFICATION, body))
    assert error is not None and "UTF-8" in str(error)
    assert session.disconnect() == ["pending"]


def test_a_multi_reply_cut_short_is_a_protocol_error() -> None:
    session = established()
    session.request(Multi([Delete("/a"), Delete("/b")]), "multi")
    # one error result whose code is cut off: 9 bytes of header, then 2 of the 4 code bytes
    body = struct.pack(">i?i", OpCode.ERROR, False, -101) + b"\xff\xff"
    _, error = feed(session, frame(1, body))
    assert error is not None
    assert session.disconnect() == ["multi"]


def test_a_broken_round_stays_broken_until_the_next_connect() -> None:
    session = established()
    session.request(Sync("/"), "t")
    _, error = feed(session, frame(999))  # an xid nobody sent
    assert error is not None
    with pytest.raises(ReceiveError):
        session.receive(frame(1, string(b"/")))  # the real answer, too late: still broken
    assert session.disconnect() == ["t"]
    session.connect()
    (event,) = session.receive(connect_response())
    assert isinstance(event, Established)


# -- any bytes ---------------------------------------------------------------------------

REQUESTS: list[Any] = [
    _records.GetChildren("/lock"),
    _records.GetData("/lock/n"),
    _records.Exists("/lock/n"),
    _records.Create("/lock/n-", b"x", ephemeral=True, sequential=True),
    _records.Delete("/lock/n"),
    Create("/c", b"", ephemeral=False),
    GetChildren("/lock", with_stat=True),
    Sync("/"),
    Multi([Delete("/a"), Create("/b", b"", ephemeral=False)]),
]


def _body() -> st.SearchStrategy[bytes]:
    name = st.one_of(st.binary(max_size=12), st.text(max_size=8).map(str.encode))
    names = st.lists(name, max_size=4).map(lambda ns: INT.pack(len(ns)) + b"".join(map(string, ns)))
    stat = st.binary(min_size=68, max_size=68)
    multi = st.lists(
        st.tuples(
            st.sampled_from([OpCode.ERROR, OpCode.CREATE, OpCode.DELETE, OpCode.SET_DATA, 99]),
            st.booleans(),
            st.binary(max_size=12),
        ),
        max_size=3,
    ).map(lambda ops: b"".join(struct.pack(">i?i", t, d, -1) + b for t, d, b in ops))
    return st.one_of(
        st.binary(max_size=80),
        names,
        st.tuples(name, stat).map(lambda p: string(p[0]) + p[1]),
        st.tuples(st.integers(-3, 3), st.integers(-3, 3), name).map(
            lambda p: struct.pack(">ii", p[0], p[1]) + string(p[2])
        ),
        multi,
    )


def _frames(sent: int) -> st.SearchStrategy[bytes]:
    xids = st.one_of(
        st.integers(1, max(sent, 1)),
        st.sampled_from([Xid.NOTIFICATION, Xid.PING, Xid.AUTH, Xid.SET_WATCHES, 0]),
        st.integers(-(2**31), 2**31 - 1),
    )
    errors = st.sampled_from([0, 0, 0, -101, -110, -4, -999])
    framed = st.builds(lambda x, b, e: frame(x, b, e), xids, _body(), errors)
    return st.one_of(framed, framed.map(lambda f: f[: len(f) // 2]), st.binary(max_size=40))


@st.composite
def hostile_input(draw: st.DrawFn) -> tuple[list[int], list[bytes]]:
    choices = draw(st.lists(st.integers(0, len(REQUESTS)), min_size=1, max_size=6))
    stream = b"".join(draw(st.lists(_frames(len(choices)), max_size=6)))
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    bounds = [0, *cuts, len(stream)]
    return choices, [stream[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_input())
def test_any_bytes_give_events_or_the_sessions_error_and_no_request_is_lost(
    case: tuple[list[int], list[bytes]],
) -> None:
    choices, chunks = case
    session = established()
    tokens: list[str] = []
    for index, choice in enumerate(choices):
        token = f"t{index}"
        tokens.append(token)
        if choice == len(REQUESTS):
            session.ping(token)
        else:
            session.request(REQUESTS[choice], token, watcher=None)
    seen: list[Any] = []
    for chunk in chunks:
        events, error = feed(session, chunk)  # anything but ReceiveError fails the test
        seen.extend(answered(events))
        assert all(isinstance(e, WireReply | WatchFired | Established) for e in events)
        if error is not None:
            break
    seen.extend(session.disconnect())
    assert Counter(seen) == Counter(tokens)
