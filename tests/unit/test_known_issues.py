"""The known-issues table: one case per entry (the releases it names, both sides of each
fix), the version parsing, and ``srvr``'s answer read."""

from __future__ import annotations

import pytest

from zklocks._core.known_issues import KNOWN_ISSUES, issues_for, losses_for, parse_version
from zklocks._transport.four_letter import not_allowed, parse_srvr

# (ZOOKEEPER id, versions that have it, versions that do not)
CASES = {
    "ZOOKEEPER-4785": (["3.8.0", "3.8.4", "3.9.1", "3.7.2", "3.6.4"], ["3.8.5", "3.9.2", "3.9.4"]),
    "ZOOKEEPER-4394": (["3.8.0", "3.8.5", "3.8.9", "3.9.2", "3.7.2"], ["3.9.3", "3.9.4", "3.10.0"]),
    "ZOOKEEPER-4712": (["3.8.0", "3.8.5", "3.9.2"], ["3.9.3", "3.9.4"]),
    "ZOOKEEPER-4925": (["3.9.3"], ["3.9.2", "3.9.4", "3.8.4", "3.8.0"]),
    "ZOOKEEPER-4837": (["3.8.0", "3.9.4", "3.10.0"], []),
}


def test_every_entry_has_a_case() -> None:
    assert sorted(CASES) == sorted(issue.jira for issue in KNOWN_ISSUES)


@pytest.mark.parametrize("jira", sorted(CASES))
def test_entry(jira: str) -> None:
    (issue,) = [issue for issue in KNOWN_ISSUES if issue.jira == jira]
    having, not_having = CASES[jira]
    for text in having:
        version = parse_version(text)
        assert version is not None and issue in issues_for(version), text
    for text in not_having:
        version = parse_version(text)
        assert version is not None and issue not in issues_for(version), text
    assert issue.url.endswith(jira)
    assert issue.severity in ("loss", "notice")


def test_debian_releases_are_both_reported() -> None:
    """Debian 12's 3.8.0 and Debian 13's 3.9.3 each have a transaction-loss bug; 3.9.4
    has none (only the open ghost-node notice)."""
    assert {i.jira for i in losses_for((3, 8, 0))} == {
        "ZOOKEEPER-4785",
        "ZOOKEEPER-4394",
        "ZOOKEEPER-4712",
    }
    assert {i.jira for i in losses_for((3, 9, 3))} == {"ZOOKEEPER-4925"}
    assert losses_for((3, 9, 4)) == ()
    assert [i.jira for i in issues_for((3, 9, 4))] == ["ZOOKEEPER-4837"]


def test_fixed_in_words() -> None:
    by_id = {issue.jira: issue for issue in KNOWN_ISSUES}
    assert by_id["ZOOKEEPER-4785"].fixed_in() == "fixed in 3.8.5, 3.9.2"
    assert by_id["ZOOKEEPER-4837"].fixed_in() == "not fixed yet"
    assert by_id["ZOOKEEPER-4925"].fixed_in() == "only in 3.9.3; fixed in 3.9.4"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.8.0", (3, 8, 0)),
        ("3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25", (3, 8, 0)),
        ("3.9.3-SNAPSHOT", (3, 9, 3)),
        ("unknown", None),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


SRVR = """Zookeeper version: 3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25
Latency: 0
Latency min/avg/max: 0/0.0/0
Received: 1
Sent: 0
Connections: 1
Outstanding: 0
Zxid: 0x0
Mode: follower
Node count: 5
"""


def test_parse_srvr() -> None:
    answer = parse_srvr(SRVR)
    assert answer is not None
    assert (answer.version, answer.mode) == ("3.8.0", "follower")
    assert parse_srvr("") is None
    refused = "cons is not executed because it is not in the whitelist.\n"
    assert parse_srvr(refused) is None and not_allowed(refused)


def test_the_warning_names_each_fix_in_words_that_read() -> None:
    """The library's warning once read "ZOOKEEPER-4925 (fixed in only in 3.9.3; ...)"."""
    from zklocks._frontend.server_check import MemberVersion, _say

    member = MemberVersion("zk1:2181", "3.9.3", "follower", issues_for((3, 9, 3)))
    assert "ZOOKEEPER-4925 (only in 3.9.3; fixed in 3.9.4)" in _say(member)
    member = MemberVersion("zk1:2181", "3.8.0", "follower", issues_for((3, 8, 0)))
    assert "ZOOKEEPER-4785 (fixed in 3.8.5, 3.9.2)" in _say(member)
