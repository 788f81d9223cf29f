"""The sans-IO ZooKeeper session: bytes in, events out; requests in, bytes out.

Theory of operation
-------------------
A ``Session`` outlives TCP connections: it holds the session id and password, the last
zxid seen, the client's watch table and the auth credentials. Each TCP connection is one
*round* inside it:

1. ``connect()`` starts a round and returns the ConnectRequest frame (it asks to resume
   ``session_id`` with ``passwd`` and ``last_zxid``, or for a new session when the id is 0).
2. The caller writes bytes out and feeds every byte it reads to ``receive()``, which
   returns events:

   * ``Established``  the handshake was answered: the session (new or resumed) is live
     and ``timeout_ms`` is the negotiated timeout.
   * ``Expired``      the handshake was answered with timeout 0: the server no longer
     knows our session. The session has already been forgotten (the next ``connect()``
     asks for a new one) and the event lists every (path, watcher) to notify.
   * ``WireReply``    the answer to a request: ``token`` is whatever the caller passed
     when it built the request, ``ok`` says whether ``value`` is the reply or a
     ``ZooKeeperError``. Watches the answer establishes are already registered.
   * ``WatchFired`` a watch fired; ``watchers`` are the callers it is for.

3. After ``Established`` the caller sends ``restore()``'s frames (auth, then setWatches)
   before anything else, then requests built with ``request()`` / ``ping()``.
4. When the connection drops the caller calls ``disconnect()``, which ends the round and
   returns the tokens of the requests that were in flight (their outcome is unknown:
   the caller fails them with ``ConnectionLossError``).

ZooKeeper answers one connection's requests in order, so the round keeps one FIFO of
numbered requests and checks each reply's xid against its head; a mismatch is a protocol
error (``ReceiveError``, a ``MarshallingError``) and the caller must drop the connection.
Bytes that break the protocol never lose a request: the events completed before them
ride on the error (``ReceiveError.events``, the caller delivers them), a request whose
reply cannot be decoded stays pending (``disconnect()`` returns it), and the round is
broken from then on (every later ``receive()`` raises) until the next ``connect()``.

Replies with the reserved xids (ping -2, auth -4, setWatches -8) have FIFOs of their own: the server
answers auth packets as soon as it reads them, ahead of requests still in its pipeline.
SASL steps (``GetSASLRequest``) are ordinary numbered requests; the connection sends them
right after ``Established`` and nothing else until the exchange is complete.

Nothing here reads a clock or touches a socket; time-keeping (ping interval, read
deadline, send times) is the connection's job.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from zklocks._protocol import codec
from zklocks._protocol.constants import (
    DEFAULT_MAX_BUFFER,
    EventType,
    OpCode,
    Xid,
)
from zklocks._protocol.errors import (
    AuthFailedError,
    MarshallingError,
    NoNodeError,
    RequestTooLargeError,
    RolledBackError,
    RuntimeInconsistencyError,
    ZooKeeperError,
    error_for_code,
)
from zklocks._protocol.jute import INT, REPLY_HEADER, REQUEST_HEADER, JuteError
from zklocks._protocol.watches import WatchRegistry
from zklocks._vocabulary import Watcher

__all__ = [
    "Established",
    "Event",
    "Expired",
    "ReceiveError",
    "Session",
    "Sink",
    "WatchFired",
    "WireReply",
]

_NO_NODE = NoNodeError.code
_XID_LIMIT = 2**31 - 1
_EMPTY_PASSWD = b"\x00" * 16


@dataclass(slots=True, eq=False, repr=False)
class Established:
    """The handshake was answered: the session is live on this connection."""

    session_id: int
    timeout_ms: int
    passwd: bytes
    read_only: bool
    resumed: bool

    def __repr__(self) -> str:
        return (
            f"Established(session_id={self.session_id:#x}, timeout_ms={self.timeout_ms}, "
            f"resumed={self.resumed})"
        )


@dataclass(slots=True, eq=False, repr=False)
class Expired:
    """The server refused to resume our session: it expired. ``watchers``: (path, caller)."""

    session_id: int
    watchers: list[tuple[str, Watcher]]

    def __repr__(self) -> str:
        return f"Expired(session_id={self.session_id:#x}, watchers={len(self.watchers)})"


@dataclass(slots=True, eq=False, repr=False)
class WireReply:
    """The answer to one request: ``value`` is the reply, or a ``ZooKeeperError`` if not ok.

    ``through_leader`` is true for a successful sync or write: on an ensemble the member
    forwarded it to the leader and answered only once the leader's answer came back on
    the ordered leader-to-member stream. The lease rule (``_transport/lease_rule.py``)
    needs that fact and nothing else about the request.
    """

    token: Any
    ok: bool
    value: Any
    through_leader: bool = False

    def __repr__(self) -> str:
        return f"WireReply(token={self.token!r}, ok={self.ok}, value={self.value!r})"


@dataclass(slots=True, eq=False, repr=False)
class WatchFired:
    """A watch fired on ``path`` (the client's path); ``watchers`` are its callers."""

    event_type: int
    state: int
    path: str
    watchers: list[Watcher]

    def __repr__(self) -> str:
        return f"WatchFired({self.event_type!r}, {self.path!r}, watchers={len(self.watchers)})"


Event = Established | Expired | WireReply | WatchFired


class Sink(Protocol):
    """Where ``Session.receive`` puts events (a list, a deque, a reader's stamping queue)."""

    def append(self, event: Event, /) -> None: ...


class ReceiveError(MarshallingError):
    """``receive()`` met bytes that break the protocol: drop the connection.

    ``events`` were completed by the bytes before the broken ones; they are real answers
    and notifications, and the caller must still deliver them.
    """

    def __init__(self, message: str, events: list[Event]) -> None:
        super().__init__(message)
        self.events = events


# Requests a follower forwards to the leader (ZooKeeper's FollowerRequestProcessor): the
# writes and sync. A multi of reads (MULTI_READ) and every read are answered locally.
_THROUGH_LEADER = frozenset(
    {
        OpCode.CREATE,
        OpCode.CREATE2,
        OpCode.CREATE_CONTAINER,
        OpCode.CREATE_TTL,
        OpCode.DELETE,
        OpCode.DELETE_CONTAINER,
        OpCode.SET_DATA,
        OpCode.SET_ACL,
        OpCode.MULTI,
        OpCode.SYNC,
    }
)


class _Pending:
    __slots__ = (
        "decode",
        "nonode_watch",
        "ok_watch",
        "path",
        "through_leader",
        "token",
        "watcher",
        "xid",
    )

    def __init__(
        self,
        xid: int,
        plan: codec.Plan,
        token: Any,
        watcher: Watcher | None,
    ) -> None:
        self.xid = xid
        self.decode = plan.decode
        self.path = plan.path
        self.ok_watch = plan.ok_watch
        self.nonode_watch = plan.nonode_watch
        self.token = token
        self.watcher = watcher
        self.through_leader = plan.opcode in _THROUGH_LEADER


class Session:
    """One ZooKeeper session over any number of successive connections (no I/O)."""

    def __init__(
        self,
        *,
        timeout_ms: int,
        chroot: str = "",
        auth: Sequence[tuple[str, bytes]] = (),
        max_request_size: int = DEFAULT_MAX_BUFFER,
        max_reply_size: int = 64 * 1024 * 1024,
    ) -> None:
        if chroot:
            codec.validate_path(chroot)
        self.chroot = chroot.rstrip("/")
        self.requested_timeout_ms = timeout_ms
        self.max_request_size = max_request_size
        self.max_reply_size = max_reply_size
        self.session_id = 0
        self.passwd = _EMPTY_PASSWD
        self.timeout_ms = 0
        self.last_zxid = 0
        self.read_only = False
        self.auth: list[tuple[str, bytes]] = list(auth)
        self.watches = WatchRegistry()
        self._xid = 0
        self._buf = bytearray()
        self._handshaking = False
        self._connected = False
        self._broken = ""  # why this round's bytes broke the protocol ("" while they don't)
        self._pending: deque[_Pending] = deque()
        self._pings: deque[Any] = deque()
        self._auths: deque[tuple[Any, tuple[str, bytes] | None]] = deque()
        self._set_watches: deque[Any] = deque()

    # ------------------------------------------------------------ rounds

    @property
    def connected(self) -> bool:
        """True between ``Established`` and ``disconnect()``."""
        return self._connected

    @property
    def in_flight(self) -> int:
        """Requests sent on this connection and not answered yet (pings included)."""
        return len(self._pending) + len(self._pings) + len(self._auths) + len(self._set_watches)

    def connect(self) -> bytes:
        """Start a round on a new connection; returns the ConnectRequest frame."""
        self._reset_round()
        self._handshaking = True
        body = codec.encode_connect(
            self.last_zxid, self.requested_timeout_ms, self.session_id, self.passwd
        )
        return INT.pack(len(body)) + body

    def disconnect(self) -> list[Any]:
        """End the round; returns the tokens of requests that got no answer, oldest first."""
        tokens = [p.token for p in self._pending]
        tokens.extend(self._pings)
        tokens.extend(token for token, _ in self._auths)
        tokens.extend(self._set_watches)
        self._reset_round()
        return [t for t in tokens if t is not None]

    def expire(self) -> list[tuple[str, Watcher]]:
        """Forget the session (it is gone on the server); returns every (path, watcher)."""
        self.session_id = 0
        self.passwd = _EMPTY_PASSWD
        self.timeout_ms = 0
        self.last_zxid = 0
        return self.watches.drain()

    def _reset_round(self) -> None:
        # A new buffer, not clear(): an error's traceback may still hold a view of the old.
        self._buf = bytearray()
        self._broken = ""
        self._handshaking = False
        self._connected = False
        self._pending.clear()
        self._pings.clear()
        self._auths.clear()
        self._set_watches.clear()

    # ------------------------------------------------------------ sending

    def _frame(self, xid: int, opcode: int, body: bytes) -> bytes:
        size = len(body) + 8
        if size > self.max_request_size:
            raise RequestTooLargeError(
                f"request of {size} bytes exceeds the server's jute.maxbuffer "
                f"({self.max_request_size} bytes); the server would drop the connection"
            )
        return REQUEST_HEADER.pack(size, xid, opcode) + body

    def _next_xid(self) -> int:
        xid = self._xid + 1
        if xid > _XID_LIMIT:
            xid = 1
        self._xid = xid
        return xid

    def request(
        self,
        request: object,
        token: Any,
        watcher: Watcher | None = None,
        *,
        chroot: str | None = None,
    ) -> bytes:
        """Encode ``request`` as the next numbered request; its ``WireReply`` will carry ``token``.

        ``chroot`` replaces the session's for this request (``""``: a server path, e.g.
        ``/zookeeper/config``).

        Raises ``RequestTooLargeError`` (nothing is queued) when the frame is larger than
        the server accepts, ``TypeError``/``ValueError`` for a request that cannot be sent.
        """
        if not self._connected:
            raise RuntimeError("no established connection")
        root = self.chroot if chroot is None else chroot
        plan = codec.plan(request, root, watcher is not None)
        size = len(plan.body) + 8
        if size > self.max_request_size:
            self._frame(0, plan.opcode, plan.body)  # raises
        xid = self._next_xid()
        frame = REQUEST_HEADER.pack(size, xid, plan.opcode) + plan.body
        self._pending.append(_Pending(xid, plan, token, watcher))
        return frame

    def ping(self, token: Any) -> bytes:
        if not self._connected:
            raise RuntimeError("no established connection")
        self._pings.append(token)
        return REQUEST_HEADER.pack(8, Xid.PING, OpCode.PING)

    def add_auth(self, scheme: str, credential: bytes, token: Any) -> bytes:
        """An auth packet. Once the server accepts it, every later ``restore()`` re-sends it
        (a refused one is not kept: the server closes the connection after refusing)."""
        if not self._connected:
            raise RuntimeError("no established connection")
        frame = self._frame(Xid.AUTH, OpCode.AUTH, codec.encode_auth(scheme, credential))
        self._auths.append((token, (scheme, credential)))
        return frame

    def close_session(self, token: Any) -> bytes:
        """A closeSession request: the server ends the session and removes our ephemerals."""
        if not self._connected:
            raise RuntimeError("no established connection")
        xid = self._next_xid()
        plan = codec.Plan(OpCode.CLOSE_SESSION, b"", codec.decode_nothing, None)
        self._pending.append(_Pending(xid, plan, token, None))
        return REQUEST_HEADER.pack(8, xid, OpCode.CLOSE_SESSION)

    def restore(self, token: Any = None) -> list[bytes]:
        """Frames to send right after ``Established``: every auth, then setWatches.

        Their replies carry ``token``; a failed auth among them means the server is about
        to close the connection (it does so after refusing credentials).
        """
        frames: list[bytes] = []
        for scheme, credential in self.auth:
            frames.append(self._frame(Xid.AUTH, OpCode.AUTH, codec.encode_auth(scheme, credential)))
            self._auths.append((token, None))
        for opcode, body in self.watches.set_watches_bodies(self.last_zxid, self.chroot):
            frames.append(self._frame(Xid.SET_WATCHES, opcode, body))
            self._set_watches.append(token)
        return frames

    # ------------------------------------------------------------ receiving

    def receive(self, data: bytes, into: Sink | None = None) -> list[Event]:
        """Feed bytes read from the connection; returns the events they complete.

        ``into`` (optional) gets each event as it is made, *before* the session forgets
        what it answers (the request leaves the in-flight FIFO, the one-shot watches
        their table): a reader interrupted anywhere in here (Ctrl-C, an asynchronous
        exception) has every event that took effect, and what did not take effect is
        still in flight, failed or restored with the connection. Then the events are
        in ``into`` only, and the list returned is empty.

        Raises ``ReceiveError`` (a ``MarshallingError``) on bytes that break the protocol,
        and on every call after that in this round: the connection must then be dropped
        (the session itself stays usable). The error carries the events completed before
        the broken bytes; a request whose reply could not be read stays in flight, so
        ``disconnect()`` returns it with the others.
        """
        if self._broken:
            raise ReceiveError(f"the connection is broken: {self._broken}", [])
        buf = self._buf
        buf += data
        events: list[Event] = []
        sink: Sink = events if into is None else into
        size = len(buf)
        pos = 0
        unpack_int = INT.unpack_from
        try:
            while size - pos >= 4:
                (length,) = unpack_int(buf, pos)
                if length < 0 or length > self.max_reply_size:
                    raise MarshallingError(f"bad frame length {length}")
                end = pos + 4 + length
                if end > size:
                    break
                frame = memoryview(buf)[pos + 4 : end]
                try:
                    if self._handshaking:
                        sink.append(self._on_handshake(frame))
                    else:
                        self._on_frame(frame, sink)
                finally:
                    frame.release()
                pos = end
        except MarshallingError as exc:
            self._broken = str(exc)
            raise ReceiveError(self._broken, events) from exc
        except (JuteError, struct.error) as exc:
            self._broken = f"malformed reply: {exc}"
            raise ReceiveError(self._broken, events) from exc
        if pos:
            del buf[:pos]
        return events

    def _on_handshake(self, frame: memoryview) -> Event:
        _version, timeout_ms, session_id, passwd, read_only = codec.decode_connect_response(
            frame, 0
        )
        self._handshaking = False
        if timeout_ms <= 0:
            old = self.session_id
            return Expired(old, self.expire())
        resumed = session_id == self.session_id
        self.session_id = session_id
        self.passwd = passwd
        self.timeout_ms = timeout_ms
        self.read_only = read_only
        self._connected = True
        return Established(session_id, timeout_ms, passwd, read_only, resumed)

    def _on_frame(self, frame: memoryview, sink: Sink) -> None:
        """Put the frame's event (if any) in ``sink``, then let go of what it answers."""
        if len(frame) < 16:
            raise MarshallingError(f"reply shorter than its header ({len(frame)} bytes)")
        xid, zxid, err = REPLY_HEADER.unpack_from(frame, 0)
        if zxid > 0 and xid != Xid.NOTIFICATION:
            # As the Java client: a notification's zxid (3.9 sends one, ZOOKEEPER-4655)
            # is the triggering write's, not an answer to us; it never moves last_zxid.
            self.last_zxid = zxid
        if xid > 0 or xid == 0:
            self._on_reply(xid, err, frame, sink)
            return
        if xid == Xid.NOTIFICATION:
            etype, state, server_path = codec.decode_watcher_event(frame, 16)
            path = codec.from_server(server_path, self.chroot)
            if etype == EventType.NONE:
                sink.append(WatchFired(etype, state, path, []))
                return
            sink.append(WatchFired(etype, state, path, self.watches.matching(etype, path)))
            self.watches.forget_fired(etype, path)
            return
        if xid == Xid.PING:
            if not self._pings:
                raise MarshallingError("ping reply without a ping")
            # an enforcing server refuses even pings from a session without login
            failed = error_for_code(err) if err else None
            sink.append(WireReply(self._pings[0], not err, failed))
            self._pings.popleft()
            return
        if xid == Xid.AUTH:
            if not self._auths:
                raise MarshallingError("auth reply without an auth packet")
            token, credential = self._auths[0]
            if err:
                sink.append(WireReply(token, False, AuthFailedError()))
                self._auths.popleft()
                return
            if credential is not None and credential not in self.auth:
                self.auth.append(credential)
            sink.append(WireReply(token, True, None))
            self._auths.popleft()
            return
        if xid == Xid.SET_WATCHES:
            if not self._set_watches:
                raise MarshallingError("setWatches reply without a setWatches request")
            token = self._set_watches[0]
            sink.append(WireReply(token, not err, error_for_code(err) if err else None))
            self._set_watches.popleft()
            return
        raise MarshallingError(f"reply with unknown xid {xid}")

    def _on_reply(self, xid: int, err: int, frame: memoryview, sink: Sink) -> None:
        pending = self._pending
        if not pending or pending[0].xid != xid:
            expected = pending[0].xid if pending else None
            raise MarshallingError(f"reply xid {xid} out of order (expected {expected})")
        p = pending[0]
        if err:
            if err == _NO_NODE and p.decode is codec.decode_exists:
                # exists: absence is an answer, and the server has set an exist watch.
                if p.watcher is not None and p.nonode_watch is not None:
                    self.watches.add(p.nonode_watch, p.path or "/", p.watcher)
                sink.append(WireReply(p.token, True, None))
            else:
                sink.append(WireReply(p.token, False, error_for_code(err, path=p.path)))
            pending.popleft()
            return
        # Decoded before it leaves the FIFO: a reply that cannot be read leaves the
        # request in flight, and disconnect() hands it back to be failed.
        value = p.decode(frame, 16, self.chroot)
        if p.decode is codec.decode_multi:
            sink.append(self._multi_reply(p.token, value))
            pending.popleft()
            return
        if p.watcher is not None and p.ok_watch is not None:
            self.watches.add(p.ok_watch, p.path or "/", p.watcher)
        sink.append(WireReply(p.token, True, value, p.through_leader))
        pending.popleft()

    @staticmethod
    def _multi_reply(token: Any, results: list[Any]) -> WireReply:
        # A failed multi is answered with err 0 in the header and an error per op: 0
        # (rolled back) before the op that failed, its code, then -2 after it.
        failed: ZooKeeperError | None = None
        for result in results:
            if isinstance(result, ZooKeeperError):
                if not isinstance(result, RolledBackError | RuntimeInconsistencyError):
                    failed = result
                    break
                failed = failed or result
        if failed is None:
            return WireReply(token, True, results, True)
        failed.results = results
        return WireReply(token, False, failed)
