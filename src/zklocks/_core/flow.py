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
   (``acquire_steps.check_directory``; docs/security.md).
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
4. **Every way out deletes our node**: timeout, a non-blocking miss, a refusal, an
   error, KeyboardInterrupt, task cancellation. If the create was in flight and its fate
   is unknown, find our node by attempt token and delete it. In the zklocks layout the
   delete is a marked departure, as a release is (``_leave``): a waiter that gives up is
   never taken for a lost holder (``zklocks._core.lock_delay``). Cleanup requests carry
   no deadline: a connection loss during cleanup is retried after reconnect (an orphan
   would block everyone) up to ``CLEANUP_RETRIES`` times in a row (a server that breaks
   every connection must not keep the caller for ever), and a session expiry means the
   server has removed it already. On the way out of a call with a deadline the flow
   yields its cleanup as one ``Cleanup``: the caller waits for it ``CLEANUP_GRACE`` past
   the deadline at most, and what is left goes on apart from the caller (a delete takes
   milliseconds on a working server; a broken one would cost a reconnect per retry).
   Every other request carries the call's deadline, and one yielded again after a
   failure is marked ``retry``: the drivers never send a retry after the deadline, so
   every retry loop ends there (a first try still goes out while connected:
   ``timeout=0`` on a free lock succeeds).

One-node exclusive lock (``fair=False``): its own flow, ``zklocks._core.one_node``, whose
docstring tells its rules; ``acquire`` and ``release`` here hand it over. What both flows
share (the call's spec and grant, cleanup, the steps both take) is
``zklocks._core.acquire_steps``.

The fencing token of a grant is our node's creation zxid: ZooKeeper's global, strictly
increasing transaction id, so a later holder of the same path always has a larger one.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any

from zklocks._core import dialects as _dialects
from zklocks._core import kinds as _kinds
from zklocks._core import lock_delay as _lock_delay
from zklocks._core import nodes as _nodes
from zklocks._core import one_node as _one_node
from zklocks._core.acquire_steps import (
    CLEANUP_GRACE,
    CLEANUP_RETRIES,
    Acquired,
    AcquireSpec,
    Attempt,
    Flow,
    access_denied,
    await_blocker_deletion,
    check_directory,
    clean_up,
    create_parents,
    create_pipeline,
    delete_node,
    list_children,
    no_connection_in_time,
    out_of_retries,
    retry_of,
    shielded,
    timed_out,
    unexpected,
)
from zklocks._core.ops import TIMED_OUT, Op, SessionId
from zklocks._core.strategies import Granted, Refused
from zklocks._errors import InvalidArgument
from zklocks._protocol.errors import ConnectionLossError, NoNodeError, SessionExpiredError
from zklocks._protocol.records import (
    Children,
    Create,
    Created,
    Exists,
    GetChildren,
    Stat,
)

log = logging.getLogger("zklocks.lock")

__all__ = [
    "CLEANUP_GRACE",
    "CLEANUP_RETRIES",
    "AcquireSpec",
    "Acquired",
    "Flow",
    "access_denied",
    "acquire",
    "release",
]


def acquire(spec: AcquireSpec) -> Generator[Op, Any, Acquired | None]:
    """Acquire per ``spec``: ``Acquired``, ``None`` (non-blocking miss) or raise."""
    if not spec.fair:
        return (yield from _one_node.acquire(spec))
    if spec.kind is _kinds.PERMIT and spec.layout.two_stage_semaphore:
        return (yield from _acquire_two_stages(spec))
    acquired: Acquired | None = yield from _acquire_queued(spec)
    return acquired


def release(
    node: str, token: int, owner: int = 0, *, mark: bool = False, seen: Stat | None = None
) -> Generator[Op, Any, bool]:
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

    ``mark``: a holder's own release in the zklocks layout, which also marks it clean
    on the directory in the same transaction (``zklocks._core.lock_delay``), so that a
    successor with a ``lock_delay`` hands over at once, and writes there the losses it
    took over: those counted by ``seen``, the directory's stat at its latest listing. A
    take-back or a break deletes the node alone.
    """
    if node.rsplit("/", 1)[1] == _nodes.SINGLE_NODE:
        return (yield from shielded(_one_node.delete(node, token=token, owner=owner)))
    if mark:
        marked = yield from shielded(_lock_delay.release_marked(node, _lock_delay.taken_over(seen)))
        if marked is not None:
            return marked
    return (yield from shielded(delete_node(node)))


# -- queued kinds ---------------------------------------------------------------------


def _acquire_queued(
    spec: AcquireSpec, *, rejoin: bool = True, session: int | None = None
) -> Generator[Op, Any, Any]:
    """``Acquired`` or ``None``; with ``rejoin=False``, ``_START_OVER`` instead of joining
    the line again when our node is gone (the caller starts over from further back).

    ``session``: the session our node must be made in (the one that holds Curator's
    semaphore mutex); a node made in another one is deleted again, ``_START_OVER``.
    """
    attempt = Attempt()
    try:
        while True:
            created = yield from _protected_create(spec, attempt)
            if session is not None and created.stat.ephemeral_owner != session:
                yield from shielded(_cleanup_attempt(spec, attempt))
                return _START_OVER
            outcome = yield from _wait_in_line(spec, created, attempt)
            if outcome is not _START_OVER or not rejoin:
                return outcome
            attempt.node = None
    except BaseException:
        yield clean_up(spec, _cleanup_attempt(spec, attempt))
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
    mutex = replace(spec, path=f"{spec.path}/locks", kind=_kinds.LOCK, permits=None)
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
            yield clean_up(spec, delete_node(held.node))
            raise
        try:
            yield from shielded(delete_node(held.node))
            # Did our session end while we let the mutex go? The lease went with it.
            ended = isinstance(granted, Acquired) and (yield SessionId()) != granted.owner
        except BaseException:  # interrupted meanwhile: the caller never gets the grant
            if isinstance(granted, Acquired):
                yield clean_up(spec, delete_node(granted.node))
            raise
        if ended:
            continue
        if granted is not _START_OVER:
            return granted  # type: ignore[no-any-return]


def _protected_create(spec: AcquireSpec, attempt: Attempt) -> Generator[Op, Any, Created]:
    prefix = f"{spec.path}/{spec.prefix}"
    create = Create(
        prefix,
        spec.data,
        ephemeral=True,
        sequential=True,
        deadline=spec.deadline,
        acl=spec.node_acl,
    )
    # in the zklocks layout the listing also reads the directory's stat (getChildren2)
    listing = GetChildren(spec.path, deadline=spec.deadline, with_stat=spec.marks_departures)
    first = create_pipeline(spec, create, listing)
    retry = parents_made = False
    while True:
        attempt.create_in_flight = True
        replies = yield (retry_of(first) if retry else first)
        created, children = replies[0], replies[1]
        if created is TIMED_OUT:
            attempt.create_in_flight = False
            raise no_connection_in_time(spec.path)
        if isinstance(created, NoNodeError):
            attempt.create_in_flight = False
            yield from create_parents(spec, retry=parents_made)
            # The create right after making the parents is still the first try.
            retry, parents_made = parents_made, True
            continue
        if isinstance(created, Created):
            attempt.node = created.path
            attempt.create_in_flight = False
            if spec.acl is not None:  # raises; the caller's cleanup deletes our node
                yield from check_directory(spec, spec.acl, replies[2], created.path)
            listed: Any = children
            if isinstance(listed, Children):
                children, attempt.directory = listed.names, listed.stat
            # the pipelined listing was lost: list again, with the count (seed 635)
            if not isinstance(children, list) and spec.marks_departures:
                children, attempt.directory = yield from _list_with_stat(spec)
            if not isinstance(children, list):
                children = yield from list_children(spec)
            attempt.children = children
            return created
        if isinstance(created, ConnectionLossError | SessionExpiredError):
            adopted = yield from _find_own_node(spec, attempt, spec.deadline)
            attempt.create_in_flight = False
            if adopted is not None:
                if spec.acl is not None:  # raises; the caller's cleanup deletes our node
                    yield from check_directory(spec, spec.acl, None, adopted.path)
                return adopted
            retry = True
            continue
        attempt.create_in_flight = False
        raise unexpected(created, spec.path, "create")


def _find_own_node(
    spec: AcquireSpec, attempt: Attempt, deadline: float | None = None
) -> Generator[Op, Any, Created | None]:
    """After a create of unknown fate: our node if it exists in our session, else None.

    Within an acquire it observes the call's ``deadline``. In cleanup (no deadline) it
    gives up after ``CLEANUP_RETRIES`` dropped connections in a row: a server that breaks
    every connection would otherwise keep the caller for ever.
    """
    losses = 0
    retry = deadline is not None  # within an acquire: it follows a failed create
    while True:
        # an adopted node's first count is read here (simulator seed 82)
        children = yield GetChildren(
            spec.path, deadline=deadline, retry=retry, with_stat=spec.marks_departures
        )
        if isinstance(children, Children):
            attempt.directory, children = children.stat, children.names
        if children is TIMED_OUT:
            raise no_connection_in_time(spec.path)
        if isinstance(children, ConnectionLossError):
            losses += 1
            if out_of_retries(losses, deadline):
                return None
            continue
        if isinstance(children, SessionExpiredError | NoNodeError):
            return None  # an expired session took the node with it
        if not isinstance(children, list):
            raise unexpected(children, spec.path, "list")
        ours = [name for name in children if name.startswith(spec.prefix)]
        if not ours:
            return None
        path = f"{spec.path}/{ours[0]}"
        stat = yield Exists(path, deadline=deadline, retry=retry)
        if stat is TIMED_OUT:
            raise no_connection_in_time(spec.path)
        session = yield SessionId()
        if isinstance(stat, Stat) and stat.ephemeral_owner == session:
            attempt.node = path
            attempt.children = children
            return Created(path, stat)
        if isinstance(stat, ConnectionLossError):
            losses += 1
            if out_of_retries(losses, deadline):
                return None
            continue
        yield from delete_node(path)  # left by an older session of ours: not ours to adopt
        return None


def _wait_in_line(
    spec: AcquireSpec, created: Created, attempt: Attempt
) -> Generator[Op, Any, object]:
    dialect = spec.layout.dialect
    me = dialect.read(created.path.rsplit("/", 1)[1])
    assert me is not None, created.path
    me = _dialects.with_permits(me, spec.permits)
    losses = _loss_watch(spec)
    line = dialect.line_up_to(me, attempt.children)
    if losses is not None and line is not None:
        losses.listed(attempt.children, attempt.directory, line, me)
    attempt.children = []
    while True:
        if line is None:
            return (yield from _rejoin(spec, created))
        decision = spec.layout.rules.decide(me, line)
        if isinstance(decision, Granted):
            if losses is not None and losses.until() is not None:
                if not (yield from losses.wait_out(spec.path, spec.deadline)):
                    raise timed_out(spec, None)
                if not (yield from _still_exists(spec, created)):
                    return (yield from _rejoin(spec, created))
            attempt.node = None  # it is the caller's now; nothing to clean up
            return _granted(created, attempt)
        if isinstance(decision, Refused):
            raise InvalidArgument(f"{spec.path}: {decision.reason}")
        if not spec.blocking:
            yield from shielded(_cleanup_attempt(spec, attempt))
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
        holding = _holders_among(spec, line, decision.nodes)
        line = []
        # with a lock-delay, a blocker's touch (it saw a loss) makes us list too
        told = losses is not None
        gone = yield from await_blocker_deletion(spec, decision, holding, changes=told)
        while gone is None and not (yield from _our_session_ended(spec, created)):
            gone = yield from await_blocker_deletion(spec, decision, holding, changes=told)
        if gone is None:
            return _START_OVER
        if gone in takeover and losses is None:
            # Granted on the line we had, if our node is still there: ask the server.
            # Neither the wake-up nor our session proves it (someone may have deleted
            # our node; a paused waiter may see a buffered deletion before it learns
            # that its session expired meanwhile).
            if not (yield from _still_exists(spec, created)):
                return (yield from _rejoin(spec, created))
            attempt.node = None
            return _granted(created, attempt)
        if not spec.marks_departures:
            line = dialect.line_up_to(me, (yield from list_children(spec)))
            continue
        # With a lock-delay the listing proves a takeover too (it shows our node, as
        # ``exists`` would: the same one request), and its stat tells a clean
        # release from an abnormal loss; without one, the stat is what our release
        # will write back (``zklocks._core.lock_delay``).
        names, directory = yield from _list_with_stat(spec)
        line = dialect.line_up_to(me, names)
        if directory is not None:
            attempt.directory = directory
        if losses is not None and line is not None:
            losses.listed(names, directory, line, me)
            yield from losses.tell_behind(created.path, spec.data)


def _granted(created: Created, attempt: Attempt) -> Acquired:
    stat = created.stat
    return Acquired(created.path, stat.czxid, stat.ephemeral_owner, attempt.directory)


def _loss_watch(spec: AcquireSpec) -> _lock_delay.LossWatch | None:
    if spec.lock_delay is None:
        return None
    return _lock_delay.LossWatch(spec.lock_delay, spec.clock, spec.layout.rules)


def _list_with_stat(spec: AcquireSpec) -> Generator[Op, Any, tuple[list[str], Stat | None]]:
    """``list_children`` with the directory's stat (getChildren2); ``[]`` once our
    session (and so our node) is gone."""
    retry = False
    while True:
        reply = yield GetChildren(spec.path, deadline=spec.deadline, retry=retry, with_stat=True)
        if isinstance(reply, Children):
            return reply.names, reply.stat
        if isinstance(reply, list):  # a driver that answered without the stat
            return reply, None
        if reply is TIMED_OUT:
            raise no_connection_in_time(spec.path)
        if isinstance(reply, SessionExpiredError | NoNodeError):
            return [], None
        if isinstance(reply, ConnectionLossError):
            retry = True
            continue
        raise unexpected(reply, spec.path, "list")


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
            raise no_connection_in_time(spec.path)
        if not isinstance(stat, ConnectionLossError):
            raise unexpected(stat, spec.path)


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


def _holders_among(
    spec: AcquireSpec, line: list[_nodes.NodeName], names: Sequence[str]
) -> frozenset[str]:
    """Which of the nodes we wait for hold the lock now (a timeout names them): each
    judged on the line by its rule, so only the few blockers, never the whole line."""
    wanted = set(names)
    return frozenset(
        node.name
        for node in line
        if node.name in wanted and isinstance(spec.layout.rules.decide(node, line), Granted)
    )


def _cleanup_attempt(spec: AcquireSpec, attempt: Attempt) -> Generator[Op, Any, None]:
    """Leave nothing behind: delete our node, or find it by attempt token if unknown."""
    if attempt.node is None and attempt.create_in_flight:
        yield from _find_own_node(spec, attempt)
    if attempt.node is not None:
        yield from _leave(spec, attempt.node, attempt.directory)
        attempt.node = None
    attempt.create_in_flight = False


def _leave(spec: AcquireSpec, node: str, seen: Stat | None) -> Generator[Op, Any, bool]:
    """A waiter gives up: in the zklocks layout its node leaves marked clean, as a
    release does, and writes back the count of losses taken over that it saw (it takes
    none over), so a loss is never counted again when a waiter behind it leaves
    (``zklocks._core.lock_delay``); a directory that refuses the mark: deleted alone."""
    if spec.marks_departures:
        marked = yield from _lock_delay.release_marked(node, _lock_delay.kept(seen))
        if marked is not None:
            return marked
    return (yield from delete_node(node))
