"""The servers' versions against the known-issues table: warned of once, or refused.

A client on our own transport reads each member's ``srvr`` (the one four-letter word a
stock server allows) before its first session, once per member and process: later
clients of the same ensemble (or of one of its members) read the remembered answer, so
a process that makes many clients pays one short connection per member, once. A member
whose version has a transaction-loss bug (``zklocks._core.known_issues``, severity
``loss``) is said once at WARNING on ``zklocks.server``; with ``strict_server=True`` the
client refuses to start (``ConnectionFailed``, naming the member, its version and the
ZOOKEEPER ids).

A member that cannot be asked is left out here (the session's own start reports an
unreachable ensemble); ``zklocks doctor`` says so.
"""

from __future__ import annotations

import logging
import ssl as _ssl
import threading
from dataclasses import dataclass

from zklocks._core.known_issues import KnownIssue, issues_for, parse_version
from zklocks._errors import ConnectionFailed, InvalidArgument
from zklocks._protocol.paths import parse_hosts
from zklocks._transport.four_letter import ask, read_srvr

__all__ = ["MemberVersion", "UnsafeServer", "check", "read_members"]

log = logging.getLogger("zklocks.server")

READ_TIMEOUT = 2.0  # at most this long per member (a refused connection fails at once)


class UnsafeServer(ConnectionFailed):
    """``strict_server=True`` refused a member with a known transaction-loss bug (a
    ``ConnectionFailed``: callers catch that; the command line tells it apart)."""


@dataclass(frozen=True)
class MemberVersion:
    """One member as ``srvr`` describes it; ``version`` and ``mode`` empty if not asked."""

    member: str  # "host:port"
    version: str
    mode: str
    issues: tuple[KnownIssue, ...] = ()
    error: str | None = None  # why it could not be asked

    @property
    def losses(self) -> tuple[KnownIssue, ...]:
        return tuple(issue for issue in self.issues if issue.severity == "loss")


def read_member(
    host: str, port: int, ssl: _ssl.SSLContext | None, timeout: float = READ_TIMEOUT
) -> MemberVersion:
    member = f"{host}:{port}"
    try:
        answer = read_srvr(host, port, ssl, timeout)
    except (OSError, ValueError) as error:
        return MemberVersion(member, "", "", error=str(error) or type(error).__name__)
    if answer is None:
        return MemberVersion(member, "", "", error="srvr gave no version")
    version = parse_version(answer.version)
    issues = issues_for(version) if version is not None else ()
    return MemberVersion(member, answer.version, answer.mode, issues)


def read_members(
    hosts: str, ssl: _ssl.SSLContext | None, timeout: float = READ_TIMEOUT
) -> list[MemberVersion]:
    """Each member of the connect string ``hosts``, asked in turn."""
    members, _chroot = parse_hosts(hosts)
    return [read_member(host, port, ssl, timeout) for host, port in members]


_seen: dict[str, MemberVersion] = {}  # by "host:port": each member is read and warned of once
_seen_mutex = threading.Lock()


READ_ONLY_WORDS = frozenset(
    {"srvr", "stat", "conf", "cons", "dump", "mntr", "ruok", "envi", "wchs", "isro", "dirs"}
)
"""The four-letter words that only read (``crst``, ``srst`` reset counters: refused)."""


def ask_member(
    member: str, word: str, ssl: _ssl.SSLContext | None, timeout: float = READ_TIMEOUT
) -> str:
    """``word``'s answer from ``member`` ("host:port"); ``InvalidArgument`` for a word
    that is not read-only, ``ConnectionFailed`` if the member cannot be asked."""
    if word not in READ_ONLY_WORDS:
        raise InvalidArgument(
            f"{word!r} is not one of the read-only four-letter words: "
            + ", ".join(sorted(READ_ONLY_WORDS))
        )
    ((host, port),) = parse_hosts(member)[0]
    try:
        return ask(host, port, word, ssl=ssl, timeout=timeout)
    except OSError as error:
        raise ConnectionFailed(f"cannot ask {member} {word!r}: {error}") from error


def _members(hosts: str) -> list[tuple[str, int]]:
    return parse_hosts(hosts)[0]


def known(hosts: str) -> bool:
    """Has this process read every member of ``hosts`` already (``check`` won't block)?"""
    with _seen_mutex:
        return all(f"{host}:{port}" in _seen for host, port in _members(hosts))


def check(hosts: str, ssl: _ssl.SSLContext | None, strict: bool) -> list[MemberVersion]:
    """Read (once per member and process) and judge the members of ``hosts``: warn once
    of each member's transaction-loss issues, or, if ``strict``, raise ``UnsafeServer``.
    A member that could not be asked is remembered too (a start never waits on it again)."""
    found: list[MemberVersion] = []
    for host, port in _members(hosts):
        with _seen_mutex:
            member = _seen.get(f"{host}:{port}")
        if member is None:
            member = read_member(host, port, ssl)
            with _seen_mutex:
                first = member.member not in _seen
                member = _seen.setdefault(member.member, member)
            if first and member.losses:
                log.warning("%s", _say(member))
        found.append(member)
    if strict:
        unsafe = [member for member in found if member.losses]
        if unsafe:
            raise UnsafeServer(
                "strict_server: refused; " + "; ".join(_say(member) for member in unsafe)
            )
    return found


def _say(member: MemberVersion) -> str:
    ids = ", ".join(f"{issue.jira} ({issue.fixed_in()})" for issue in member.losses)
    return (
        f"ZooKeeper {member.version} at {member.member} has known transaction-loss bugs "
        f"that can break a lock's guarantees: {ids}; upgrade it (see docs/operations.md, "
        f"'Server versions')"
    )


def forget() -> None:
    """(Tests) forget every ensemble read, so the next client reads and warns again."""
    with _seen_mutex:
        _seen.clear()
