"""A user's watch on the sync client, run apart from the client's connection thread.

The sync ``Client`` delivers every notification on one private thread, which reads the
replies no waiting caller reads, and a watch fires there. A watch that reads again
(``client.get(path, watch=again)``, the usual way to follow a node) would then block that
thread on a reply only that thread may read (a caller's read stops at a notification,
and the loop's is blocked): a deadlock. So
each event is handed to a thread of its own (``SyncCarrier.in_background``, which
``close()`` joins), where the watch may call the client like any other thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

from zklocks._vocabulary import Watcher, WatchEvent

log = logging.getLogger("zklocks.connection")


class ApartWatcher:
    """``fn``, called apart from the connection's thread. Equal to another for the same
    ``fn``: the connection's watch table keeps one registration per callable and node, so
    the same watch set twice on one node is still called once."""

    __slots__ = ("_apart", "_fn")

    def __init__(
        self,
        fn: Watcher,
        apart: Callable[[Callable[[], None]], concurrent.futures.Future[Any]],
    ) -> None:
        self._fn = fn
        self._apart = apart

    def __call__(self, event: WatchEvent) -> None:
        self._apart(lambda: self._run(event))

    def _run(self, event: WatchEvent) -> None:
        try:
            self._fn(event)
        except Exception:  # nobody else would hear of it: the caller has moved on
            log.exception("watch %r failed on %r", self._fn, event)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApartWatcher) and other._fn == self._fn

    def __hash__(self) -> int:
        return hash(self._fn)

    def __repr__(self) -> str:
        return f"<watch {self._fn!r}>"
