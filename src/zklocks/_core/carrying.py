"""The carrier contract: the rules every carrier keeps, written once.

A carrier takes a flow's requests to ZooKeeper and brings the replies back: our own
connection (``_sync/native_carrier``, ``_asyncio/native_carrier``) or the simulator
(``sim/session``, ``sim/async_session``, and the scheduled ``sim/client``). ZooKeeper
states neither of these two rules; the flows rely on both, so every carrier must keep
them alike, and tests/integration/test_carrier_contract.py checks all four runtimes:

* Requests that cannot be sent before their deadline are each answered ``TIMED_OUT``
  (``never_sent``): a flow can then tell "never sent, nothing was made" from a lost
  answer, whose effect it must look for.
* A node watch (``watch_node``) set on a node already gone fires ``DELETED``
  (``watch_answer``): a lease watching its node hears of its loss even when the loss
  came before the watch.
"""

from __future__ import annotations

from collections.abc import Sequence

from zklocks._core import events as _events
from zklocks._core.ops import TIMED_OUT, Reply, Request
from zklocks._protocol.errors import NoNodeError
from zklocks._vocabulary import WatchEvent, WatchKind

__all__ = ["never_sent", "requests_meter", "watch_answer"]


def never_sent(requests: Sequence[Request]) -> list[Reply]:
    """The replies to requests whose deadline passed before they could be sent."""
    return [TIMED_OUT for _ in requests]


def watch_answer(path: str, answer: object) -> WatchEvent | None:
    """The event a node watch's answer (reply or error) stands for at once, if any:
    ``DELETED`` when the node was already gone, else none (the watch is set)."""
    if isinstance(answer, NoNodeError):
        return WatchEvent(WatchKind.DELETED, path)
    return None


def requests_meter() -> _events.Sink | None:
    """Where a native connection counts requests: the metrics sink, once one is enabled
    (read at each request, so enabling metrics later still counts)."""
    return _events.sink
