"""ZooKeeper releases with a known bug that breaks what a lock promises.

A lock is only as good as the ensemble under it: a lost create or delete breaks "one
holder, tokens only grow" whatever the client does. This table is data: one
``KnownIssue`` per ZOOKEEPER id, with the releases that carry the fix on each branch.
A version is affected when it is older than its branch's fix, or its branch never got
one (``fixed`` names the branches that did; a branch not named is affected whole, unless
it is newer than every fix). ``only`` is for a bug that exists in some releases alone.

``severity``: ``"loss"`` (transactions or data may be lost, or members disagree):
the client warns once per ensemble and ``strict_server=True`` refuses the server;
``doctor`` reports it as a finding. ``"notice"``: an open bug every release has
(no version avoids it), which ``doctor`` names and checks for by other means (a ghost
holder is looked for directly).

To add an entry: one ``KnownIssue`` below, and one case in
``tests/unit/test_known_issues.py``. Titles and fixing releases are as ZooKeeper's release
notes list them (3.9.2: 4785; 3.9.3: 4394, 4712; 3.9.4: 4925; 3.8.5: 4785); the
ZOOKEEPER-4925 fix's own description says the bug came with 4394's fix (3.9.3 only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KNOWN_ISSUES", "KnownIssue", "issues_for", "losses_for", "parse_version"]

Version = tuple[int, int, int]

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> Version | None:
    """``3.8.0`` out of ``srvr``'s ``Zookeeper version: 3.8.0-5a02a05...,
    built on ...`` (or of a bare ``3.9.3``); None when no ``x.y.z`` is there."""
    found = _VERSION.search(text)
    if found is None:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def _parse(text: str) -> Version:
    version = parse_version(text)
    if version is None:  # the table's own data: a typo is a bug caught by its tests
        raise ValueError(f"not a version: {text!r}")
    return version


@dataclass(frozen=True)
class KnownIssue:
    """One ZooKeeper bug and where it is fixed."""

    jira: str  # "ZOOKEEPER-4785"
    title: str  # the issue's own title
    severity: str  # "loss" or "notice" (see the module's docstring)
    fixed: tuple[str, ...] = ()  # the first release with the fix, one per branch
    only: tuple[str, ...] = ()  # if set: the only releases that have the bug

    @property
    def url(self) -> str:
        return f"https://issues.apache.org/jira/browse/{self.jira}"

    def affects(self, version: Version) -> bool:
        if self.only:
            return version in {_parse(release) for release in self.only}
        fixes = sorted(_parse(release) for release in self.fixed)
        if not fixes:
            return True  # open: every release has it
        for fix in fixes:
            if version[:2] == fix[:2]:
                return version < fix
        # a branch with no fix of its own: affected if older than the first fixed branch
        return version[:2] < fixes[0][:2]

    def fixed_in(self) -> str:
        """In words, for people, a phrase of its own: "fixed in 3.8.5, 3.9.2", "only in
        3.9.3; fixed in 3.9.4", "not fixed yet"."""
        fixed = "fixed in " + ", ".join(self.fixed) if self.fixed else "not fixed yet"
        return "only in " + ", ".join(self.only) + "; " + fixed if self.only else fixed


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "ZOOKEEPER-4785",
        "Txn loss due to race condition in Learner.syncWithLeader() during DIFF sync",
        "loss",
        fixed=("3.8.5", "3.9.2"),
    ),
    KnownIssue(
        "ZOOKEEPER-4394",
        "Learner.syncWithLeader got NullPointerException (partial shutdown, may lead to "
        "data inconsistency)",
        "loss",
        fixed=("3.9.3",),  # not on branch-3.8
    ),
    KnownIssue(
        "ZOOKEEPER-4712",
        "Follower.shutdown() and Observer.shutdown() do not correctly shutdown the "
        "syncProcessor, which may lead to data inconsistency",
        "loss",
        fixed=("3.9.3",),  # not on branch-3.8
    ),
    KnownIssue(
        "ZOOKEEPER-4925",
        "Diff sync introduce hole in stale follower's committedLog which cause data loss "
        "in leading",
        "loss",
        fixed=("3.9.4",),
        only=("3.9.3",),  # came with 4394's fix
    ),
    KnownIssue(
        "ZOOKEEPER-4837",
        "Ephemeral node unremoved after the session expiration (a ghost holder)",
        "notice",
    ),
)


def issues_for(version: Version) -> tuple[KnownIssue, ...]:
    """Every entry of the table that ``version`` has."""
    return tuple(issue for issue in KNOWN_ISSUES if issue.affects(version))


def losses_for(version: Version) -> tuple[KnownIssue, ...]:
    """The entries that can lose a lock's transactions (warned of; refused if strict)."""
    return tuple(issue for issue in issues_for(version) if issue.severity == "loss")
