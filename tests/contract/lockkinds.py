"""Every lock kind behind one factory, so each contract case runs for all of them: the
table lives in ``tests/helpers.py`` (the async contract and the fault tests use it too)."""

from __future__ import annotations

from collections.abc import Callable

import zklocks
from helpers import EXCLUSIVE, QUEUED_EXCLUSIVE, blocker_kind
from helpers import KINDS as _ANY_CLIENT_KINDS

LockFactory = Callable[[zklocks.Client, str], zklocks.Lock]

KINDS: dict[str, LockFactory] = dict(_ANY_CLIENT_KINDS)  # typed for the sync client

__all__ = ["EXCLUSIVE", "KINDS", "QUEUED_EXCLUSIVE", "LockFactory", "blocker_kind"]
