"""ZooKeeper's wire constants: op codes, special xids, create modes, event types, states.

Values are those of ``org.apache.zookeeper.ZooDefs.OpCode``, ``CreateMode``,
``Watcher.Event.EventType`` / ``KeeperState`` and ``AddWatchMode`` in ZooKeeper 3.8.
"""

from __future__ import annotations

import enum


class OpCode(enum.IntEnum):
    """The ``type`` field of a request header."""

    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECK_WATCHES = 17
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    MULTI_READ = 22
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    GET_EPHEMERALS = 103
    GET_ALL_CHILDREN_NUMBER = 104
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107
    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1


class Xid(enum.IntEnum):
    """Reserved xids: replies carrying them are not answers to numbered requests."""

    NOTIFICATION = -1
    PING = -2
    AUTH = -4
    SET_WATCHES = -8


class CreateMode(enum.IntEnum):
    """The ``flags`` of a create request (``org.apache.zookeeper.CreateMode``)."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def is_ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)

    @property
    def opcode(self) -> OpCode:
        """Which create op carries this mode (create2, createContainer or createTTL)."""
        if self is CreateMode.CONTAINER:
            return OpCode.CREATE_CONTAINER
        if self.is_ttl:
            return OpCode.CREATE_TTL
        return OpCode.CREATE2


class EventType(enum.IntEnum):
    """Why a watch fired (``Watcher.Event.EventType``); ``NONE`` is a session-state change."""

    NONE = -1
    CREATED = 1
    DELETED = 2
    CHANGED = 3
    CHILD = 4
    DATA_WATCH_REMOVED = 5
    CHILD_WATCH_REMOVED = 6
    PERSISTENT_WATCH_REMOVED = 7


class KeeperState(enum.IntEnum):
    """The ``state`` field of a watcher event as the server sends it."""

    DISCONNECTED = 0
    SYNC_CONNECTED = 3
    AUTH_FAILED = 4
    CONNECTED_READ_ONLY = 5
    SASL_AUTHENTICATED = 6
    CLOSED = 7
    EXPIRED = -112


class AddWatchMode(enum.IntEnum):
    """Mode of an ``addWatch`` request (ZooKeeper 3.6+)."""

    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatchTable(enum.Enum):
    """Which of the server's watch tables a watch lives in (and is restored to)."""

    DATA = "data"  # getData, or exists on a node that exists
    EXIST = "exist"  # exists on a node that does not exist
    CHILD = "child"  # getChildren
    PERSISTENT = "persistent"  # addWatch(PERSISTENT)
    PERSISTENT_RECURSIVE = "persistent_recursive"  # addWatch(PERSISTENT_RECURSIVE)


class Perm(enum.IntFlag):
    """ACL permission bits."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


PROTOCOL_VERSION = 0
DEFAULT_MAX_BUFFER = 0xFFFFF
"""The server's default ``jute.maxbuffer``: a request frame longer than this makes the
server drop the connection ("Len error"), so the client refuses it before sending."""
