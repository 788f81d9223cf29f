"""The carrier contract: the rules every carrier keeps, written once.

A carrier takes a flow's requests to ZooKeeper and brings the replies back: our own
connection (``_sync/native_carrier``, ``_asyncio/native_carrier``) or the simulator's
(``sim/session``, ``sim/async_session``, ``sim/client``). The flows rely on two rules no
server states (tests/integration/test_carrier_contract.py checks all four runtimes):

* Requests not sent by their deadline are each ``TIMED_OUT`` (``never_sent``): "never
  sent, nothing made", unlike a lost answer, whose effect a flow must look for.
* A node watch set on a node already gone fires ``DELETED`` (``watch_answer``): a lease
  hears of its loss even when the loss came before the watch.

Our own connection answers a call's replies into ``Replies`` (the sync ``_Latch``, the
asyncio ``_Gate``), which it treats as it would futures: cheaper than a future each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zklocks._core import events as _events
from zklocks._core.ops import TIMED_OUT, Reply, Request
from zklocks._protocol.errors import NoNodeError, ZooKeeperError
from zklocks._vocabulary import WatchEvent, WatchKind

__all__ = ["Replies", "ReplySlot", "never_sent", "requests_meter", "watch_answer"]


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


class Replies:
    """The replies of one call, which the connection answers as it would futures.

    A one-request call's ``Replies`` is its own token, with a future's ``done``,
    ``set_result`` and ``set_exception``; a longer one hands out a ``ReplySlot`` per
    request. A ZooKeeper error is a reply, as the flows read them; any other error
    fails the whole call. Subclasses say how the caller waits: ``answer``, ``fail``,
    ``done``, and ``threadsafe`` (may a thread other than the loop's answer it?).
    """

    __slots__ = ()
    threadsafe = False
    count: int

    def tokens(self) -> list[Any]:
        return [self] if self.count == 1 else [ReplySlot(self, i) for i in range(self.count)]

    def done(self) -> bool:
        raise NotImplementedError

    def answer(self, index: int, reply: Reply) -> None:
        raise NotImplementedError

    def fail(self, error: BaseException) -> None:
        raise NotImplementedError

    def set_result(self, value: Reply) -> None:
        self.answer(0, value)

    def set_exception(self, error: BaseException) -> None:
        if isinstance(error, ZooKeeperError):
            self.answer(0, error)
        else:
            self.fail(error)


class ReplySlot:
    """One request's place in its call's ``Replies``: the token the connection answers."""

    __slots__ = ("_done", "index", "replies")

    def __init__(self, replies: Replies, index: int) -> None:
        self.replies = replies
        self.index = index
        self._done = False

    @property
    def threadsafe(self) -> bool:
        return self.replies.threadsafe

    def done(self) -> bool:
        return self._done or self.replies.done()

    def set_result(self, value: Reply) -> None:
        self._done = True
        self.replies.answer(self.index, value)

    def set_exception(self, error: BaseException) -> None:
        self._done = True
        if isinstance(error, ZooKeeperError):
            self.replies.answer(self.index, error)
        else:
            self.replies.fail(error)
