"""The carrier contract: the rules every carrier keeps, written once.

A carrier takes a flow's requests to ZooKeeper and brings the replies back: our own
connection (``_sync/native_carrier``, ``_asyncio/native_carrier``) or the simulator's
(``sim/session``, ``sim/async_session``, ``sim/client``). The flows rely on two rules no
server states (tests/integration/test_carrier_contract.py checks all four runtimes):

* Requests not sent by their deadline are each ``TIMED_OUT`` (``never_sent``): "never
  sent, nothing made", unlike a lost answer, whose effect a flow must look for.
* A node watch set on a node already gone fires ``DELETED`` (``watch_answer``): a lease
  hears of its loss even when the loss came before the watch.
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
    """The event a node watch's answer stands for at once: DELETED if the node is gone."""
    if isinstance(answer, NoNodeError):
        return WatchEvent(WatchKind.DELETED, path)
    return None


def requests_meter() -> _events.Sink | None:
    """Where a native connection counts requests: the metrics sink, once enabled."""
    return _events.sink
