"""Who waits behind a holder: ``lease.add_waiting_callback(fn)`` (issue 35).

A holder that would yield when others wait (Zuul's ``contender_present``, CURATOR-592)
asks to be told. Only then does it watch the lock directory's children, while it
holds, and set the watch again after each change: the holder alone, so waiters still
watch only their predecessor (no herd), and a lease with no callback costs nothing.

``fn(lease, waiting)`` gets the number of contenders queued behind our node that do
not hold (others holding beside it, readers or permits, do not count), each time that
number rises, and once at registration if someone already waits. It runs on a thread
(or, for ``AsyncClient``, in a task) of the client's, so it must be quick; an exception
it raises is logged and ignored. No I/O here: the front end reads the directory
(``zklocks._frontend.operations.count_waiters``) and answers ``seen``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from zklocks._core.nodes import NodeName
from zklocks._core.strategies import Granted, Rules

log = logging.getLogger("zklocks.lock")

WaitingCallback = Callable[[Any, int], object]

__all__ = ["Waiting", "WaitingCallback", "waiting_behind"]


def waiting_behind(rules: Rules, me: NodeName, line: Sequence[NodeName]) -> int:
    """How many contenders after ``me`` in ``line`` do not hold."""
    names = [node.name for node in line]
    if me.name not in names:
        return 0
    behind = line[names.index(me.name) + 1 :]
    return sum(1 for node in behind if not isinstance(rules.decide(node, line), Granted))


class Waiting:
    """A lease's waiting callbacks, the last count seen, and whether the watch runs."""

    def __init__(self) -> None:
        self._callbacks: list[WaitingCallback] = []
        self._last = 0
        self._count: Callable[[], None] | None = None  # the front end's read
        self._started = self._stopped = False
        self._mutex = threading.Lock()

    def allow(self, count: Callable[[], None]) -> None:
        """(The lock that made the lease) how to read the directory: ``count()`` reads
        it with a child watch, apart from the caller, and answers ``seen``."""
        self._count = count
        self._start_if_due()

    def add(self, lease: object, fn: WaitingCallback) -> None:
        with self._mutex:
            if self._stopped:
                return
            self._callbacks.append(fn)
            last = self._last
        if last > 0:
            _call_back(fn, lease, last)
        self._start_if_due()

    def _start_if_due(self) -> None:
        with self._mutex:
            due = self._count is not None and bool(self._callbacks)
            due = due and not self._started and not self._stopped
            if due:
                self._started = True
        if due and self._count is not None:
            self._count()

    def changed(self) -> None:
        """(The child watch) the directory changed: read it again, which sets the watch
        again, while the lease is held."""
        count = self._count
        if count is not None and not self._stopped:
            count()

    def seen(self, lease: object, waiting: int) -> None:
        """A read's count: the callbacks run when it rose."""
        with self._mutex:
            if self._stopped:
                return
            rose = waiting > self._last
            self._last = waiting
            callbacks = list(self._callbacks) if rose else []
        for fn in callbacks:
            _call_back(fn, lease, waiting)

    def stop(self) -> None:
        """The lease ended or was lost: no more reads, no more calls."""
        with self._mutex:
            self._stopped = True
            self._callbacks.clear()
            self._count = None  # it holds the lease: no cycle is left behind

    @property
    def stopped(self) -> bool:
        return self._stopped


def _call_back(fn: WaitingCallback, lease: object, waiting: int) -> None:
    try:
        fn(lease, waiting)
    except Exception:
        log.exception("a waiting callback failed (ignored)")
