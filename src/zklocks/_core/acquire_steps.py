"""What both acquire flows share: the call's spec and its grant, the steps both take,
the cleanup every way out runs, and how a reply nobody expected becomes the public error.
No I/O.

The queued kinds' flow (``zklocks._core.flow``) and the one-node lock's
(``zklocks._core.one_node``) differ in how they create, decide and let go; around that
they make the lock path the same way, read and check the directory's ACL the same way,
list and wait for a blocker's deletion with the one deadline of the call the same way,
and clean up the same way: shielded from a second interruption, retried after a
dropped connection at most ``CLEANUP_RETRIES`` times, waited for ``CLEANUP_GRACE`` past
the deadline at most. The theory of operation is in ``zklocks._core.flow``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, TypeVar

from zklocks._core import kinds as _kinds
from zklocks._core import layouts as _layouts
from zklocks._core.contender import Contender, contender_of
from zklocks._core.ops import TIMED_OUT, Cleanup, Op, Pipeline
from zklocks._core.security import AclPolicy, public_acl, weak_directory_message, weaker_entries
from zklocks._core.steps import Changed, Gone, await_deletion, make_parents
from zklocks._core.strategies import WaitFor
from zklocks._errors import AccessDenied, ClientClosed, LockError, LockTimeout
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
    ZooKeeperError,
)
from zklocks._protocol.records import (
    Create,
    Delete,
    GetACL,
    GetChildren,
    NodeACL,
    NodeData,
    Stat,
    WireACL,
)

Flow: TypeAlias = Generator[Op, Any, Any]
T = TypeVar("T")

CLEANUP_RETRIES = 2
"""Cleanup requests wait for a connection as long as the session lives, and are sent
again after a dropped connection; this many drops in a row mean a broken server."""


def out_of_retries(drops_in_a_row: int, deadline: float | None) -> bool:
    """Should a read that lost its connection ``drops_in_a_row`` times stop trying?
    Within an acquire (a ``deadline``) never: the deadline bounds it. In cleanup (none)
    after ``CLEANUP_RETRIES``: a server that breaks every connection would otherwise keep
    the caller for ever."""
    return deadline is None and drops_in_a_row > CLEANUP_RETRIES


CLEANUP_GRACE = 0.25
"""How long past its deadline a call waits for its own cleanup before leaving it to run
apart: a working server deletes a node in milliseconds, so the caller sees its node gone
when it gets ``LockTimeout``; a broken one costs the caller no more than this."""


@dataclass(frozen=True, slots=True)
class AcquireSpec:
    """What one acquire call wants; ``deadline`` is on the driver's clock."""

    path: str
    kind: _kinds.Kind
    data: bytes
    attempt: str
    permits: int | None = None
    fair: bool = True
    blocking: bool = True
    deadline: float | None = None
    acl: AclPolicy | None = None  # None: the open ACL, and no check of the directory
    layout: _layouts.Layout = _layouts.ZKLOCKS  # whose names, order and rules
    # seconds a grant waits after a holder ahead was lost abnormally (zklocks._core.lock_delay)
    lock_delay: float | None = None
    clock: Callable[[], float] = time.monotonic  # the deadline's clock (the session's)

    @property
    def marks_departures(self) -> bool:
        """Our nodes leave with a mark on the directory, and every listing reads its stat
        (the zklocks layout: ``zklocks._core.lock_delay``)."""
        return self.layout is _layouts.ZKLOCKS

    @property
    def node_acl(self) -> tuple[WireACL, ...]:
        return () if self.acl is None else self.acl.wire

    @property
    def prefix(self) -> str:
        """Our node's name without the sequence: it carries our attempt token."""
        return self.layout.dialect.prefix(self.kind.name, self.attempt, self.permits)


@dataclass(frozen=True, slots=True)
class Acquired:
    """A grant: our node's full path, its fencing token (creation zxid), its session."""

    node: str
    token: int
    owner: int = 0
    # the lock directory's stat at our latest listing: what our release writes there
    seen: Stat | None = field(default=None, compare=False)


@dataclass(slots=True)
class Attempt:
    """What cleanup must know if the flow is left early."""

    node: str | None = None
    create_in_flight: bool = False
    children: list[str] = field(default_factory=list)
    directory: Stat | None = None  # the lock directory's stat, read with ``children``


def await_blocker_deletion(
    spec: AcquireSpec,
    decision: WaitFor,
    holding: frozenset[str] = frozenset(),
    *,
    changes: bool = False,
) -> Generator[Op, Any, str | Changed | None]:
    """Wait until a blocker is deleted: its name, or None if our session expired (with
    ``changes``, also until a blocker's data changes: ``Changed``).

    ``holding``: the blockers that hold the lock; a timeout names the first whose data
    the watch read (``LockTimeout.holder``), at no extra request."""
    blockers = tuple(f"{spec.path}/{name}" for name in decision.nodes)
    seen: dict[str, NodeData] = {}
    retry = False
    while True:
        reply = yield from await_deletion(
            blockers, spec.deadline, retry=retry, seen=seen, changes=changes
        )
        if isinstance(reply, Gone):
            return reply.node.rsplit("/", 1)[1]
        if isinstance(reply, Changed):
            return reply
        if reply is TIMED_OUT:
            raise timed_out(spec, _holder(spec, decision, holding, seen))
        if isinstance(reply, SessionExpiredError):
            return None
        if isinstance(reply, ConnectionLossError):
            retry = True
            continue
        raise unexpected(reply, spec.path, "watch")


def list_children(spec: AcquireSpec) -> Generator[Op, Any, list[str]]:
    """The lock path's children, within the deadline; ``[]`` once our session (and so
    our node) is gone, which sends the caller back to create again."""
    retry = False
    while True:
        children = yield GetChildren(spec.path, deadline=spec.deadline, retry=retry)
        if isinstance(children, list):
            return children
        if children is TIMED_OUT:
            raise no_connection_in_time(spec.path)
        if isinstance(children, SessionExpiredError | NoNodeError):
            return []  # our node is gone with the session (or the path): start over
        if isinstance(children, ConnectionLossError):
            retry = True
            continue
        raise unexpected(children, spec.path, "list")


def create_parents(spec: AcquireSpec, *, retry: bool = False) -> Generator[Op, Any, None]:
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
        raise no_connection_in_time(spec.path)
    try_again = ConnectionLossError | SessionExpiredError | NoNodeError
    if isinstance(reply, ZooKeeperError) and not isinstance(reply, try_again):
        raise unexpected(reply, spec.path, "create")


def check_directory(
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


def _read_acl(spec: AcquireSpec, path: str, reply: Any) -> Generator[Op, Any, tuple[WireACL, ...]]:
    while not isinstance(reply, NodeACL):  # None: not read yet
        if reply is TIMED_OUT:
            raise no_connection_in_time(spec.path)
        if reply is not None and not isinstance(reply, ConnectionLossError | SessionExpiredError):
            raise unexpected(reply, path, "getACL")
        reply = yield GetACL(path, deadline=spec.deadline, retry=reply is not None)
    return reply.entries


def create_pipeline(spec: AcquireSpec, create: Create, listing: GetChildren) -> Pipeline:
    """The create pipeline's first try; with an ACL it also reads the directory's ACL in
    the same round trip (``check_directory``)."""
    requests: tuple[Create | GetChildren | GetACL, ...] = (create, listing)
    if spec.acl is not None:
        requests += (GetACL(spec.path, deadline=spec.deadline),)
    return Pipeline(requests)


def retry_of(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` marked as a retry. Made only when a retry happens: ``replace`` costs
    about 8 us a request, and on every uncontended acquire that was 1 % of the cycle."""
    return Pipeline(tuple(replace(r, retry=True) for r in pipeline.requests), pipeline.watch)


def shielded(steps: Generator[Op, Any, T]) -> Generator[Op, Any, T]:
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


def clean_up(spec: AcquireSpec, steps: Generator[Op, Any, Any]) -> Cleanup:
    """The way out of an acquire: ``steps`` run to their end, shielded from another
    interruption where they run in the flow's place (``inline_cleanups``), and keep the
    caller at most ``CLEANUP_GRACE`` past its deadline (without one, until they end)."""
    deadline = None if spec.deadline is None else spec.deadline + CLEANUP_GRACE
    return Cleanup(shielded(steps), deadline)


def delete_node(node: str) -> Generator[Op, Any, bool]:
    """Delete a node whose name is ours alone; ``True`` if it was there to delete."""
    for _ in range(CLEANUP_RETRIES + 1):
        reply = yield Delete(node)
        if reply is None:
            return True
        if isinstance(reply, NoNodeError | SessionExpiredError | ClientClosedError):
            return False  # gone already, or the server removes it as the session ends
        if not isinstance(reply, ConnectionLossError):
            raise unexpected(reply, node, "delete")
    return False  # every connection broke under it: a broken server, not a dropped link


def unexpected(reply: object, path: str, operation: str = "access") -> LockError:
    """A reply the flow has no step for, as the public error to raise."""
    if isinstance(reply, ClientClosedError):
        return ClientClosed(f"cannot lock {path}: the client is stopped")
    if isinstance(reply, NoAuthError):
        return access_denied(path, operation)
    if isinstance(reply, BaseException):
        error = LockError(f"ZooKeeper refused a request for {path}: {reply}")
        error.__cause__ = reply
        return error
    return LockError(f"unexpected reply for {path}: {reply!r}")


def timed_out(spec: AcquireSpec, holder: Contender | None) -> LockTimeout:
    """The deadline passed while we waited in line; the message names who held it, as
    the command line does, where we knew."""
    held = "" if holder is None else f"; held by {holder}"
    message = f"timed out waiting for lock {spec.path}{held}"
    return LockTimeout(message, path=spec.path, holder=holder)


def _holder(
    spec: AcquireSpec, decision: WaitFor, holding: frozenset[str], seen: dict[str, NodeData]
) -> Contender | None:
    for name in decision.nodes:
        data = seen.get(f"{spec.path}/{name}")
        node = spec.layout.dialect.read(name) if name in holding else None
        if data is not None and node is not None:
            return contender_of(spec.path, node, data, holder=True)
    return None


def no_connection_in_time(path: str) -> LockTimeout:
    """The deadline passed while a request for ``path`` waited for a connection."""
    return LockTimeout(f"timed out waiting for a connection to lock {path}", path=path)


def access_denied(path: str, operation: str) -> AccessDenied:
    """ZooKeeper's NoAuth as the public error: which path, which operation, what to check."""
    return AccessDenied(
        f"ZooKeeper denied {operation} on {path}: this client's credentials (auth=...) do "
        "not give it that permission in the node's ACL (or its parent's, for create and "
        "delete)",
        path=path,
        operation=operation,
    )
