"""Acquire and release as generators: every lock rule lives here, no I/O does.

Theory of operation
-------------------
A flow yields an operation (``zklocks._core.ops``: a request, a pipeline of them, a wait
for watch events) and is resumed with its reply; the sync driver, the asyncio driver
and the simulator run the same flows, so each rule below is written once and explored
by the simulator under faults.

Queued kinds (fair lock, read, write, semaphore lease):

1. **Protected create.** ``create`` of an ephemeral sequential node whose name carries a
   fresh attempt token, pipelined with ``getChildren`` of the lock path (ZooKeeper
   answers one session's requests in order, so the listing already contains our node):
   one round trip. If the parent is missing, create it (container nodes, so the server
   removes empty lock paths) and try again. If the connection drops with the create in
   flight, the server may have applied it: list the children, find our attempt token,
   and adopt that node only if its ``ephemeralOwner`` is our current session; a node of
   ours from an older session is deleted and we create again. With an ACL (the
   client's ``acl`` is not open) the pipeline also reads the lock directory's ACL: a
   directory that grants more than asked is refused and our node deleted
   (``_check_directory``; docs/security.md).
2. **Decide.** The spec's layout (``zklocks._core.layouts``) lines up the children as its
   dialect does (ours: sequence numbers as integers ordered across the 32-bit wrap;
   Curator's and kazoo's: their own string orders), and its rules table says granted,
   or which nodes block us. In Curator's layout a semaphore is two queued acquires in a
   row (``_acquire_two_stages``: SemaphoreV2's mutex, then its lease).
3. **Wait.** Watch the blockers (getData-watches) and wait, with what remains of the one
   deadline of the call, until one is *deleted* (``zklocks._core.steps``: which replies
   and events end a wait is decided there, in the flow; a driver only sets the watches
   and hands over the events that fire). Never trust a wake-up: decide again with
   the deleted node removed; every rule is monotone, so a grant on that smaller queue is
   a real grant *if our node still exists*. A wake-up does not say so: another client
   (an operator, a clean-up script) may have deleted our node while we waited, and the
   contender behind us then re-listed and now waits for the same blocker. So a grant
   always rests on a reply that shows our node: the listing that decided it, or, for a
   waiter that takes over on its blocker's deletion, one ``exists`` of our own node
   (etcd's rule: re-read your own key after every wake). Otherwise list the children
   again and decide afresh. If our own node is gone (session expired: start over from
   1; someone deleted it: log a warning and join the line again at the back, within
   the same deadline). A late event never decides alone: a session's end heard while
   waiting may be an older session's (``_our_session_ended``), and the deletion of the
   one-node ``lock`` may be an earlier holder's (its name is reused: list again).
4. **Every way out deletes our node**: timeout, a non-blocking miss, a refusal, an error,
   KeyboardInterrupt, task cancellation. If the create was in flight and its fate is
   unknown, find our node by attempt token and delete it. Cleanup requests carry no
   deadline: a connection loss during cleanup is retried after reconnect (an orphan
   would block everyone) up to ``CLEANUP_RETRIES`` times in a row (a server that breaks
   every connection must not keep the caller for ever), and a session expiry means the
   server has removed it already. On the way out of a call with a deadline the flow
   yields its cleanup as one ``Cleanup``: the caller waits for it ``CLEANUP_GRACE``
   past the deadline at most, and what is left goes on apart from the caller (a delete
   takes milliseconds on a working server; a broken one would cost a reconnect per
   retry). Every other request carries the call's deadline, and
   one yielded again after a failure is marked ``retry``: the drivers never send a retry
   after the deadline, so every retry loop ends there (a first try still goes out while
   connected: ``timeout=0`` on a free lock succeeds).

One-node exclusive lock (``fair=False``): create the ephemeral node ``lock``
(its data names our attempt), pipelined with ``getChildren`` of the lock path; if it
exists, watch it and retry when it is deleted. One round trip uncontended; unfair by
design (whoever creates first after a release wins). Queued contenders treat ``lock``
as the head of their line, so they wait for a one-node holder; but a one-node acquirer
cannot be seen by a queued contender that already holds. So the listing taken *after*
our create decides: if it shows any queued contender (fair lock, reader, writer,
semaphore lease), we delete our ``lock`` again and refuse with ``InvalidArgument``.
Either the queued contender's listing came after our create (it waits for ``lock``) or
our listing shows it: never both holding.

The fencing token of a grant is our node's creation zxid: ZooKeeper's global, strictly
increasing transaction id, so a later holder of the same path always has a larger one.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, TypeVar

from zklocks._core import dialects as _dialects
from zklocks._core import layouts as _layouts
from zklocks._core import nodes as _nodes
from zklocks._core.errors import AccessDenied, ClientClosed, InvalidArgument, LockError, LockTimeout
from zklocks._core.ops import (
    TIMED_OUT,
    Cleanup,
    Create,
    Created,
    Delete,
    Exists,
    GetACL,
    GetChildren,
    GetData,
    NodeACL,
    NodeData,
    Op,
    Pipeline,
    SessionId,
    Stat,
)
from zklocks._core.security import AclPolicy, public_acl, weak_directory_message, weaker_entries
from zklocks._core.steps import Gone, await_deletion, make_parents
from zklocks._core.strategies import Granted, Refused, WaitFor
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import ACL

Flow: TypeAlias = Generator[Op, Any, Any]
T = TypeVar("T")
log = logging.getLogger("zklocks.lock")

CLEANUP_RETRIES = 2
"""Cleanup requests wait for a connection as long as the session lives, and are sent
again after a dropped connection; this many drops in a row mean a broken server."""

CLEANUP_GRACE = 0.25
"""How long past its deadline a call waits for its own cleanup before leaving it to run
apart: a working server deletes a node in milliseconds, so the caller sees its node gone
when it gets ``LockTimeout``; a broken one costs the caller no more than this."""


@dataclass(frozen=True, slots=True)
class AcquireSpec:
    """What one acquire call wants; ``deadline`` is on the driver's clock."""

    path: str
    kind: str
    data: bytes
    attempt: str
    permits: int | None = None
    fair: bool = True
    blocking: bool = True
    deadline: float | None = None
    acl: AclPolicy | None = None  # None: the open ACL, and no check of the directory
    layout: _layouts.Layout = _layouts.ZKLOCKS  # whose names, order and rules

    @property
    def node_acl(self) -> tuple[ACL, ...]:
        return () if self.acl is None else self.acl.wire

    @property
    def prefix(self) -> str:
        """Our node's name without the sequence: it carries our attempt token."""
        return self.layout.dialect.prefix(self.kind, self.attempt, self.permits)


@dataclass(frozen=True, slots=True)
class Acquired:
    """A grant: our node's full path, its fencing token (creation zxid), its session."""

    node: str
    token: int
    owner: int = 0


@dataclass(slots=True)
class _Attempt:
    """What cleanup must know if the flow is left early."""

    node: str | None = None
    create_in_flight: bool = False
    children: list[str] = field(default_factory=list)


def acquire(spec: AcquireSpec) -> Generator[Op, Any, Acquired | None]:
    """Acquire per ``spec``: ``Acquired``, ``None`` (non-blocking miss) or raise."""
    if not spec.fair:
        return (yield from _acquire_single_node(spec))
    if spec.kind == "lease" and spec.layout.two_stage_semaphore:
        return (yield from _acquire_two_stages(spec))
    acquired: Acquired | None = yield from _acquire_queued(spec)
    return acquired


def release(node: str, token: int, owner: int = 0) -> Generator[Op, Any, bool]:
    """Delete our node; ``True`` if it was still there (the lease was not lost to deletion).

    A queued contender's node name is unique to its attempt, so deleting by name is safe.
    The one-node lock's name is shared by every holder in turn: after our session
    expired, or after a delete whose reply was lost, the node at that path may be the
    *next* holder's. So it is deleted only while it is ours: on the first attempt, while
    our session is still ``owner`` (the session that created it; a local check); after a
    lost reply, or with the owner unknown, while its creation zxid is our token and its
    owner our session (read from the server before every attempt). Callers pass
    ``owner=0`` once the lease is lost: another client may have deleted our node, and
    the ``lock`` there now is someone else's though our session lives.
    """
    if node.rsplit("/", 1)[1] == _nodes.SINGLE_NODE:
        return (yield from _shielded(_delete_single_node(node, token=token, owner=owner)))
    return (yield from _shielded(_delete(node)))


# -- queued kinds ---------------------------------------------------------------------


def _acquire_queued(
    spec: AcquireSpec, *, rejoin: bool = True, session: int | None = None
) -> Generator[Op, Any, Any]:
    """``Acquired`` or ``None``; with ``rejoin=False``, ``_START_OVER`` instead of joining
    the line again when our node is gone (the caller starts over from further back).

    ``session``: the session our node must be made in (the one that holds Curator's
    semaphore mutex); a node made in another one is deleted again, ``_START_OVER``.
    """
    attempt = _Attempt()
    try:
        while True:
            created = yield from _protected_create(spec, attempt)
            if session is not None and created.stat.ephemeral_owner != session:
                yield from _shielded(_cleanup(spec, attempt))
                return _START_OVER
            outcome = yield from _wait_in_line(spec, created, attempt)
            if outcome is not _START_OVER or not rejoin:
                return outcome
            attempt.node = None
    except BaseException:
        yield _clean_up(spec, _cleanup(spec, attempt))
        raise


_START_OVER = object()


def _acquire_two_stages(spec: AcquireSpec) -> Generator[Op, Any, Acquired | None]:
    """Curator's ``InterProcessSemaphoreV2`` on ``path``: take the mutex ``path/locks``,
    create a lease in ``path/leases``, wait (still holding the mutex) until that
    directory has at most N children, ours included, then let the mutex go.

    Create-then-count keeps the bound even for a contender that skipped the mutex; the
    mutex gives the order, and makes sure only one waiter's lease node inflates the
    count at a time. The grant is the lease node: its deletion is the lease's loss, its
    creation zxid the fencing token. Every way out deletes the lease node (the queued
    flow does) and then the mutex node.

    If our lease node goes while we wait (our session expired, or someone deleted it),
    we start over from the mutex, never from the lease alone: a second lease node
    waiting beside the mutex holder's would keep the count above N for both of them.
    We also start over if our session ended while we deleted the mutex node after the
    grant: a grant rests on our node existing, and the expired session took it; and if
    the lease node was made in a session other than the mutex node's (the session
    expired between the two): the mutex went with it.
    """
    mutex = replace(spec, path=f"{spec.path}/locks", kind="lock", permits=None)
    lease = replace(spec, path=f"{spec.path}/leases")
    while True:
        held: Acquired | None = yield from _acquire_queued(mutex)
        if held is None:
            return None  # non-blocking, and the mutex is busy
        try:
            # Made in another session, our lease would wait beside the new mutex
            # holder's: the mutex went with the session that held it (seed 57567).
            granted = yield from _acquire_queued(lease, rejoin=False, session=held.owner)
        except BaseException:
            yield _clean_up(spec, _delete(held.node))
            raise
        try:
            yield from _shielded(_delete(held.node))
            # Did our session end while we let the mutex go? The lease went with it.
            ended = isinstance(granted, Acquired) and (yield SessionId()) != granted.owner
        except BaseException:  # interrupted meanwhile: the caller never gets the grant
            if isinstance(granted, Acquired):
                yield _clean_up(spec, _delete(granted.node))
            raise
        if ended:
            continue
        if granted is not _START_OVER:
            return granted  # type: ignore[no-any-return]


def _protected_create(spec: AcquireSpec, attempt: _Attempt) -> Generator[Op, Any, Created]:
    prefix = f"{spec.path}/{spec.prefix}"
    create = Create(
        prefix,
        spec.data,
        ephemeral=True,
        sequential=True,
        deadline=spec.deadline,
        acl=spec.node_acl,
    )
    listing = GetChildren(spec.path, deadline=spec.deadline)
    first, again = _create_pipelines(spec, create, listing)
    retry = parents_made = False
    while True:
        attempt.create_in_flight = True
        replies = yield (again if retry else first)
        created, children = replies[0], replies[1]
        if created is TIMED_OUT:
            attempt.create_in_flight = False
            raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
        if isinstance(created, NoNodeError):
            attempt.create_in_flight = False
            yield from _create_parents(spec, retry=parents_made)
            # The create right after making the parents is still the first try.
            retry, parents_made = parents_made, True
            continue
        if isinstance(created, Created):
            attempt.node = created.path
            attempt.create_in_flight = False
            if spec.acl is not None:  # raises; the caller's cleanup deletes our node
                yield from _check_directory(spec, spec.acl, replies[2], created.path)
            attempt.children = children if isinstance(children, list) else (yield from _list(spec))
            return created
        if isinstance(created, ConnectionLossError | SessionExpiredError):
            adopted = yield from _find_own_node(spec, attempt, spec.deadline)
            attempt.create_in_flight = False
            if adopted is not None:
                if spec.acl is not None:  # raises; the caller's cleanup deletes our node
                    yield from _check_directory(spec, spec.acl, None, adopted.path)
                return adopted
            retry = True
            continue
        attempt.create_in_flight = False
        raise _unexpected(created, spec.path, "create")


def _find_own_node(
    spec: AcquireSpec, attempt: _Attempt, deadline: float | None = None
) -> Generator[Op, Any, Created | None]:
    """After a create of unknown fate: our node if it exists in our session, else None.

    Within an acquire it observes the call's ``deadline``. In cleanup (no deadline) it
    gives up after ``CLEANUP_RETRIES`` dropped connections in a row: a server that breaks
    every connection would otherwise keep the caller for ever.
    """
    losses = 0
    retry = deadline is not None  # within an acquire: it follows a failed create
    while True:
        children = yield GetChildren(spec.path, deadline=deadline, retry=retry)
        if children is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
        if isinstance(children, ConnectionLossError):
            losses += 1
            if deadline is None and losses > CLEANUP_RETRIES:
                return None
            continue
        if isinstance(children, SessionExpiredError | NoNodeError):
            return None  # an expired session took the node with it
        if not isinstance(children, list):
            raise _unexpected(children, spec.path, "list")
        ours = [name for name in children if name.startswith(spec.prefix)]
        if not ours:
            return None
        path = f"{spec.path}/{ours[0]}"
        stat = yield Exists(path, deadline=deadline, retry=retry)
        if stat is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
        session = yield SessionId()
        if isinstance(stat, Stat) and stat.ephemeral_owner == session:
            attempt.node = path
            attempt.children = children
            return Created(path, stat)
        if isinstance(stat, ConnectionLossError):
            losses += 1
            if deadline is None and losses > CLEANUP_RETRIES:
                return None
            continue
        yield from _delete(path)  # left by an older session of ours: not ours to adopt
        return None


def _wait_in_line(
    spec: AcquireSpec, created: Created, attempt: _Attempt
) -> Generator[Op, Any, object]:
    dialect = spec.layout.dialect
    me = dialect.read(created.path.rsplit("/", 1)[1])
    assert me is not None, created.path
    me = _dialects.with_permits(me, spec.permits)
    granted = Acquired(created.path, created.stat.czxid, created.stat.ephemeral_owner)
    line = dialect.line_up_to(me, attempt.children)
    attempt.children = []
    while True:
        if line is None:
            return (yield from _rejoin(spec, created))
        decision = spec.layout.rules.decide(me, line)
        if isinstance(decision, Granted):
            attempt.node = None  # it is the caller's now; nothing to clean up
            return granted
        if isinstance(decision, Refused):
            raise InvalidArgument(f"{spec.path}: {decision.reason}")
        if not spec.blocking:
            yield from _shielded(_cleanup(spec, attempt))
            return None
        # Decide now what the deletion of each blocker would mean, and keep only that
        # while waiting: a waiter holding its whole line costs O(queue) memory, and a
        # queue of n waiters O(n^2). The one-node lock's ``lock`` is never a takeover:
        # its name is reused by every holder in turn, so a late deletion event may be
        # an earlier holder's (simulator seed 96020); only a listing tells.
        takeover = {
            name
            for name in decision.nodes
            if name != _nodes.SINGLE_NODE and _granted_without(spec, me, line, name)
        }
        line = []
        gone = yield from _await_deletion(spec, decision)
        while gone is None and not (yield from _our_session_ended(spec, created)):
            gone = yield from _await_deletion(spec, decision)
        if gone is None:
            return _START_OVER
        if gone in takeover:
            # Granted on the line we had, if our node is still there: ask the server.
            # Neither the wake-up nor our session proves it (someone may have deleted
            # our node; a paused waiter may see a buffered deletion before it learns
            # that its session expired meanwhile).
            if not (yield from _still_exists(spec, created)):
                return (yield from _rejoin(spec, created))
            attempt.node = None
            return granted
        line = dialect.line_up_to(me, (yield from _list(spec)))


def _our_session_ended(spec: AcquireSpec, created: Created) -> Generator[Op, Any, bool]:
    """A wait ended with a session's end: was it the session that made our node?

    The inbox holds a whole flow run's events, so the end of an *older* session can
    reach it late: a watch set before an expiry (by an earlier wait of this run) is
    told only once the driver hears of it, when we may be waiting again with a node of
    the new session (simulator seed 15640, Curator's layout). Starting over then would
    leave that node behind, alive, ahead of everyone who comes later. A session other
    than our node's answers at once, with no request; the same session id (the driver
    may not have replaced it yet) is settled by our node itself.
    """
    if (yield SessionId()) != created.stat.ephemeral_owner:
        return True
    return not (yield from _still_exists(spec, created))


def _still_exists(spec: AcquireSpec, created: Created) -> Generator[Op, Any, bool]:
    """Does our node exist now, the one we created? (What a takeover grant rests on.)"""
    while True:
        stat = yield Exists(created.path, deadline=spec.deadline)
        if isinstance(stat, Stat):
            return stat.czxid == created.stat.czxid
        if stat is None or isinstance(stat, SessionExpiredError):
            return False
        if stat is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
        if not isinstance(stat, ConnectionLossError):
            raise _unexpected(stat, spec.path)


def _rejoin(spec: AcquireSpec, created: Created) -> Generator[Op, Any, object]:
    """Our node is gone: start over, at the back of the line, within the same deadline.

    With our session gone too, the server removed it (nothing to say). With the same
    session, another client deleted it (an operator, a clean-up script): say so, as our
    place in line is lost and the contender behind us has moved up.
    """
    if (yield SessionId()) == created.stat.ephemeral_owner:
        log.warning(
            "%s: our node %s was deleted by another client while we waited; "
            "joining the line again at the back",
            spec.path,
            created.path.rsplit("/", 1)[1],
        )
    return _START_OVER


def _granted_without(
    spec: AcquireSpec, me: _nodes.NodeName, line: list[_nodes.NodeName], name: str
) -> bool:
    """Would ``me`` hold if ``name`` left the line? Rules are monotone, so if yes, it
    will hold once ``name`` is gone whatever else has left meanwhile."""
    rest = [node for node in line if node.name != name]
    return isinstance(spec.layout.rules.decide(me, rest), Granted)


def _await_deletion(spec: AcquireSpec, decision: WaitFor) -> Generator[Op, Any, str | None]:
    """Wait until a blocker is deleted: its name, or None if our session expired."""
    blockers = tuple(f"{spec.path}/{name}" for name in decision.nodes)
    retry = False
    while True:
        reply = yield from await_deletion(blockers, spec.deadline, retry=retry)
        if isinstance(reply, Gone):
            return reply.node.rsplit("/", 1)[1]
        if reply is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for lock {spec.path}")
        if isinstance(reply, SessionExpiredError):
            return None
        if isinstance(reply, ConnectionLossError):
            retry = True
            continue
        raise _unexpected(reply, spec.path, "watch")


def _list(spec: AcquireSpec) -> Generator[Op, Any, list[str]]:
    retry = False
    while True:
        children = yield GetChildren(spec.path, deadline=spec.deadline, retry=retry)
        if isinstance(children, list):
            return children
        if children is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
        if isinstance(children, SessionExpiredError | NoNodeError):
            return []  # our node is gone with the session (or the path): start over
        if isinstance(children, ConnectionLossError):
            retry = True
            continue
        raise _unexpected(children, spec.path, "list")


# -- one-node exclusive lock ----------------------------------------------------------


def _acquire_single_node(spec: AcquireSpec) -> Generator[Op, Any, Acquired | None]:
    node = f"{spec.path}/{_nodes.SINGLE_NODE}"
    create = Create(node, spec.data, ephemeral=True, deadline=spec.deadline, acl=spec.node_acl)
    listing = GetChildren(spec.path, deadline=spec.deadline)
    first, again = _create_pipelines(spec, create, listing)
    attempt = _Attempt()
    retry = parents_made = False
    ours: Acquired | None = None  # our node exists, not yet checked against the queue
    try:
        while True:
            attempt.create_in_flight = True
            replies = yield (again if retry else first)
            created, children = replies[0], replies[1]
            directory = replies[2] if spec.acl is not None else None
            attempt.create_in_flight = False
            retry = True  # unless it ends in a wait below, what follows is a retry
            if isinstance(created, Created):
                ours = Acquired(node, created.stat.czxid, created.stat.ephemeral_owner)
            elif created is TIMED_OUT:
                raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
            elif isinstance(created, NoNodeError):
                yield from _create_parents(spec, retry=parents_made)
                # The create right after making the parents is still the first try.
                retry, parents_made = parents_made, True
                continue
            elif isinstance(created, ConnectionLossError):
                attempt.create_in_flight = True
                owned = yield from _single_node_stat(
                    node, attempt=spec.attempt, deadline=spec.deadline
                )
                attempt.create_in_flight = False
                if owned is None:
                    continue
                ours = Acquired(node, owned.czxid, owned.ephemeral_owner)
                children = yield from _list(spec)
                directory = None  # read it again below
            elif isinstance(created, SessionExpiredError):
                continue
            elif not isinstance(created, NodeExistsError):
                raise _unexpected(created, spec.path, "create")
            if not isinstance(children, list):
                children = yield from _list(spec)
            if any(not name.single for name in _nodes.queue(children)):
                raise InvalidArgument(
                    f"{spec.path}: this path is used both as a one-node lock (fair=False) "
                    "and by queued contenders (a fair lock, a read/write lock or a "
                    "semaphore); use one kind of lock per path"
                )
            if ours is not None:
                if _nodes.SINGLE_NODE in children:
                    if spec.acl is not None:  # raises; our node is deleted on the way out
                        yield from _check_directory(spec, spec.acl, directory, ours.node)
                    acquired, ours = ours, None
                    return acquired
                ours = None  # gone already (session expired, or deleted): try again
                continue
            if not spec.blocking:
                return None
            yield from _await_deletion(spec, WaitFor((_nodes.SINGLE_NODE,)))
            retry = False  # woken: a fresh try
    except BaseException:
        if ours is not None:
            yield _clean_up(spec, _delete_single_node(node, token=ours.token))
        elif attempt.create_in_flight:
            yield _clean_up(spec, _delete_single_node(node, attempt=spec.attempt))
        raise


def _single_node_stat(
    node: str, *, attempt: str = "", token: int = 0, deadline: float | None = None
) -> Generator[Op, Any, Stat | None]:
    """The one-node lock's stat if it is ours: our current session's, and our attempt's
    (by the attempt token in its data) or our grant's (by its creation zxid). Observes
    ``deadline``; without one, gives up (None) after ``CLEANUP_RETRIES`` drops in a row."""
    losses = 0
    while True:
        reply = yield GetData(node, deadline=deadline, retry=deadline is not None)
        if reply is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for a connection to lock {node}")
        if isinstance(reply, ConnectionLossError):
            losses += 1
            if deadline is None and losses > CLEANUP_RETRIES:
                return None
            continue
        if not isinstance(reply, NodeData):
            return None
        session = yield SessionId()
        if reply.stat.ephemeral_owner != session:
            return None
        if token:
            return reply.stat if reply.stat.czxid == token else None
        ours = _nodes.decode_payload(reply.data).attempt == attempt
        return reply.stat if ours else None


def _delete_single_node(
    node: str, *, attempt: str = "", token: int = 0, owner: int = 0
) -> Generator[Op, Any, bool]:
    """Delete the one-node lock only while it is ours; re-check before every retry."""
    checked_locally = False
    for _ in range(CLEANUP_RETRIES + 1):
        if owner and not checked_locally:
            checked_locally = True
            if (yield SessionId()) != owner:
                return False  # our session expired: the server removed our node with it
        elif (yield from _single_node_stat(node, attempt=attempt, token=token)) is None:
            return False
        reply = yield Delete(node)
        if reply is None:
            return True
        if isinstance(reply, NoNodeError | SessionExpiredError | ClientClosedError):
            return False
        if not isinstance(reply, ConnectionLossError):
            raise _unexpected(reply, node, "delete")
        # the delete may have been applied before the connection dropped: check again
    return False  # every connection broke under it: a broken server, not a dropped link


# -- shared steps -----------------------------------------------------------------------


def _create_parents(spec: AcquireSpec, *, retry: bool = False) -> Generator[Op, Any, None]:
    """Make the lock path; the caller then creates again, whatever happened here.

    A lost connection, an expired session (the next create uses the new one) or an
    ancestor container reaped meanwhile all mean: try the create again.
    """
    reply = yield from make_parents(
        spec.path,
        spec.node_acl,
        spec.deadline,
        retry=retry,
        container=spec.layout.container_parents,
    )
    if reply is TIMED_OUT:
        raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
    try_again = ConnectionLossError | SessionExpiredError | NoNodeError
    if isinstance(reply, ZooKeeperError) and not isinstance(reply, try_again):
        raise _unexpected(reply, spec.path, "create")


def _check_directory(
    spec: AcquireSpec, policy: AclPolicy, reply: Any, own_node: str
) -> Generator[Op, Any, None]:
    """Refuse a lock directory that grants more than ``policy`` (read with our create).

    ZooKeeper checks create and delete permission on the *parent*: under a directory
    open to others, anyone could delete a contender or plant one, whatever our nodes'
    ACL. Our node is in it now, so it cannot be deleted and re-created meanwhile; only
    an identity with ADMIN on it could change its ACL.

    ``policy.stored`` knows the identities a digest credential gives; the server may
    give the session others (``x509:`` for a TLS client certificate). So before
    refusing, ask what ``auth:`` became on ``own_node``, created with the same ACL a
    moment ago: that is what the server grants this session, by definition.
    """
    entries = yield from _read_acl(spec, spec.path, reply)
    if not weaker_entries(entries, policy.stored):
        return
    ours = public_acl((yield from _read_acl(spec, own_node, None)))
    if weaker_entries(entries, ours):
        message = weak_directory_message(spec.path, entries, policy, ours)
        raise AccessDenied(message, path=spec.path, operation="use")


def _read_acl(spec: AcquireSpec, path: str, reply: Any) -> Generator[Op, Any, tuple[ACL, ...]]:
    while not isinstance(reply, NodeACL):  # None: not read yet
        if reply is TIMED_OUT:
            raise LockTimeout(f"timed out waiting for a connection to lock {spec.path}")
        if reply is not None and not isinstance(reply, ConnectionLossError | SessionExpiredError):
            raise _unexpected(reply, path, "getACL")
        reply = yield GetACL(path, deadline=spec.deadline, retry=reply is not None)
    return reply.entries


def _create_pipelines(
    spec: AcquireSpec, create: Create, listing: GetChildren
) -> tuple[Pipeline, Pipeline]:
    """(first try, retry) of a create pipeline; with an ACL it also reads the directory's
    ACL in the same round trip (``_check_directory``)."""
    requests: tuple[Create | GetChildren | GetACL, ...] = (create, listing)
    if spec.acl is not None:
        requests += (GetACL(spec.path, deadline=spec.deadline),)
    return Pipeline(requests), Pipeline(tuple(replace(r, retry=True) for r in requests))


def _shielded(steps: Generator[Op, Any, T]) -> Generator[Op, Any, T]:
    """Run cleanup ``steps`` to their end even if interrupted again, then re-raise.

    A second Ctrl-C or cancel while our node is being deleted must not leave the node
    behind: it would block everyone queued after it for as long as our session lives.
    Cleanup steps are idempotent reads and deletes, so an operation the interruption
    may have cut short is simply sent again. The (first) interruption is raised after.
    """
    interruption: BaseException | None = None
    reply: Any = None
    op: Op | None = None
    while True:
        try:
            op = next(steps) if op is None else steps.send(reply)
        except StopIteration as stop:
            if interruption is not None:
                raise interruption from None
            result: T = stop.value
            return result
        while True:
            try:
                reply = yield op
                break
            except GeneratorExit:
                raise
            except BaseException as exc:
                interruption = interruption or exc  # send the same operation again


def _clean_up(spec: AcquireSpec, steps: Generator[Op, Any, Any]) -> Cleanup:
    """The way out of an acquire: ``steps`` run to their end, shielded from another
    interruption where they run in the flow's place (``inline_cleanups``), and keep the
    caller at most ``CLEANUP_GRACE`` past its deadline (without one, until they end)."""
    deadline = None if spec.deadline is None else spec.deadline + CLEANUP_GRACE
    return Cleanup(_shielded(steps), deadline)


def _cleanup(spec: AcquireSpec, attempt: _Attempt) -> Generator[Op, Any, None]:
    """Leave nothing behind: delete our node, or find it by attempt token if unknown."""
    if attempt.node is None and attempt.create_in_flight:
        yield from _find_own_node(spec, attempt)
    if attempt.node is not None:
        yield from _delete(attempt.node)
        attempt.node = None
    attempt.create_in_flight = False


def _delete(node: str) -> Generator[Op, Any, bool]:
    for _ in range(CLEANUP_RETRIES + 1):
        reply = yield Delete(node)
        if reply is None:
            return True
        if isinstance(reply, NoNodeError | SessionExpiredError | ClientClosedError):
            return False  # gone already, or the server removes it as the session ends
        if not isinstance(reply, ConnectionLossError):
            raise _unexpected(reply, node, "delete")
    return False  # every connection broke under it: a broken server, not a dropped link


def _unexpected(reply: object, path: str, operation: str = "access") -> LockError:
    if isinstance(reply, ClientClosedError):
        return ClientClosed(f"cannot lock {path}: the client is stopped")
    if isinstance(reply, NoAuthError):
        return access_denied(path, operation)
    if isinstance(reply, BaseException):
        error = LockError(f"ZooKeeper refused a request for {path}: {reply}")
        error.__cause__ = reply
        return error
    return LockError(f"unexpected reply for {path}: {reply!r}")


def access_denied(path: str, operation: str) -> AccessDenied:
    """ZooKeeper's NoAuth as the public error: which path, which operation, what to check."""
    return AccessDenied(
        f"ZooKeeper denied {operation} on {path}: this client's credentials (auth=...) do "
        "not give it that permission in the node's ACL (or its parent's, for create and "
        "delete)",
        path=path,
        operation=operation,
    )
