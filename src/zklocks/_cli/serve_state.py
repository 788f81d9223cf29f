"""What ``zklocks serve`` knows: every lock under its paths, kept fresh by ZooKeeper watches.

Theory of operation
-------------------
One persistent recursive watch per served path (ZooKeeper 3.6+ ``addWatch``) reports
every node created, deleted or changed below it. The watch only *marks* the lock
directories it names as dirty and wakes the **feed** thread; the feed then walks the
paths (``walk_locks``: one round trip per level) and reads again, with the very
``snapshot`` that ``zklocks status --json`` prints, only the locks that are new or
dirty. A burst of events costs one pass. Nothing polls: between changes no request is
sent, and the HTTP threads answer from the ``Board`` (the last pass) without touching
ZooKeeper.

A connection state change marks everything dirty: while disconnected the server may have
sent events we never got. A new session (after an expiry) has lost the persistent
watches, so the feed adds them again first. While ZooKeeper is unreachable the feed's
calls wait for the reconnection; the Board keeps the last pass, and ``connected`` says
whether to trust it.

A holder's hold is timed from its grant where the feed saw it wait (the pass after the
watch that woke it, as ``status --watch`` times it): a node's age counts its wait too,
and a leader that queued for an hour must not read as held for an hour. A holder that
was already holding when ``serve`` started, or was granted at once, is timed from its
node's creation.

A lock that empties keeps its place on the Board (zero holders, zero waiters) while its
directory node exists, so "nobody leads" is a value an alert can see rather than a
series that vanished.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zklocks import Client, ClientClosed, LockError, LockSummary, WatchedEvent
from zklocks._cli.status_view import json_time, note_grants, snapshot

log = logging.getLogger("zklocks.serve")

ELECTION = "election"


def under(path: str, root: str) -> bool:
    """Is ``path`` at or below ``root`` (``/`` is above everything)?"""
    return root == "/" or path == root or path.startswith(root + "/")


@dataclasses.dataclass(frozen=True)
class LockView:
    """One lock as the last pass read it: ``state`` is the ``status --json`` document."""

    path: str
    kind: str  # "lock", "read/write", "semaphore(3)", "election", ... (as `zklocks ls`)
    state: Mapping[str, Any]
    granted: Mapping[str, float] = dataclasses.field(default_factory=dict)  # node: epoch s

    @property
    def holders(self) -> Sequence[Mapping[str, Any]]:
        return self.state["holders"]  # type: ignore[no-any-return]

    @property
    def waiters(self) -> Sequence[Mapping[str, Any]]:
        return self.state["waiters"]  # type: ignore[no-any-return]

    @property
    def token(self) -> int | None:
        """The highest holder's fencing token, as ``status --json`` shows it."""
        return self.state["token"]  # type: ignore[no-any-return]

    def oldest_hold(self, now: dt.datetime) -> float:
        """Seconds the oldest holder has held: since its grant where the feed saw it, else
        since its node was created (as ``status`` counts); 0 with no holder."""
        held = [self._held_since(h) for h in self.holders]
        return max((max(0.0, now.timestamp() - since) for since in held), default=0.0)

    def _held_since(self, holder: Mapping[str, Any]) -> float:
        granted = self.granted.get(holder.get("node", ""))
        if granted is not None:
            return granted
        return dt.datetime.fromisoformat(holder["joined"]).timestamp()


@dataclasses.dataclass(frozen=True)
class Board:
    """The last pass: immutable, swapped whole, so a reader never sees half a pass."""

    locks: Mapping[str, LockView] = dataclasses.field(default_factory=dict)
    listed_at: dt.datetime | None = None  # None until the first pass is done


def fresh_state(state: Mapping[str, Any], now: dt.datetime) -> dict[str, Any]:
    """A cached ``status --json`` document with ``at`` and the ages advanced to ``now``:
    what ``status`` would print now, since no watch has fired since it was read."""
    moved = dict(state)
    moved["at"] = json_time(now)
    timed = any(entry.get("held_s") is not None for entry in state["holders"])
    since = (now - dt.datetime.fromisoformat(state["at"])).total_seconds() if timed else 0.0
    for side in ("holders", "waiters"):
        moved[side] = [_aged(entry, now, since) for entry in state[side]]
    return moved


def _aged(entry: Mapping[str, Any], now: dt.datetime, since: float) -> dict[str, Any]:
    joined = dt.datetime.fromisoformat(entry["joined"])
    aged = {**entry, "age_s": round(max(0.0, (now - joined).total_seconds()), 3)}
    if entry.get("held_s") is not None:  # a grant the feed saw: timed from it
        aged["held_s"] = round(entry["held_s"] + max(0.0, since), 3)
    return aged


def _kind_of(state: Mapping[str, Any], summary: LockSummary | None, before: str) -> str:
    if summary is not None:
        return summary.kind
    entries = list(state["holders"]) + list(state["waiters"])
    return str(entries[0]["kind"]) if entries else before


class Feed:
    """The thread that keeps the Board fresh; ``board`` is safe to read from any thread."""

    def __init__(self, client: Client, roots: Sequence[str]) -> None:
        self.client = client
        self.roots = tuple(roots)
        self.board = Board()
        self.error: str | None = None  # the last pass's failure, if it failed
        self._wake = threading.Event()
        self._mutex = threading.Lock()
        self._dirty: set[str] = set()
        self._everything_dirty = False
        self._stopping = False
        self._watched_session: int | None = None
        # per lock path: the nodes seen waiting, and when each was seen granted (epoch s)
        self._seen_waiting: dict[str, set[str]] = {}
        self._granted: dict[str, dict[str, float]] = {}
        self._thread = threading.Thread(target=self._feed, name="zklocks-serve-feed")

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """The first pass, on the caller's thread (so its errors are the caller's), then
        the feed thread. Raises ``LockError`` when the paths cannot be watched or read."""
        self.client.add_listener(self._on_state)
        try:
            self._watch_paths()
            self.board = self._pass(self.board, None)  # events meanwhile wake the thread
        except BaseException:
            self.client.remove_listener(self._on_state)
            raise
        self._thread.start()

    def stopping(self) -> None:
        """Tell the thread to end at its next step (before the client stops under it)."""
        self._stopping = True
        self._wake.set()

    def stop(self) -> None:
        """End the thread; call after ``client.stop()`` so that no call of it can block."""
        self.stopping()
        if self._thread.is_alive():
            self._thread.join()
        self.client.remove_listener(self._on_state)

    # -- what wakes the feed (called on the client's connection thread: no blocking) -------

    def _on_state(self, _state: object) -> None:
        with self._mutex:
            self._everything_dirty = True
        self._wake.set()

    def _on_watch(self, event: WatchedEvent) -> None:
        parent = event.path.rsplit("/", 1)[0] or "/"
        with self._mutex:
            self._dirty.update((event.path, parent))  # a contender's lock, or a lock itself
        self._wake.set()

    # -- the feed thread -----------------------------------------------------------------

    def _feed(self) -> None:
        while not self._stopping:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            with self._mutex:
                dirty, everything = self._dirty, self._everything_dirty
                self._dirty, self._everything_dirty = set(), False
            try:
                armed = self._watch_paths()  # a new session: changes before it went unseen
                self.board = self._pass(self.board, None if everything or armed else dirty)
                self.error = None
            except ClientClosed:
                return  # stopped under us
            except LockError as error:
                if self._stopping:
                    return  # the client was stopped mid-pass
                # the connection went down mid-pass (it is read again when it is back), or
                # ZooKeeper refused: remembered for /healthz and tried again on the next change
                self.error = str(error)
                log.warning("cannot read the locks: %s", error)
                with self._mutex:
                    self._everything_dirty = True

    def _watch_paths(self) -> bool:
        """Add the persistent watches, once per session (a new session has none); True
        when it added them."""
        session_id = self.client.session_id()
        if session_id == self._watched_session:
            return False
        self.client.watch_tree(self.roots, self._on_watch)
        self._watched_session = session_id
        return True

    def _pass(self, board: Board, dirty: set[str] | None) -> Board:
        """Walk the paths; read the locks that are new, dirty (``None``: all) or gone."""
        summaries: dict[str, LockSummary] = {}
        for root in self.roots:
            summaries.update((found.path, found) for found in self.client.locks(root))
        locks: dict[str, LockView] = {}
        for path in sorted(set(summaries) | set(board.locks)):
            before = board.locks.get(path)
            summary = summaries.get(path)
            if before is not None and dirty is not None and path not in dirty:
                locks[path] = before  # nothing happened to it (a deletion would be dirty)
                continue
            state = snapshot(self.client, path)
            empty = not state["holders"] and not state["waiters"]
            if empty and state["acl"] is None:
                continue  # its directory is gone: so is the lock
            kind = _kind_of(state, summary, before.kind if before else "lock")
            waiting = self._seen_waiting.setdefault(path, set())
            granted = self._granted.setdefault(path, {})
            note_grants(state, waiting, granted, dt.datetime.now(tz=dt.UTC).timestamp())
            locks[path] = LockView(path, kind, state, dict(granted))
        for gone in set(self._granted) - set(locks):
            self._granted.pop(gone, None)
            self._seen_waiting.pop(gone, None)
        return Board(locks, dt.datetime.now(tz=dt.UTC))


def read_one(client: Client, path: str) -> dict[str, Any] | None:
    """``status --json`` of a path the Board does not know; None when nothing is there."""
    state = snapshot(client, path)
    if state["acl"] is None and not state["holders"] and not state["waiters"]:
        return None
    return state


def leader_of(view: LockView) -> dict[str, Any]:
    """``{"leader": identifier or null, "token": int or null}`` of an election."""
    holder = next(iter(view.holders), None)
    if holder is None:
        return {"leader": None, "token": None}
    return {"leader": holder["identifier"], "token": holder["token"]}


def is_election(kind: str, entries: Iterable[Mapping[str, Any]]) -> bool:
    listed = list(entries)
    if listed:
        return all(entry["kind"] == ELECTION for entry in listed)
    return kind == ELECTION
