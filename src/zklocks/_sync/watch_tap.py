"""A carrier that tells its owner about the watches the lock flows set and those that fire.

``zklocks demo`` counts wake-ups with it: each of its contenders runs on a carrier made by
``tapped_carrier``, which sees every watch a waiting flow sets (with the nodes it watches)
and every deletion those watches report, so a waiter that sleeps, and each time it is
woken, is an event the demo can show. It lives here, beside the carrier it wraps, so that
the tools reach the carrier's ``call`` only through this one door (docs/architecture.md,
"the tools use the front door").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from zklocks._core.ops import Reply, Request, Wake
from zklocks._protocol.errors import ZooKeeperError
from zklocks._sync.native_carrier import NativeSyncCarrier
from zklocks._vocabulary import Watcher, WatchEvent, WatchKind

__all__ = ["tapped_carrier"]


def tapped_carrier(
    *, watching: Callable[[list[str]], None], woken: Callable[[str], None]
) -> type[NativeSyncCarrier]:
    """A carrier class (a ``session_factory``) that calls ``watching(paths)`` once a call
    that sets watches found every node it watches (the waiter sleeps now), and
    ``woken(path)`` each time such a watch reports its node deleted."""

    class TappedCarrier(NativeSyncCarrier):
        def call(
            self,
            requests: Sequence[Request],
            deadline: float | None,
            watcher: Watcher | None = None,
        ) -> list[Reply]:
            if watcher is None:
                return super().call(requests, deadline)
            inner = watcher

            def tapped(event: WatchEvent) -> None:
                if event.kind is WatchKind.DELETED:
                    woken(event.path)
                inner(event)

            replies = super().call(requests, deadline, tapped)
            if replies and all(_present(reply) for reply in replies):
                watching([request.path for request in requests])
            return replies

    return TappedCarrier


def _present(reply: Reply) -> bool:
    """Did this watch-setting request find its node (so its watch is now set)?"""
    return reply is not None and not isinstance(reply, ZooKeeperError | Wake)
