"""Connect strings, node paths and the chroot: what the server would refuse, and how
a path looks on each side of the chroot. No I/O.

Parsing hosts and checking paths happen before anything is encoded (a client checks its
connect string when constructed, a lock its path when made), so they live apart from
the codec that encodes requests; ``zklocks._protocol.codec`` re-exports them.

Chroot: every path sent is prefixed with the chroot (``to_server``); every path received
(created names, sync, watch events) has it removed (``from_server``), so callers only
ever see their own paths.
"""

from __future__ import annotations

import ipaddress
import re

CONNECT_STRING_FORM = (
    "expected host:port[,host:port...][/chroot], e.g. 127.0.0.1:2181 or zk1:2181,zk2:2181/app"
)
_HOSTNAME = re.compile(r"[^\s:/\[\],]+")
_PORT = re.compile(r"[0-9]{1,5}")


def parse_hosts(hosts: str) -> tuple[list[tuple[str, int]], str]:
    """Split ``"h1:p1,h2:p2/chroot"`` into ``[(host, port), ...]`` and the chroot ("" if none).

    The one parser of connect strings (clients check theirs with it when constructed,
    the CLI its ``--hosts``). A host without a port gets 2181; IPv6 literals go in
    brackets (``[::1]:2181``). Raises ``ValueError`` saying what is wrong: no host, an
    empty entry, a port that is not 1-65535, a chroot ZooKeeper would refuse.
    """
    if not isinstance(hosts, str):
        raise ValueError(f"a ZooKeeper connect string is a str, not {type(hosts).__name__}")
    text = hosts.strip(" \t\r\n")  # not str.strip(): U+0085 is whitespace to it
    if not text:
        raise _bad_hosts(hosts, "it is empty")
    servers, _, chroot = text.partition("/")
    chroot = "/" + chroot if chroot else ""  # "host:port/" has none
    if chroot:
        problem = path_problem(chroot)
        if problem is None and (chroot == "/zookeeper" or chroot.startswith("/zookeeper/")):
            problem = "is under /zookeeper, which ZooKeeper reserves"
        if problem is not None:
            raise _bad_hosts(hosts, f"the chroot {shown_path(chroot)} {problem}")
    result = [_host_port(hosts, entry.strip()) for entry in servers.split(",")]
    return result, chroot


def _bad_hosts(hosts: str, why: str) -> ValueError:
    return ValueError(
        f"{shown_path(hosts)} is not a ZooKeeper connect string: {why} ({CONNECT_STRING_FORM})"
    )


def _host_port(hosts: str, entry: str) -> tuple[str, int]:
    if not entry:
        raise _bad_hosts(hosts, "a host is missing (an empty entry between commas)")
    if entry.startswith("["):
        host, close, rest = entry[1:].partition("]")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _bad_hosts(hosts, f"{entry!r} is not a bracketed IPv6 address") from None
        if not close or (rest and not rest.startswith(":")):
            raise _bad_hosts(hosts, f"bad entry {entry!r}")
        return host, _port(hosts, entry, rest[1:]) if rest else 2181
    if entry.count(":") > 1:
        raise _bad_hosts(hosts, f"{entry!r}: an IPv6 address goes in brackets, e.g. [::1]:2181")
    host, colon, port_text = entry.partition(":")
    if not _HOSTNAME.fullmatch(host):
        raise _bad_hosts(hosts, f"bad host in {entry!r}")
    return host, _port(hosts, entry, port_text) if colon else 2181


def _port(hosts: str, entry: str, text: str) -> int:
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise _bad_hosts(hosts, f"the port in {entry!r} is not a number from 1 to 65535")
    return int(text)


def refused_char(ch: str) -> bool:
    """Does ZooKeeper refuse ``ch`` in a path? (``PathUtils.validatePath``: controls, C1,
    U+D800-U+F8FF, U+FFF0-U+FFFF; a character beyond the BMP is a surrogate pair there.)"""
    c = ord(ch)
    return c < 0x20 or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or c >= 0xFFF0


def path_problem(path: str) -> str | None:
    """Why the server would refuse ``path`` (it answers BadArguments), or None."""
    if not path.startswith("/"):
        return "must start with '/'"
    if path == "/":
        return None
    if path.endswith("/"):
        return "must not end with '/'"
    for segment in path[1:].split("/"):
        if segment == "":
            return "has an empty segment ('//')"
        if segment in (".", ".."):
            return f"has a relative segment {segment!r}"
    for ch in path:
        if refused_char(ch):
            return f"contains U+{ord(ch):04X}, which ZooKeeper refuses in a path"
    return None


def shown_path(path: str, limit: int = 80) -> str:
    """``path`` for a message: quoted, escaped, and cut when long."""
    if len(path) > limit:
        return repr(path[: limit - 1]) + f"… ({len(path)} characters)"
    return repr(path)


def validate_path(path: str) -> None:
    """Refuse paths the server would refuse (it would answer BadArguments)."""
    problem = path_problem(path)
    if problem is not None:
        raise ValueError(f"invalid path {shown_path(path)}: {problem}")


def to_server(path: str, chroot: str) -> str:
    if not chroot:
        return path
    return chroot if path == "/" else chroot + path


def from_server(path: str, chroot: str) -> str:
    if not chroot:
        return path
    if path == chroot:
        return "/"
    if path.startswith(chroot) and path[len(chroot)] == "/":
        return path[len(chroot) :]
    return path
