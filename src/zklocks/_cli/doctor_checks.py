"""What ``zklocks doctor`` checks, each check a function that returns ``Line``s.

Only the public client: ``server_versions()``, ``four_letter()`` (read-only words),
``lease_report()``, ``sync()``, ``contenders()`` and ``locks()``. Nothing is written. A
check that the servers do not allow (a four-letter word left out of
``4lw.commands.whitelist``) is an ``unchecked`` line that says why, never a silent pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Protocol

from zklocks import Client, ConnectionFailed, Contender, LockSummary
from zklocks._cli.sanitise import clean

__all__ = ["Contender", "Line", "LockSummary", "Make"]


class Make(Protocol):
    """Makes a client (not started) for a connect string, with the command's options."""

    def __call__(self, where: str, timeout: float = ...) -> Client: ...


OK, FINDING, UNCHECKED, NOTE = "ok", "finding", "unchecked", "note"
_NOT_ALLOWED = "is not executed because it is not in the whitelist"
# server.1=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]
_SERVER_LINE = re.compile(r"^server\.\d+=([^:;]+):\d+:\d+[^;]*(?:;(?:([^:]+):)?(\d+))?\s*$")
_SESSION_LINE = re.compile(r"^(0x[0-9a-fA-F]+):?\s*$")


@dataclass(frozen=True)
class Line:
    """One result: what it is about, its status, in words, and the command that fixes it."""

    topic: str
    status: str
    text: str
    fix: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return asdict(self)


def members(client: Client, hosts: str, make: Make) -> tuple[list[Line], list[str], str | None]:
    """Each member of the connect string, and of the servers' own membership when
    ``conf`` is allowed: reachable, mode, version, known issues. Returns the lines, the
    members that answered, and the leader's (or standalone server's) address."""
    lines: list[Line] = []
    found = client.server_versions()
    listed = {member.member for member in found}
    extra, line = _configured(client, [m.member for m in found if m.error is None], listed)
    lines.append(line)
    if extra:
        chroot = hosts[hosts.index("/") :] if "/" in hosts else ""
        found += make(",".join(extra) + chroot).server_versions()
    answered, leader = [], None
    for member in found:
        topic = f"member {member.member}" + ("" if member.member in listed else " (config)")
        if member.error is not None:
            lines.append(Line(topic, FINDING, f"unreachable: {clean(member.error)}"))
            continue
        answered.append(member.member)
        if member.mode in ("leader", "standalone"):
            leader = member.member
        text = f"{member.mode or 'mode unknown'}, ZooKeeper {clean(member.version)}"
        lines.append(Line(topic, OK, text))
        for issue in member.issues:
            status = FINDING if issue.severity == "loss" else NOTE
            words = f"{issue.jira}: {issue.title} ({issue.fixed_in()}; {issue.url})"
            fix = "upgrade ZooKeeper" if issue.severity == "loss" else None
            lines.append(Line(topic, status, words, fix))
    return lines, answered, leader


def _configured(client: Client, reachable: list[str], listed: set[str]) -> tuple[list[str], Line]:
    """Members named by the servers' own configuration (``conf``) but not in ours."""
    for member in reachable:
        try:
            answer = client.four_letter(member, "conf")
        except ConnectionFailed:  # gone since it answered srvr: ask the next one
            continue
        if _NOT_ALLOWED in answer:
            return [], Line("membership", UNCHECKED, f"{member} does not allow `conf`: the "
                            "servers' own member list was not compared with --hosts")  # fmt: skip
        named, unnamed = [], 0
        for text in answer.splitlines():
            found = _SERVER_LINE.match(text.strip())
            if found and found.group(3) is None:
                unnamed += 1  # a static config: the line names no client port
            elif found:
                host = found.group(2) or found.group(1)
                host = found.group(1) if host in ("0.0.0.0", "::") else host
                named.append(f"{host}:{found.group(3)}")
        extra = sorted(set(named) - listed)
        total = len(named) + unnamed
        if not total:
            return [], Line("membership", OK, "a standalone server")
        if extra:
            return extra, Line("membership", NOTE, f"not in --hosts: {', '.join(extra)}")
        if total > len(listed):
            text = f"the servers name {total} members, --hosts {len(listed)}"
            return [], Line("membership", NOTE, text)
        return [], Line("membership", OK, f"--hosts names all {total} members")
    return [], Line("membership", UNCHECKED, "no member answered")


def security(tls: bool, sasl: str | None) -> Line:
    words = [f"TLS {'on' if tls else 'off'}", f"SASL {sasl or 'off'}"]
    return Line("security", NOTE, ", ".join(words))


def lease(client: Client, asked: float) -> list[Line]:
    """Where the lease rule's tickTime comes from and whether a lease can be kept."""
    report = client.lease_report()
    granted = report.session_timeout
    topic = f"lease (session timeout {asked:g} s" + (
        ")" if abs(granted - asked) < 0.0005 else f", granted {granted:g} s)"
    )
    if report.source is None:
        lines = [Line(topic, OK, "a standalone server: every answer proves the session")]
    else:
        # "session bounds" is one of the sources (handshake probes): shown as given
        source = clean(report.source, limit=None)
        lines = [Line(topic, NOTE, f"tickTime {report.tick:g} s from {source}")]
    if report.session_bounds is not None:
        shortest, longest = report.session_bounds
        text = f"the servers grant sessions of {shortest:g} s to {longest:g} s"
        lines.append(Line(topic, NOTE, text))
    if report.problem is not None:
        problem = clean(report.problem, limit=None)
        lines.append(Line(topic, FINDING, problem, "--session-timeout longer"))
    elif report.source is not None:
        lines.append(Line(topic, OK, "a lease can be kept"))
    return lines


def live_sessions(client: Client, leader: str | None) -> tuple[set[int] | None, str]:
    """The sessions the leader knows (``dump``), or None and why they cannot be listed."""
    if leader is None:
        return None, "no leader answered"
    try:
        answer = client.four_letter(leader, "dump")
    except ConnectionFailed as error:
        return None, f"cannot ask {leader} for `dump`: {error}"
    if _NOT_ALLOWED in answer:
        return None, f"{leader} does not allow `dump` (4lw.commands.whitelist)"
    sessions = set()
    for text in answer.splitlines():
        found = _SESSION_LINE.match(text.strip())
        if found:
            sessions.add(int(found.group(1), 16))
    return sessions, ""


def views(per_member: dict[str, list[Contender]], path: str) -> Iterator[Line]:
    """Each member's view of the lock directory (after a sync), differences flagged."""
    names = {member: {c.node for c in line} for member, line in per_member.items()}
    union = set().union(*names.values()) if names else set()
    for member, seen in sorted(names.items()):
        missing, status = sorted(union - seen), OK
        text = f"{len(seen)} contender(s) seen by {member}"
        if missing:
            status, text = FINDING, f"{member} does not show {', '.join(map(clean, missing))}"
        yield Line(f"lock {clean(path)}", status, text)


def ghosts(path: str, line: list[Contender], sessions: set[int] | None, why: str) -> Iterator[Line]:
    """Contenders no live session owns: a finding, with the ``zklocks break`` that clears a
    holder (a waiter is broken the same way once its turn makes it the holder)."""
    topic = f"lock {clean(path)}"
    for contender in line:
        fix = f"zklocks break {path} --token {contender.token} --yes"
        if not contender.holder:
            fix = f"once it holds: {fix}"
        node = clean(contender.node)
        if not contender.ephemeral:
            yield Line(topic, FINDING, f"{node} is owned by no session (a persistent node): "
                       "it blocks the lock until deleted", fix)  # fmt: skip
        elif sessions is None:
            yield Line(topic, UNCHECKED, f"{node}: its session 0x{contender.owner:x} cannot be "
                       f"checked: {why}")  # fmt: skip
        elif contender.owner not in sessions:
            dead = f"{node}: its session 0x{contender.owner:x} is not live"
            yield Line(
                topic, FINDING, f"{dead} (ZOOKEEPER-4837: a node left after its session)", fix
            )
    if not line:
        yield Line(topic, NOTE, "no contender (the lock is free, or the directory is gone)")


def tree(walked: list[LockSummary]) -> Iterator[Line]:
    """The locks the walk found, and the lock directories left behind empty.

    A persistent directory that had contenders once (kazoo's layout makes its own so)
    stays until deleted; a container (zklocks' and Curator's) is removed by ZooKeeper
    within its container check interval (60 s by default). ZooKeeper does not say which
    a node is (a container's stat shows no owner), so an empty directory is a note, not
    a finding: one is seen after every release until the container goes."""
    locks = [clean(summary.path) for summary in walked if not summary.left_behind]
    yield Line("locks", OK, f"{len(locks)} lock(s) walked" + "".join(f", {p}" for p in locks))
    for summary in walked:
        if summary.left_behind:
            yield Line(f"lock {clean(summary.path)}", NOTE,
                       "an empty lock directory left behind, unless it is a container that "
                       "ZooKeeper removes within a minute (it does not say which)",
                       f"if it stays: delete {summary.path} once nothing uses it")  # fmt: skip


def strangers(path: str, names: tuple[str, ...]) -> Iterator[Line]:
    """Children of a lock's directory that no known layout makes: no lock counts them
    as contenders, so something else writes there (a mistyped path, a foreign tool)."""
    for name in names:
        node = f"{path.rstrip('/')}/{name}"
        yield Line(f"lock {clean(path)}", FINDING,
                   f"{clean(node)} is of a shape no known layout (zklocks, Curator, kazoo) "
                   "makes: no lock sees it", f"find what writes {node}; delete it if nothing "
                   "needs it")  # fmt: skip
