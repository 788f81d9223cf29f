"""Telling waiters and watchers: watch events, session ends, failed requests.

The session core hands the connection notifications in the wire's numbers and tokens
(futures, or anything with ``done``/``set_exception``); these functions turn them into the
shared vocabulary (``WatchEvent``) and typed errors. A watcher that raises is logged and
does not stop the others.
"""

from __future__ import annotations

import logging
from typing import Any

from zklocks._protocol.constants import EventType
from zklocks._protocol.errors import ZooKeeperError
from zklocks._protocol.session import WatchFired
from zklocks._vocabulary import SessionState, WatchEvent, WatchKind

__all__ = ["fail", "notify", "notify_all"]

log = logging.getLogger("zklocks.connection")

# the wire's event types in the shared vocabulary (a session end is told separately)
_KINDS: dict[int, WatchKind] = {
    EventType.CREATED.value: WatchKind.CREATED,
    EventType.DELETED.value: WatchKind.DELETED,
    EventType.CHANGED.value: WatchKind.CHANGED,
    EventType.CHILD.value: WatchKind.CHILD,
}
_ENDS = {SessionState.LOST: WatchKind.SESSION_LOST, SessionState.CLOSED: WatchKind.CLOSED}


def notify(event: WatchFired) -> None:
    """Call the watchers of one watch event."""
    if not event.watchers:
        return
    kind = _KINDS.get(event.event_type)
    if kind is None:
        log.warning("unknown watch event type %r on %s", event.event_type, event.path)
        return
    watch_event = WatchEvent(kind, event.path)
    for watcher in event.watchers:
        try:
            watcher(watch_event)
        except Exception:
            log.exception("watcher %r failed on %r", watcher, watch_event)


def notify_all(watchers: list[tuple[str, Any]], state: SessionState) -> None:
    """The session ended (LOST or CLOSED): every watcher hears it once, with its path."""
    for path, watcher in watchers:
        try:
            watcher(WatchEvent(_ENDS[state], path))
        except Exception:
            log.exception("watcher %r failed on the %s notice", watcher, state.name)


def fail(tokens: list[Any], error: ZooKeeperError) -> None:
    """Fail requests in flight (``(token, sent)`` pairs), each with its own copy of
    ``error``."""
    for future, _sent in tokens:
        if future is not None and not future.done():
            future.set_exception(type(error)(str(error)))
