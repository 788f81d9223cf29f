"""The client's half of ZooKeeper's watches: who to call when the server says a watch fired.

The server keeps at most one watch per (connection, path, kind) and sends one event when
it fires; the client may have many callers waiting on that one watch, so it keeps its own
table and decides which callers an event is for. The rules follow the Java client's
``ZKWatchManager`` (3.8):

==================  ====================================================================
event               callers it pops (one-shot) / calls (persistent)
==================  ====================================================================
CREATED, CHANGED    data + exist watches on the path
CHILD               child watches on the path
DELETED             data + exist + child watches on the path
(any of the above)  persistent watches on the path; recursive watches on the path or any
                    ancestor, except for CHILD (recursive watches ignore child events)
==================  ====================================================================

One-shot watches are removed when they fire; persistent ones stay until the session
ends. After a reconnect every path still in the table is sent back to the server with
``setWatches`` (see ``set_watches_bodies``); the server fires at once the ones whose node
changed while we were away (judged against the last zxid we saw).
"""

from __future__ import annotations

from collections.abc import Iterator

from zklocks._protocol.codec import encode_set_watches, to_server
from zklocks._protocol.constants import EventType, OpCode, WatchTable
from zklocks._vocabulary import Watcher

# setWatches bodies are split so that none comes near jute.maxbuffer (the Java client's
# limit is the same 128 KiB).
SET_WATCHES_MAX_BYTES = 128 * 1024

_ONE_SHOT_FOR: dict[int, tuple[WatchTable, ...]] = {
    EventType.CREATED: (WatchTable.DATA, WatchTable.EXIST),
    EventType.CHANGED: (WatchTable.DATA, WatchTable.EXIST),
    EventType.CHILD: (WatchTable.CHILD,),
    EventType.DELETED: (WatchTable.DATA, WatchTable.EXIST, WatchTable.CHILD),
}


def _parents(path: str) -> Iterator[str]:
    """``path`` itself, then each ancestor up to ``/``."""
    yield path
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        yield path


class WatchRegistry:
    """Path -> callers, per watch kind. Paths are the client's (chroot already removed)."""

    def __init__(self) -> None:
        # dict-as-ordered-set: a caller registered twice on the same watch is called once.
        self._tables: dict[WatchTable, dict[str, dict[Watcher, None]]] = {
            kind: {} for kind in WatchTable
        }

    def add(self, kind: WatchTable, path: str, watcher: Watcher) -> None:
        self._tables[kind].setdefault(path, {})[watcher] = None

    def remove(self, kind: WatchTable, path: str, watcher: Watcher) -> bool:
        """Forget one caller (the server-side watch stays until it fires). True if found."""
        callers = self._tables[kind].get(path)
        if callers is None or watcher not in callers:
            return False
        del callers[watcher]
        if not callers:
            del self._tables[kind][path]
        return True

    def paths(self, kind: WatchTable) -> list[str]:
        return list(self._tables[kind])

    def __len__(self) -> int:
        return sum(len(callers) for table in self._tables.values() for callers in table.values())

    def __bool__(self) -> bool:
        return any(self._tables.values())

    def trigger(self, event_type: int, path: str) -> list[Watcher]:
        """The callers an event is for, in registration order; one-shot ones are removed."""
        found = self.matching(event_type, path)
        self.forget_fired(event_type, path)
        return found

    def forget_fired(self, event_type: int, path: str) -> None:
        """Remove the one-shot callers an event on ``path`` has fired (``matching``'s).

        Apart from ``matching`` so a reader can record the event before the watches leave
        the table: an interruption between the two then never loses a notification (the
        watch is still here, restored on the next connection)."""
        tables = self._tables
        for kind in _ONE_SHOT_FOR.get(event_type, ()):
            tables[kind].pop(path, None)

    def matching(self, event_type: int, path: str) -> list[Watcher]:
        """The callers an event is for, in registration order; nothing is removed."""
        found: dict[Watcher, None] = {}
        tables = self._tables
        for kind in _ONE_SHOT_FOR.get(event_type, ()):
            callers = tables[kind].get(path)
            if callers:
                found.update(callers)
        persistent = tables[WatchTable.PERSISTENT]
        if persistent:
            callers = persistent.get(path)
            if callers:
                found.update(callers)
        recursive = tables[WatchTable.PERSISTENT_RECURSIVE]
        if recursive and event_type != EventType.CHILD:
            for parent in _parents(path):
                callers = recursive.get(parent)
                if callers:
                    found.update(callers)
        return list(found)

    def drain(self) -> list[tuple[str, Watcher]]:
        """Remove everything; each (path, caller) once, for the session-ended notice."""
        seen: dict[tuple[str, Watcher], None] = {}
        for table in self._tables.values():
            for path, callers in table.items():
                for watcher in callers:
                    seen[(path, watcher)] = None
            table.clear()
        return list(seen)

    def set_watches_bodies(self, relative_zxid: int, chroot: str) -> list[tuple[int, bytes]]:
        """(op code, body) of the setWatches requests that restore every watch.

        Uses SetWatches2 only when persistent watches exist, so servers older than 3.6
        still get the request they know.
        """
        t = self._tables
        lists = [
            [to_server(p, chroot) for p in t[kind]]
            for kind in (
                WatchTable.DATA,
                WatchTable.EXIST,
                WatchTable.CHILD,
                WatchTable.PERSISTENT,
                WatchTable.PERSISTENT_RECURSIVE,
            )
        ]
        if not any(lists):
            return []
        version2 = bool(lists[3] or lists[4])
        opcode = OpCode.SET_WATCHES2 if version2 else OpCode.SET_WATCHES
        bodies: list[tuple[int, bytes]] = []
        batch: list[list[str]] = [[] for _ in lists]
        size = 0
        for index, paths in enumerate(lists):
            for path in paths:
                cost = 4 + len(path.encode("utf-8"))
                if size + cost > SET_WATCHES_MAX_BYTES and size:
                    bodies.append((opcode, self._body(relative_zxid, batch, version2)))
                    batch = [[] for _ in lists]
                    size = 0
                batch[index].append(path)
                size += cost
        bodies.append((opcode, self._body(relative_zxid, batch, version2)))
        return bodies

    @staticmethod
    def _body(relative_zxid: int, batch: list[list[str]], version2: bool) -> bytes:
        if version2:
            return encode_set_watches(relative_zxid, *batch)
        return encode_set_watches(relative_zxid, batch[0], batch[1], batch[2])
