"""Argument checks done before anything is sent: bad input gets a clear error at once."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zklocks._errors import InvalidArgument, InvalidPath
from zklocks._protocol import codec
from zklocks._vocabulary import DEFAULT_CLOCK_DRIFT as DEFAULT_CLOCK_DRIFT  # re-exported

_CONTROLS = {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}  # C0, DEL, C1
# bidirectional marks, embeddings, overrides and isolates: they reorder what a terminal shows
_BIDI = {"\u061c", "\u200e", "\u200f"} | {chr(c) for c in range(0x202A, 0x202F)}
_BIDI |= {chr(c) for c in range(0x2066, 0x206A)}
_FORBIDDEN = _CONTROLS | _BIDI | {chr(c) for c in range(0xD800, 0xF900)}

#: A timeout this long (about 31 years) or longer, ``inf`` included, means wait for ever:
#: no clock or OS wait can take more, and a deadline that far never comes anyway.
FOREVER = 1e9


def hosts(value: object) -> str:
    """A ZooKeeper connect string, checked with the one parser the connection uses."""
    if not isinstance(value, str):
        raise InvalidArgument(f"hosts must be a 'host:port,...' string, not {value!r}")
    try:
        codec.parse_hosts(value)
    except ValueError as error:
        raise InvalidArgument(str(error)) from None
    return value


def node_path(path: object) -> str:
    """Any path ZooKeeper accepts (the root too): ``InvalidPath`` otherwise."""
    if not isinstance(path, str):
        raise InvalidPath(f"a path must be a str, not {type(path).__name__}")
    problem = codec.path_problem(path)
    if problem is not None:
        raise InvalidPath(f"path {codec.shown_path(path)} {problem}")
    return path


def lock_path(path: object) -> str:
    """An absolute, normalised ZooKeeper path that a lock may use as its directory.

    Refused with ``InvalidPath``: anything ZooKeeper itself would refuse (the message
    names the character by code point), the root, and paths under ``/zookeeper``.
    """
    if not isinstance(path, str):
        raise InvalidPath(f"a lock path must be a str, not {type(path).__name__}")
    if path == "/":
        raise InvalidPath("the root '/' cannot be a lock path")
    problem = codec.path_problem(path)
    if problem is not None:
        if problem.startswith("must start"):
            problem = "must be absolute (start with '/')"
        raise InvalidPath(f"lock path {codec.shown_path(path)} {problem}")
    if path == "/zookeeper" or path.startswith("/zookeeper/"):
        raise InvalidPath(
            f"lock path {codec.shown_path(path)} is under /zookeeper, which ZooKeeper reserves"
        )
    return path


def timeout(value: float | None) -> float | None:
    """A timeout in seconds: ``None`` (wait for ever) or a finite number >= 0.

    ``inf`` and anything from ``FOREVER`` up are ``None``: they mean wait for ever, the
    same for the sync and asyncio locks, and no wait can overflow on them.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"timeout must be a number of seconds or None, not {value!r}")
    if value != value or value < 0:  # NaN, or negative (an int may be too big for float)
        raise InvalidArgument(f"timeout must be >= 0, not {value!r}")
    if value >= FOREVER:
        return None
    return float(value)


def no_timeout_when_not_blocking(value: object) -> None:
    """``acquire(blocking=False)`` does not wait, so a timeout with it is a mistake."""
    if value is not None:
        raise InvalidArgument(f"a non-blocking acquire takes no timeout (got {value!r})")


def permits(value: object) -> int:
    """Semaphore permits: an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"permits must be an int, not {value!r}")
    if not 1 <= value < 10**9:
        raise InvalidArgument(f"permits must be >= 1 (and < 10**9), not {value}")
    return value


def max_hold(value: object) -> float | None:
    """The longest a lease may be held, in seconds: a finite number > 0, or None (no bound)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"max_hold must be a number of seconds or None, not {value!r}")
    if not math.isfinite(value) or not 0 < value < FOREVER:
        raise InvalidArgument(
            f"max_hold must be a finite number of seconds > 0 (None for no bound), not {value!r}"
        )
    return float(value)


def lock_delay(value: object) -> float | None:
    """How long a grant waits after an abnormal loss ahead, in seconds: a finite number
    >= 0, or None (no lock-delay; 0 also waits for nothing, but reads the directory's stat)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"lock_delay must be a number of seconds or None, not {value!r}")
    if not math.isfinite(value) or not 0 <= value < FOREVER:
        raise InvalidArgument(
            f"lock_delay must be a finite number of seconds >= 0 (None for none), not {value!r}"
        )
    return float(value)


def identifier(value: object) -> str | None:
    """A contender identifier: printable text, or None for the default host:pid:thread."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"identifier must be a non-empty str, not {value!r}")
    if any(ch in _FORBIDDEN for ch in value) or len(value) > 1024:
        raise InvalidArgument("identifier must be printable text of at most 1024 characters")
    return value


def session_timeout(value: object) -> float:
    """A session timeout in seconds (> 0)."""
    return seconds("session_timeout", value)


def connect_timeout(value: object) -> float:
    """How long ``start()`` may try to make a session, in seconds (> 0)."""
    return seconds("connect_timeout", value)


def seconds(name: str, value: object) -> float:
    """A positive, finite number of seconds; the error names the option ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{name} must be a positive number, not {value!r}")
    if math.isinf(value):
        raise InvalidArgument(f"{name} must be finite")
    return float(value)


def tick_time(value: object) -> float | None:
    """The ZooKeeper servers' tickTime in seconds (finite, > 0), or None: learn it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"tick_time must be a number of seconds or None, not {value!r}")
    if not math.isfinite(value) or not 0 < value <= 3600:
        raise InvalidArgument(
            f"tick_time must be the servers' tickTime in seconds (0 < tick_time <= 3600; "
            f"tickTime=2000 in zoo.cfg is 2.0), not {value!r}"
        )
    return float(value)


def clock_drift(value: object) -> float:
    """The relative clock-rate error to allow for, as a share (0.01 is 1 %; < 0.5)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"clock_drift must be a share such as 0.01 (1 %), not {value!r}")
    if not math.isfinite(value) or not 0 <= value < 0.5:
        raise InvalidArgument(f"clock_drift must be >= 0 and < 0.5 (0.01 is 1 %), not {value!r}")
    return float(value)


@dataclass(frozen=True)
class LeaseTiming:
    """What the lease rule needs from the user: the servers' tickTime (None: learn it)
    and the clock-rate margin. Validated once, passed down as one object."""

    tick_time: float | None = None
    clock_drift: float = DEFAULT_CLOCK_DRIFT

    @classmethod
    def of(cls, tick: object, drift: object) -> LeaseTiming:
        return cls(tick_time(tick), clock_drift(drift))


DEFAULT_LEASE_TIMING = LeaseTiming()
