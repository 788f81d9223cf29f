"""``ServerOptions``: how a local ZooKeeper is configured, checked once and passed whole.

``ZooKeeperServer`` and ``ZooKeeperEnsemble`` keep their keyword arguments (every test
and benchmark spells them) and build one ``ServerOptions`` from them; an ensemble hands
the same value to each member. A bad value is refused when it is built, with an error
naming the option, rather than as a JVM that exits with a Java stack trace.

The zoo.cfg lines are made here, from the value alone (no I/O), so a test can read them
without starting a JVM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar, cast

from zklocks._server.tls import ServerTLS

__all__ = ["OptionAttribute", "ServerOptions"]

_T = TypeVar("_T")


def _check_count(name: str, value: object, unit: str, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of {unit} above 0, not {value!r}")


@dataclass(frozen=True)
class ServerOptions:
    """The settings every JVM of one server or ensemble shares.

    ``tick_time`` is ZooKeeper's ``tickTime`` in ms. Sessions may last between
    ``min_session_timeout`` and ``max_session_timeout`` ms, by ZooKeeper's default 2 and
    20 ticks. ``sync_limit`` (ticks, ensembles only) is how long a member may go without
    hearing from the leader; None means about 2 s whatever the tick. ``force_sync=False``
    skips the fsync per write. ``heap`` is the JVM's ``-Xmx`` (the JVM judges its form),
    ``startup_timeout`` the seconds a start may take to serve. ``tls`` serves clients
    over TLS only (and, in an ensemble, the links between members).
    ``four_letter_words`` is ``4lw.commands.whitelist``: ``"*"`` (all, what the tests
    inspect servers with) or a comma-separated list. ``"srvr"`` is ZooKeeper as it ships
    (since 3.5.3): then ``conf`` is refused, and a client can learn the servers' tickTime
    only from their session bounds. The AdminServer is always off (it would take port
    8080), as in Kafka's bundled configuration.
    """

    tick_time: int = 2000
    min_session_timeout: int | None = None
    max_session_timeout: int | None = None
    sync_limit: int | None = None
    force_sync: bool = True
    heap: str = "512m"
    startup_timeout: float = 30.0
    tls: ServerTLS | None = None
    four_letter_words: str = "*"

    def __post_init__(self) -> None:
        _check_count("tick_time", self.tick_time, "milliseconds")
        _check_count("min_session_timeout", self.min_session_timeout, "ms", optional=True)
        _check_count("max_session_timeout", self.max_session_timeout, "ms", optional=True)
        _check_count("sync_limit", self.sync_limit, "ticks", optional=True)
        self._check_session_bounds()
        if not isinstance(self.force_sync, bool):
            raise ValueError(f"force_sync must be True or False, not {self.force_sync!r}")
        if not isinstance(self.heap, str) or not self.heap.strip():
            raise ValueError(f"heap must be a JVM size such as '512m', not {self.heap!r}")
        timeout = self.startup_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"startup_timeout must be seconds above 0, not {timeout!r}")
        if self.tls is not None and not isinstance(self.tls, ServerTLS):
            raise ValueError(f"tls must be a ServerTLS or None, not {self.tls!r}")
        self._check_four_letter_words()

    def _check_four_letter_words(self) -> None:
        words = self.four_letter_words
        listed = words.split(",") if isinstance(words, str) else []
        if words != "*" and (
            not listed or not all(w.strip().isalpha() and len(w.strip()) == 4 for w in listed)
        ):
            raise ValueError(
                f"four_letter_words must be '*' or a comma-separated list of four-letter "
                f"words such as 'srvr' or 'srvr,conf', not {words!r}"
            )
        if not self.allows("srvr"):
            raise ValueError(
                f"four_letter_words must allow 'srvr' (ZooKeeper's default, and how a "
                f"server is known to be serving), not {words!r}"
            )

    def allows(self, word: str) -> bool:
        """Does the server answer the four-letter ``word``?"""
        words = self.four_letter_words
        return words == "*" or word in (w.strip() for w in words.split(","))

    def _check_session_bounds(self) -> None:
        # ZooKeeper fills in 2 and 20 ticks for a bound not given, then refuses min > max
        # with a Java stack trace; say it here, in the options' own words.
        low, high = self.min_session_timeout, self.max_session_timeout
        low_ms = 2 * self.tick_time if low is None else low
        high_ms = 20 * self.tick_time if high is None else high
        if low_ms > high_ms:
            raise ValueError(
                f"min_session_timeout ({low_ms} ms{', 2 ticks' if low is None else ''}) is above "
                f"max_session_timeout ({high_ms} ms{', 20 ticks' if high is None else ''})"
            )

    @property
    def sync_ticks(self) -> int:
        """``syncLimit``: as given, or near 2 s whatever the tick, so that a paused leader
        is noticed quickly."""
        return self.sync_limit or max(5, math.ceil(2_000 / self.tick_time))

    @property
    def init_ticks(self) -> int:
        """``initLimit``: near 10 s whatever the tick, so a short tick does not fail the
        initial sync of a member with the leader."""
        return max(10, math.ceil(10_000 / self.tick_time))

    def config(self, *, port: int, data_dir: Path) -> list[str]:
        """The zoo.cfg lines of one JVM serving clients on ``port``."""
        if self.tls is None:
            ports = [f"clientPort={port}", "clientPortAddress=127.0.0.1"]
        else:
            ports = self.tls.config(port)
        lines = [
            f"tickTime={self.tick_time}",
            f"dataDir={data_dir}",
            *ports,
            f"4lw.commands.whitelist={self.four_letter_words.replace(' ', '')}",
            "maxClientCnxns=0",  # the default refuses a test's 61st session from one IP
            "admin.enableServer=false",  # it would take port 8080
        ]
        if self.min_session_timeout is not None:
            lines.append(f"minSessionTimeout={self.min_session_timeout}")
        if self.max_session_timeout is not None:
            lines.append(f"maxSessionTimeout={self.max_session_timeout}")
        if not self.force_sync:
            lines.append("forceSync=no")
        return lines

    def quorum_config(self, server_lines: Sequence[str]) -> list[str]:
        """The zoo.cfg lines an ensemble member adds: its limits, the ``server.N`` lines
        naming every member, and TLS between members when clients get TLS."""
        return [
            f"initLimit={self.init_ticks}",
            f"syncLimit={self.sync_ticks}",
            *server_lines,
            *(self.tls.quorum_config() if self.tls is not None else []),
        ]


class _HasOptions(Protocol):
    @property
    def options(self) -> ServerOptions: ...


class OptionAttribute(Generic[_T]):
    """An attribute that reads the field of the same name in its object's ``options``:
    ``server.tick_time`` reads as it always did, while the value lives once, in the
    server's ``ServerOptions``. Read-only, as the options are."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._field = name

    def __get__(self, instance: _HasOptions | None, owner: type | None = None) -> _T:
        if instance is None:
            raise AttributeError(f"{self._field} is read from an instance's options")
        return cast(_T, getattr(instance.options, self._field))
