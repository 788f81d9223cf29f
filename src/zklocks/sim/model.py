"""A deterministic, pure in-memory ZooKeeper: the server side of the simulator.

No threads, no clock of its own: the caller sets ``now`` (seconds, any monotonic
origin) before each request, so one run of a seeded schedule is one exact sequence of
states. What it models, as the real server does it (``DataTree`` and
``PrepRequestProcessor`` in ZooKeeper 3.8):

* **Nodes**: persistent, ephemeral (owned by a session), sequential and container
  nodes (``ephemeralOwner`` reads 0 to clients; ``sweep_containers`` deletes the empty
  ones that ever had a child, as the server's container manager does every interval).
* **Sequence numbers and cversion**, as 3.8 keeps them (measured on the real server by
  tests/integration/test_sim_conformance.py): each node has an internal counter of
  children *created* (``Node.cversion``, a Java ``int``); a sequential node's suffix is
  that counter before the create, formatted ``%010d``, so it wraps to ``-2147483648``
  after ``2147483647``; the ``cversion`` a client reads is ``2 * counter - numChildren``
  (``DataNode.copyStat``), i.e. creates plus deletes.
* **Stat**: ``czxid``, ``mzxid``, ``pzxid``, ``ctime``, ``mtime``, ``version``,
  ``cversion``, ``ephemeralOwner``, ``numChildren``.
  One global ``zxid`` counts every write (create, delete, setData, createSession,
  closeSession).
* **Errors**, checked in the server's order: a request on a dead session answers
  ``SessionExpiredError``; create: ``NoNodeError`` (parent missing), ``NodeExistsError``,
  then ``NoChildrenForEphemeralsError``; delete: ``NoNodeError``, ``NotEmptyError``.
* **Watches** are server-side and one-shot, one per (session, path, table) like the
  server's per-connection watch: ``exists`` sets a data watch even on a missing node
  (fires CREATED on create), ``getData``/``getChildren`` on a missing node set none.
  Create fires CREATED on the path's data watches and CHILD on the parent's child
  watches; delete fires DELETED on the path's data *and* child watches (once per
  session) and CHILD on the parent's; setData fires CHANGED. Fired watches become
  ``Notification``s in ``outbox``; the caller routes them to clients (the simulator may
  delay them; ``ClientWatches`` does the client-side half).
* **Sessions**: id, password, timeout, last-heard time. ``expire_due(now)`` expires
  sessions not heard from for a whole timeout; ``expire``/``close_session`` end one at
  once. Ending a session removes its watches, then its ephemeral nodes (firing others'
  watches), as one closeSession transaction.

Not modelled: ACLs, quotas, multi-op transactions, versions on delete/setData, the
``/zookeeper`` subtree's contents (only the node exists), ensembles and leader changes,
TTL nodes, client-side path validation beyond the basics.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from zklocks._core.ops import Reply, Request
from zklocks._protocol.errors import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import (
    Children,
    Create,
    Created,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    MultiResult,
    NodeData,
    SetData,
    Stat,
)
from zklocks._vocabulary import Watcher, WatchEvent, WatchKind

_HALF = 1 << 31
_WRAP = 1 << 32
_FIRST_SESSION = 0x0100_0000_0000_0000


def int32(value: int) -> int:
    """``value`` as Java's ``int`` arithmetic would hold it (wraps at 2**31)."""
    return (value + _HALF) % _WRAP - _HALF


def sequence_suffix(cversion: int) -> str:
    """The suffix ZooKeeper appends to a sequential node: ``%010d`` of a signed int."""
    return "%010d" % int32(cversion)  # noqa: UP031 -- the server's own format string


@dataclass(slots=True)
class Node:
    """One znode: data, stat fields and its children (an insertion-ordered set).

    ``cversion`` is the server's internal counter of children created (the sequence
    source); ``stat()`` reports ``2 * cversion - numChildren`` as the server does.
    """

    data: bytes
    czxid: int
    ctime_ms: int
    ephemeral_owner: int = 0
    container: bool = False
    mzxid: int = 0
    mtime_ms: int = 0
    pzxid: int = 0
    version: int = 0
    cversion: int = 0
    children: dict[str, None] = field(default_factory=dict)

    @property
    def reported_cversion(self) -> int:
        return int32(2 * self.cversion - len(self.children))

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime_ms=self.ctime_ms,
            mtime_ms=self.mtime_ms,
            version=self.version,
            cversion=self.reported_cversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
            pzxid=self.pzxid,
        )

    def full_stat(self) -> Stat:
        """Every stat field the model keeps (for ``SimSession``): the same ``Stat``."""
        return self.stat()


@dataclass(frozen=True, slots=True)
class Removal:
    """An ephemeral node's deletion: when, which, whether by a marked (clean) departure,
    its directory's children just before (the line it left), and whether its own
    session's request deleted it (not the server at the session's end, nor another
    session)."""

    at: float
    directory: str
    name: str
    marked: bool
    children: tuple[str, ...]
    own: bool = False


@dataclass(slots=True)
class SessionRecord:
    """A live session as the server knows it."""

    id: int
    password: bytes
    timeout: float
    last_heard: float
    ephemerals: dict[str, None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notification:
    """A fired watch on its way to the client of ``session_id``."""

    session_id: int
    kind: WatchKind
    path: str


class Model:
    """The whole server state; every method is a pure state transition at ``self.now``."""

    def __init__(self, *, epoch_ms: int = 1_700_000_000_000) -> None:
        self.now = 0.0
        self.epoch_ms = epoch_ms
        self.zxid = 0
        self.writes = 0  # bumped on every change of the tree: a cheap cache key
        self.nodes: dict[str, Node] = {"/": Node(b"", 0, epoch_ms)}
        self.sessions: dict[int, SessionRecord] = {}
        self.outbox: list[Notification] = []
        self.removals: list[Removal] = []  # of ephemeral nodes, for the lock-delay checks
        self._marking = False  # inside a marked release (``release_marked``)
        self._deleter = 0  # the session whose request deletes a node now (0: the server)
        self._next_session = _FIRST_SESSION
        self._data_watches: dict[str, dict[int, None]] = {}
        self._child_watches: dict[str, dict[int, None]] = {}
        self._create("/zookeeper", b"", owner=0, container=False)

    # -- sessions ---------------------------------------------------------------------

    def open_session(self, timeout: float) -> SessionRecord:
        """Start a session (a createSession transaction)."""
        session_id = self._next_session
        self._next_session += 1
        self.zxid += 1
        password = hashlib.sha256(session_id.to_bytes(8, "big")).digest()[:16]
        record = SessionRecord(session_id, password, timeout, self.now)
        self.sessions[session_id] = record
        return record

    def alive(self, session_id: int) -> bool:
        return session_id in self.sessions

    def touch(self, session_id: int) -> None:
        """The server heard from this session now (a request or a ping)."""
        record = self.sessions.get(session_id)
        if record is not None:
            record.last_heard = self.now

    def expiry_due(self, session_id: int) -> float | None:
        """When the server will expire this session if it hears nothing more."""
        record = self.sessions.get(session_id)
        return None if record is None else record.last_heard + record.timeout

    def expire_due(self) -> list[int]:
        """Expire every session silent for a whole timeout; their ids."""
        due = [s.id for s in self.sessions.values() if self.now >= s.last_heard + s.timeout]
        for session_id in due:
            self.close_session(session_id)
        return due

    def expire(self, session_id: int) -> bool:
        """End a session at once (what closing it from a second client does)."""
        return self.close_session(session_id)

    def close_session(self, session_id: int) -> bool:
        """closeSession: drop the session's watches, then delete its ephemeral nodes."""
        record = self.sessions.pop(session_id, None)
        if record is None:
            return False
        self.zxid += 1
        for table in (self._data_watches, self._child_watches):
            for watchers in table.values():
                watchers.pop(session_id, None)
        for path in list(record.ephemerals):
            if path in self.nodes:
                self._remove(path, self.zxid)
        return True

    # -- requests ---------------------------------------------------------------------

    def apply(self, session_id: int, request: Request, *, watch: bool = False) -> Reply:
        """Run one ``zklocks._core.ops`` request for a session; reply as a driver would.

        A request asking for what the model does not keep (a TTL, a version to match,
        children with a stat) is refused with ``ValueError`` rather than answered wrong.
        """
        if isinstance(request, Create):
            if request.ttl_ms:
                raise ValueError(f"the simulator does not model TTL nodes: {request!r}")
            return self.create(
                session_id,
                request.path,
                request.data,
                ephemeral=request.ephemeral and not request.container,
                sequential=request.sequential,
                container=request.container,
            )
        if isinstance(request, Delete):
            if request.version != -1:
                raise ValueError(f"the simulator does not model versions: {request!r}")
            return self.delete(session_id, request.path)
        if isinstance(request, GetChildren):
            names = self.get_children(session_id, request.path, watch=watch)
            if request.with_stat and isinstance(names, list):
                return Children(names, self.nodes[request.path].stat())
            return names
        if isinstance(request, Multi):
            match request.ops:
                case (SetData(path=path, data=data, version=version),):
                    return self.touch_data(session_id, path, data, version)
            return self.release_marked(session_id, request)
        if isinstance(request, GetData):
            return self.get_data(session_id, request.path, watch=watch)
        if isinstance(request, Exists):
            return self.exists(session_id, request.path, watch=watch)
        raise TypeError(f"not a request: {request!r}")

    def create(
        self,
        session_id: int,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        container: bool = False,
    ) -> Created | ZooKeeperError:
        if session_id not in self.sessions:
            return SessionExpiredError(path=path)
        self.touch(session_id)
        if not _valid(path) or path == "/":
            return BadArgumentsError(path=path)
        parent_path = _parent(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            return NoNodeError(path=path)
        if sequential:
            path = path + sequence_suffix(parent.cversion)
        if path in self.nodes:
            return NodeExistsError(path=path)
        if parent.ephemeral_owner != 0:
            return NoChildrenForEphemeralsError(path=path)
        self.zxid += 1
        owner = session_id if ephemeral else 0
        node = self._create(path, data, owner=owner, container=container)
        if ephemeral:
            self.sessions[session_id].ephemerals[path] = None
        return Created(path, node.stat())

    def delete(self, session_id: int, path: str) -> ZooKeeperError | None:
        if session_id not in self.sessions:
            return SessionExpiredError(path=path)
        self.touch(session_id)
        if not _valid(path) or path in ("/", "/zookeeper"):
            return BadArgumentsError(path=path)
        node = self.nodes.get(path)
        if node is None:
            return NoNodeError(path=path)
        if node.children:
            return NotEmptyError(path=path)
        self.zxid += 1
        self._deleter = session_id
        try:
            self._remove(path, self.zxid)
        finally:
            self._deleter = 0
        return None

    def set_data(self, session_id: int, path: str, data: bytes) -> Stat | ZooKeeperError:
        node = self._node_for(session_id, path)
        if isinstance(node, ZooKeeperError):
            return node
        self.zxid += 1
        self.writes += 1
        node.data = data
        node.mzxid = self.zxid
        node.mtime_ms = self._ms()
        node.version = int32(node.version + 1)
        self._fire(self._data_watches, path, WatchKind.CHANGED)
        return node.stat()

    def touch_data(self, session_id: int, path: str, data: bytes, version: int) -> Reply:
        """The other multi the flows send (``LossWatch.tell_behind``): one ``setData``
        of a node at ``version`` (``BadVersionError`` if it moved on)."""
        node = self._node_for(session_id, path)
        if isinstance(node, ZooKeeperError):
            return node
        if version not in (-1, node.version):
            return BadVersionError(path=path)
        stat = self.set_data(session_id, path, data)
        results: list[MultiResult] = [stat if isinstance(stat, Stat) else None]
        return results

    def release_marked(self, session_id: int, multi: Multi) -> Reply:
        """The one multi the flows send (``zklocks._core.lock_delay.release_marked``):
        delete a node and ``setData`` its parent, in one transaction (one zxid)."""
        match multi.ops:
            case (Delete(path=path, version=-1), SetData(path=parent, data=data, version=-1)):
                pass
            case _:
                raise ValueError(f"the simulator models one multi only: {multi!r}")
        node = self._node_for(session_id, path)
        if isinstance(node, ZooKeeperError):
            return node
        if node.children:
            return NotEmptyError(path=path)
        if _parent(path) != parent:
            raise ValueError(f"the simulator models one multi only: {multi!r}")
        self.zxid += 1
        self.writes += 1
        self._marking, self._deleter = True, session_id
        try:
            self._remove(path, self.zxid)
        finally:
            self._marking, self._deleter = False, 0
        directory = self.nodes[parent]
        directory.data = data
        directory.mzxid = self.zxid
        directory.mtime_ms = self._ms()
        directory.version = int32(directory.version + 1)
        self._fire(self._data_watches, parent, WatchKind.CHANGED)
        results: list[MultiResult] = [None, directory.stat()]
        return results

    def exists(self, session_id: int, path: str, *, watch: bool = False) -> Reply:
        if session_id not in self.sessions:
            return SessionExpiredError(path=path)
        self.touch(session_id)
        if watch:  # set even when the node is missing: it fires on create
            self._data_watches.setdefault(path, {})[session_id] = None
        node = self.nodes.get(path)
        return None if node is None else node.stat()

    def get_data(
        self, session_id: int, path: str, *, watch: bool = False
    ) -> NodeData | ZooKeeperError:
        node = self._node_for(session_id, path)
        if isinstance(node, ZooKeeperError):
            return node
        if watch:
            self._data_watches.setdefault(path, {})[session_id] = None
        return NodeData(node.data, node.stat())

    def get_children(
        self, session_id: int, path: str, *, watch: bool = False
    ) -> list[str] | ZooKeeperError:
        node = self._node_for(session_id, path)
        if isinstance(node, ZooKeeperError):
            return node
        if watch:
            self._child_watches.setdefault(path, {})[session_id] = None
        return list(node.children)

    # -- the server's housekeeping and test helpers -----------------------------------

    def sweep_containers(self) -> list[str]:
        """One pass of the container manager: delete empty containers that had children."""
        doomed = [
            path
            for path, node in self.nodes.items()
            if node.container and not node.children and node.cversion > 0
        ]
        for path in doomed:
            self.zxid += 1
            self._remove(path, self.zxid)
        return doomed

    def set_cversion(self, path: str, cversion: int) -> None:
        """Put a node's create counter anywhere (e.g. just before the 32-bit wrap), as if
        the children made meanwhile had come and left cleanly: the data version grows
        by as many marks (a real directory near the wrap has had that history, and its
        count of unmarked deletions stays what it was, ``zklocks._core.lock_delay``)."""
        node = self.nodes[path]
        node.version = int32(node.version + int32(cversion - node.cversion))
        node.cversion = int32(cversion)
        self.writes += 1

    def take_outbox(self) -> list[Notification]:
        """The notifications fired since the last call, in firing order."""
        fired, self.outbox = self.outbox, []
        return fired

    def watch_count(self) -> int:
        """Server-side watches set now (the real server's ``zk_watch_count``)."""
        return sum(len(w) for w in self._data_watches.values()) + sum(
            len(w) for w in self._child_watches.values()
        )

    def children_of(self, path: str) -> list[str]:
        node = self.nodes.get(path)
        return [] if node is None else list(node.children)

    # -- internals ----------------------------------------------------------------------

    def _ms(self) -> int:
        return self.epoch_ms + int(self.now * 1000)

    def _node_for(self, session_id: int, path: str) -> Node | ZooKeeperError:
        """The node a request acts on, or the error the server answers first.

        A dead session answers ``SessionExpiredError`` before anything else; a live one
        is heard from (``touch``) even when the node turns out to be missing.
        """
        if session_id not in self.sessions:
            return SessionExpiredError(path=path)
        self.touch(session_id)
        node = self.nodes.get(path)
        return NoNodeError(path=path) if node is None else node

    def _create(self, path: str, data: bytes, *, owner: int, container: bool) -> Node:
        ms = self._ms()
        node = Node(data, self.zxid, ms, owner, container, self.zxid, ms, self.zxid)
        self.nodes[path] = node
        parent_path = _parent(path)
        parent = self.nodes[parent_path]
        parent.children[path.rsplit("/", 1)[1]] = None
        parent.cversion = int32(parent.cversion + 1)
        parent.pzxid = self.zxid
        self.writes += 1
        self._fire(self._data_watches, path, WatchKind.CREATED)
        self._fire(self._child_watches, parent_path, WatchKind.CHILD)
        return node

    def _remove(self, path: str, zxid: int) -> None:
        node = self.nodes.pop(path)
        parent_path = _parent(path)
        parent = self.nodes[parent_path]
        if node.ephemeral_owner != 0:
            name = path.rsplit("/", 1)[1]
            siblings = tuple(parent.children)
            own = self._deleter == node.ephemeral_owner
            removal = Removal(self.now, parent_path, name, self._marking, siblings, own)
            self.removals.append(removal)
        del parent.children[path.rsplit("/", 1)[1]]
        parent.pzxid = zxid  # cversion counts creates only (3.8's PrepRequestProcessor)
        if node.ephemeral_owner != 0:
            owner = self.sessions.get(node.ephemeral_owner)
            if owner is not None:
                owner.ephemerals.pop(path, None)
        self.writes += 1
        told = self._fire(self._data_watches, path, WatchKind.DELETED)
        self._fire(self._child_watches, path, WatchKind.DELETED, skip=told)
        self._fire(self._child_watches, parent_path, WatchKind.CHILD)

    def _fire(
        self,
        table: dict[str, dict[int, None]],
        path: str,
        kind: WatchKind,
        skip: dict[int, None] | None = None,
    ) -> dict[int, None]:
        watchers = table.pop(path, None)
        if not watchers:
            return {}
        for session_id in watchers:
            if skip is None or session_id not in skip:
                self.outbox.append(Notification(session_id, kind, path))
        return watchers


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _valid(path: str) -> bool:
    if not path.startswith("/"):
        return False
    if path == "/":
        return True
    return not path.endswith("/") and "//" not in path and "\0" not in path


class ClientWatches:
    """The client half of ZooKeeper watches: which local watchers a notification wakes.

    As the Java client (``ZKWatchManager.materialize``) and ``zklocks._protocol.watches``
    do: a watcher is registered when the reply that set it arrives; CREATED and CHANGED
    wake the data and exists watchers of the path, DELETED wakes data, exists *and* child
    watchers, CHILD wakes child watchers; every woken watcher is forgotten (one-shot), and
    one registered twice (or in two tables) is called once.
    """

    def __init__(self) -> None:
        self.data: dict[str, dict[Watcher, None]] = {}
        self.child: dict[str, dict[Watcher, None]] = {}

    def add_data(self, path: str, watcher: Watcher) -> None:
        self.data.setdefault(path, {})[watcher] = None

    def add_child(self, path: str, watcher: Watcher) -> None:
        self.child.setdefault(path, {})[watcher] = None

    def materialize(self, kind: WatchKind, path: str) -> list[Watcher]:
        """The watchers a server notification wakes (and forgets), each once."""
        woken: dict[Watcher, None] = {}
        if kind is not WatchKind.CHILD:
            woken.update(self.data.pop(path, {}))
        if kind in (WatchKind.CHILD, WatchKind.DELETED):
            woken.update(self.child.pop(path, {}))
        return list(woken)

    def drain(self) -> list[tuple[str, Watcher]]:
        """Every registered (path, watcher) once (the session ended: SESSION_LOST)."""
        out: dict[tuple[str, Watcher], None] = {}
        for table in (self.data, self.child):
            for path, watchers in table.items():
                for watcher in watchers:
                    out[(path, watcher)] = None
            table.clear()
        return list(out)

    def deliver(self, notification: Notification) -> int:
        """Call the watchers a notification wakes; how many there were."""
        woken = self.materialize(notification.kind, notification.path)
        event = WatchEvent(notification.kind, notification.path)
        for watcher in woken:
            watcher(event)
        return len(woken)
