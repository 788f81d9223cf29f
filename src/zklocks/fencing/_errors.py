"""The refusal every fence raises, and the one rule for what a token may be."""

from __future__ import annotations

from typing import Any

from zklocks._errors import InvalidArgument, LockError

MAX_TOKEN = 2**63 - 1  # a zxid is a signed 64-bit number, and so is PostgreSQL's BIGINT


class StaleToken(LockError):
    """A write carried a fencing token lower than one the store already accepted.

    ``key`` is the resource or key the bar belongs to, ``token`` the refused one,
    ``highest`` the one accepted before it. The holder behind ``token`` lost its lease.
    """

    def __init__(self, key: str, token: int, highest: int) -> None:
        super().__init__(
            f"refused write to {key!r}: token {token} is older than {highest}, "
            "which the store has already accepted (the lease behind it was lost)"
        )
        self.key = key
        self.token = token
        self.highest = highest

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its fields, so it survives pickling (a worker process's refusal
        # reported to its parent) with every attribute.
        return (type(self), (self.key, self.token, self.highest))


def checked_token(token: object) -> int:
    """``token`` as the int it must be: a lease's token, 0 to 2**63 - 1.

    Tokens are compared as numbers everywhere; a str or a float here would be a caller's
    mistake that a comparison could hide, so it is refused before anything is sent.
    """
    if isinstance(token, bool) or not isinstance(token, int):
        raise InvalidArgument(
            f"a fencing token is an int (lease.token), not {type(token).__name__}"
        )
    if not 0 <= token <= MAX_TOKEN:
        raise InvalidArgument(f"a fencing token is between 0 and 2**63 - 1, not {token}")
    return token


def checked_name(what: str, value: object) -> str:
    """A resource or key name: a non-empty str."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty str, not {value!r}")
    return value
