"""Argument checks done before anything is sent: bad input gets a clear error at once."""

from __future__ import annotations

import math

from zklocks._errors import InvalidArgument, InvalidPath

_FORBIDDEN = {chr(c) for c in range(0x20)} | {chr(0x7F)} | {chr(c) for c in range(0xD800, 0xF900)}


def lock_path(path: object) -> str:
    """An absolute, normalised ZooKeeper path that a lock may use as its directory."""
    if not isinstance(path, str):
        raise InvalidPath(f"a lock path must be a str, not {type(path).__name__}")
    if not path.startswith("/"):
        raise InvalidPath(f"lock path {path!r} must be absolute (start with '/')")
    if path == "/":
        raise InvalidPath("the root '/' cannot be a lock path")
    if path.endswith("/"):
        raise InvalidPath(f"lock path {path!r} must not end with '/'")
    for segment in path[1:].split("/"):
        if segment == "":
            raise InvalidPath(f"lock path {path!r} has an empty segment ('//')")
        if segment in (".", ".."):
            raise InvalidPath(f"lock path {path!r} has a relative segment {segment!r}")
    bad = sorted({ch for ch in path if ch in _FORBIDDEN})
    if bad:
        raise InvalidPath(f"lock path {path!r} contains control characters {bad!r}")
    if path == "/zookeeper" or path.startswith("/zookeeper/"):
        raise InvalidPath(f"lock path {path!r} is under /zookeeper, which ZooKeeper reserves")
    return path


def timeout(value: float | None) -> float | None:
    """A timeout in seconds: ``None`` (wait for ever) or a finite number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"timeout must be a number of seconds or None, not {value!r}")
    if math.isnan(value) or value < 0:
        raise InvalidArgument(f"timeout must be >= 0, not {value!r}")
    return float(value)


def permits(value: object) -> int:
    """Semaphore permits: an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"permits must be an int, not {value!r}")
    if not 1 <= value < 10**9:
        raise InvalidArgument(f"permits must be >= 1 (and < 10**9), not {value}")
    return value


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
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"session_timeout must be a positive number, not {value!r}")
    if math.isinf(value):
        raise InvalidArgument("session_timeout must be finite")
    return float(value)


def ensemble_lag(value: object) -> float:
    """Seconds (finite, >= 0) by which an ensemble member may outrun the leader's timer."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"ensemble_lag must be a number of seconds or None, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidArgument(f"ensemble_lag must be finite and >= 0, not {value!r}")
    return float(value)
