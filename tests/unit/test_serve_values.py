"""The pure parts of ``zklocks serve``: ``--listen`` and the ages of a cached document."""

from __future__ import annotations

import datetime as dt

import pytest

from zklocks._cli.serve import parse_listen
from zklocks._cli.serve_state import LockView, fresh_state, under


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:9112", ("127.0.0.1", 9112)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:9112", ("::1", 9112)),
        ("[::]:0", ("::", 0)),
        (":9112", ("127.0.0.1", 9112)),
        ("9112", ("127.0.0.1", 9112)),
        ("localhost:9112", ("localhost", 9112)),
    ],
)
def test_listen_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_listen(text) == address


@pytest.mark.parametrize("text", ["127.0.0.1:", "host:http", "1.2.3.4:65536", "1.2.3.4:-1", ""])
def test_bad_listen_addresses_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT with a port from 0 to 65535"):
        parse_listen(text)


def test_under_is_a_path_prefix_not_a_string_prefix() -> None:
    assert under("/locks/a", "/locks") and under("/locks", "/locks") and under("/x", "/")
    assert not under("/locksmith/a", "/locks")


def test_a_cached_document_is_aged_to_now_and_the_oldest_hold_counts_from_creation() -> None:
    joined = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    holder = {"joined": joined.isoformat(), "age_s": 0.0, "token": 3}
    later = {"joined": (joined + dt.timedelta(seconds=30)).isoformat(), "age_s": 0.0, "token": 9}
    state = {"holders": [holder, later], "waiters": [], "token": 9, "at": "then"}
    now = joined + dt.timedelta(seconds=90)
    moved = fresh_state(state, now)
    assert [e["age_s"] for e in moved["holders"]] == [90.0, 60.0]
    assert moved["at"] == now.isoformat(timespec="milliseconds")
    assert state["holders"][0]["age_s"] == 0.0  # the cached one is left as it was
    view = LockView("/l", "read/write", state)
    assert view.oldest_hold(now) == 90.0 and view.token == 9
    assert LockView("/l", "lock", {**state, "holders": []}).oldest_hold(now) == 0.0


def test_a_grant_the_feed_saw_times_the_hold_from_it_not_from_creation() -> None:
    joined = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    read = joined + dt.timedelta(seconds=50)  # granted (and read) after 50 s in line
    holder = {"node": "/l/elect-1", "joined": joined.isoformat(), "age_s": 50.0, "held_s": 0.0}
    state = {"holders": [holder], "waiters": [], "token": 3, "at": read.isoformat()}
    now = read + dt.timedelta(seconds=8)
    assert fresh_state(state, now)["holders"][0]["held_s"] == 8.0
    view = LockView("/l", "election", state, {"/l/elect-1": read.timestamp()})
    assert view.oldest_hold(now) == 8.0  # not 58: the wait is not a hold
    assert LockView("/l", "election", state).oldest_hold(now) == 58.0  # grant unseen
