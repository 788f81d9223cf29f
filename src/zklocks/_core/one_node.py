"""The one-node exclusive lock (``fair=False``): its acquire and delete flows. No I/O.

Create the ephemeral node ``lock``
(its data names our attempt), pipelined with ``getChildren`` of the lock path; if it
exists, watch it and retry when it is deleted. One round trip uncontended; unfair by
design (whoever creates first after a release wins). Queued contenders treat ``lock``
as the head of their line, so they wait for a one-node holder; but a one-node acquirer
cannot be seen by a queued contender that already holds. So the listing taken *after*
our create decides: if it shows any queued contender (fair lock, reader, writer,
semaphore lease), we delete our ``lock`` again and refuse with ``InvalidArgument``.
Either the queued contender's listing came after our create (it waits for ``lock``) or
our listing shows it: never both holding.

Its node's name is shared by every holder in turn, so it is deleted only while it is
ours (``delete``). The other rules (one deadline per call, cleanup on every way out)
are the queued kinds' (``zklocks._core.flow``, which hands ``fair=False`` over to
``acquire`` here), with the same steps (``zklocks._core.acquire_steps``).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from zklocks._core import nodes as _nodes
from zklocks._core.acquire_steps import (
    CLEANUP_RETRIES,
    Acquired,
    AcquireSpec,
    Attempt,
    await_blocker_deletion,
    check_directory,
    clean_up,
    create_parents,
    create_pipeline,
    list_children,
    no_connection_in_time,
    out_of_retries,
    retry_of,
    unexpected,
)
from zklocks._core.ops import TIMED_OUT, Op, SessionId
from zklocks._core.strategies import WaitFor
from zklocks._errors import InvalidArgument
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Create, Created, Delete, GetChildren, GetData, NodeData, Stat


def acquire(spec: AcquireSpec) -> Generator[Op, Any, Acquired | None]:
    """Hold ``lock`` under ``spec.path``: ``Acquired``, ``None`` (non-blocking miss) or raise."""
    node = f"{spec.path}/{_nodes.SINGLE_NODE}"
    create = Create(node, spec.data, ephemeral=True, deadline=spec.deadline, acl=spec.node_acl)
    listing = GetChildren(spec.path, deadline=spec.deadline)
    first = create_pipeline(spec, create, listing)
    attempt = Attempt()
    retry = parents_made = False
    ours: Acquired | None = None  # our node exists, not yet checked against the queue
    try:
        while True:
            attempt.create_in_flight = True
            replies = yield (retry_of(first) if retry else first)
            created, children = replies[0], replies[1]
            directory = replies[2] if spec.acl is not None else None
            attempt.create_in_flight = False
            retry = True  # unless it ends in a wait below, what follows is a retry
            if isinstance(created, Created):
                ours = Acquired(node, created.stat.czxid, created.stat.ephemeral_owner)
            elif created is TIMED_OUT:
                raise no_connection_in_time(spec.path)
            elif isinstance(created, NoNodeError):
                yield from create_parents(spec, retry=parents_made)
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
                children = yield from list_children(spec)
                directory = None  # read it again below
            elif isinstance(created, SessionExpiredError):
                continue
            elif not isinstance(created, NodeExistsError):
                raise unexpected(created, spec.path, "create")
            if not isinstance(children, list):
                children = yield from list_children(spec)
            if any(not name.single for name in _nodes.queue(children)):
                raise InvalidArgument(
                    f"{spec.path}: this path is used both as a one-node lock (fair=False) "
                    "and by queued contenders (a fair lock, a read/write lock or a "
                    "semaphore); use one kind of lock per path"
                )
            if ours is not None:
                if _nodes.SINGLE_NODE in children:
                    if spec.acl is not None:  # raises; our node is deleted on the way out
                        yield from check_directory(spec, spec.acl, directory, ours.node)
                    acquired, ours = ours, None
                    return acquired
                ours = None  # gone already (session expired, or deleted): try again
                continue
            if not spec.blocking:
                return None
            yield from await_blocker_deletion(spec, WaitFor((_nodes.SINGLE_NODE,)))
            retry = False  # woken: a fresh try
    except BaseException:
        if ours is not None:
            yield clean_up(spec, delete(node, token=ours.token))
        elif attempt.create_in_flight:
            yield clean_up(spec, delete(node, attempt=spec.attempt))
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
            raise no_connection_in_time(node)
        if isinstance(reply, ConnectionLossError):
            losses += 1
            if out_of_retries(losses, deadline):
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


def delete(
    node: str, *, attempt: str = "", token: int = 0, owner: int = 0
) -> Generator[Op, Any, bool]:
    """Delete the one-node lock only while it is ours; re-check before every retry.

    ``owner``: our session when the grant was made (a local check on the first try);
    ``token``: the grant's creation zxid; ``attempt``: the token in the data of a node
    whose create's fate is unknown. ``zklocks._core.flow.release`` says which to pass.
    """
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
            raise unexpected(reply, node, "delete")
        # the delete may have been applied before the connection dropped: check again
    return False  # every connection broke under it: a broken server, not a dropped link
