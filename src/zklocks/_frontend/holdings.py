"""What every lock front end shares: who holds what, reentrancy, and the acquire spec.

A lock object may be shared: each *owner* (a thread in the sync API, a task in asyncio)
that acquires is its own contender with its own node and lease. This table answers
"does this owner hold it, how many times", so the front ends only add how they wait.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from zklocks._core import kinds as _kinds
from zklocks._core import nodes as _nodes
from zklocks._core import validate as _validate
from zklocks._core.flow import Acquired, AcquireSpec
from zklocks._core.layouts import ZKLOCKS, Layout, choose
from zklocks._core.lease import LeaseBase, Scheduler
from zklocks._core.security import AclPolicy
from zklocks._errors import AlreadyHeld, InvalidArgument, LockLost, NotHeld

_HOST = socket.gethostname()


@dataclass(frozen=True, slots=True)
class LockConfig:
    """A lock's fixed parameters, validated once at creation."""

    path: str
    kind: _kinds.Kind  # one of zklocks._core.kinds.KINDS
    fair: bool = True
    permits: int | None = None
    reentrant: bool = False
    identifier: str | None = None
    acl: AclPolicy | None = None  # the client's: None is the open ACL
    layout: Layout = ZKLOCKS  # whose queue it stands in (Curator's, kazoo's or ours)
    max_hold: float | None = None  # seconds a lease may be held before it is taken back
    lock_delay: float | None = None  # seconds a grant waits after an abnormal loss ahead

    def spec(
        self,
        owner_name: str,
        deadline: float | None,
        blocking: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> AcquireSpec:
        """A fresh attempt (new token) for one acquire call."""
        attempt = _nodes.new_attempt()
        identifier = self.identifier or f"{_HOST}:{os.getpid()}:{owner_name}"
        if self.fair:  # a queued node's name carries the attempt; the data stays the same
            data = _payload(identifier, os.getpid())
        else:  # the one-node lock's data is how it recognises its own node
            data = _nodes.encode_payload(_nodes.Payload(identifier, attempt, _HOST, os.getpid()))
        return AcquireSpec(
            path=self.path,
            kind=self.kind,
            data=data,
            attempt=attempt,
            permits=self.permits,
            fair=self.fair,
            blocking=blocking,
            deadline=deadline,
            acl=self.acl,
            layout=self.layout,
            lock_delay=self.lock_delay,
            clock=clock,
        )


@functools.lru_cache(maxsize=1024)
def _payload(identifier: str, pid: int) -> bytes:
    """Node data (cached: the same identifier is encoded once per thread, not per call)."""
    return _nodes.encode_payload(_nodes.Payload(identifier, "", _HOST, pid))


def make_config(
    path: object,
    kind: _kinds.Kind,
    *,
    fair: bool = True,
    permits: object = None,
    reentrant: bool = False,
    identifier: object = None,
    acl: AclPolicy | None = None,
    layout: object = "zklocks",
    max_hold: object = None,
    lock_delay: object = None,
) -> LockConfig:
    """Validate everything before any ZooKeeper call."""
    delay = _validate.lock_delay(lock_delay)
    chosen = choose(layout, kind, fair=bool(fair))
    if delay is not None and chosen is not ZKLOCKS:
        raise InvalidArgument(
            f"lock_delay needs the zklocks layout: the {chosen.name} layout's release "
            "leaves no mark to tell a clean release from an abnormal loss (docs/locks.md)"
        )
    if delay is not None and not fair:
        raise InvalidArgument("lock_delay needs the queued lock (fair=True), not the one-node lock")
    return LockConfig(
        path=_validate.lock_path(path),
        kind=kind,
        fair=bool(fair),
        permits=_validate.permits(permits) if kind is _kinds.PERMIT else None,
        reentrant=bool(reentrant),
        identifier=_validate.identifier(identifier),
        acl=acl,
        layout=chosen,
        max_hold=_validate.max_hold(max_hold),
        lock_delay=delay,
    )


L = TypeVar("L", bound=LeaseBase)
L_co = TypeVar("L_co", bound=LeaseBase, covariant=True)


@dataclass(slots=True)
class Holding(Generic[L]):
    lease: L
    count: int = 1


@dataclass(slots=True)
class HoldingTable(Generic[L]):
    """Owner -> holding, for one lock object. Thread-safe."""

    config: LockConfig
    _by_owner: dict[object, Holding[L]] = field(default_factory=dict)
    _mutex: threading.Lock = field(default_factory=threading.Lock)

    def get(self, owner: object) -> Holding[L] | None:
        with self._mutex:
            return self._by_owner.get(owner)

    def reenter(self, owner: object) -> L | None:
        """The lease to hand back again for a reentrant re-acquire, or None if not held.

        Raises ``AlreadyHeld`` for a non-reentrant lock the owner holds (unless its lease
        was lost: then the stale holding is dropped and a fresh acquire may proceed).
        """
        with self._mutex:
            holding = self._by_owner.get(owner)
            if holding is None:
                return None
            if holding.lease.lost:
                return None
            if not self.config.reentrant:
                raise AlreadyHeld(
                    f"{self.config.path}: this {owner_word(owner)} already holds the lock "
                    "(create it with reentrant=True to count re-acquisitions)"
                )
            holding.count += 1
            return holding.lease

    def add(self, owner: object, lease: L) -> None:
        with self._mutex:
            self._by_owner[owner] = Holding(lease)

    def leave(self, owner: object) -> L | None:
        """Count one release; the lease to give up if that was the last, else None."""
        with self._mutex:
            holding = self._by_owner.get(owner)
            if holding is None:
                raise NotHeld(
                    f"{self.config.path}: this {owner_word(owner)} does not hold the lock"
                )
            holding.count -= 1
            if holding.count > 0:
                return None
            del self._by_owner[owner]
            return holding.lease

    def leave_lease(self, lease: L, *, if_held: bool = False) -> L | None:
        """``leave`` for whichever owner holds ``lease`` (a release from another thread
        or task). ``NotHeld`` if none does (released already), unless ``if_held``."""
        with self._mutex:
            owner = next((o for o, h in self._by_owner.items() if h.lease is lease), None)
            if owner is None:
                if if_held:
                    return None
                raise NotHeld(f"{self.config.path}: this lease was released already")
            holding = self._by_owner[owner]
            holding.count -= 1
            if holding.count > 0:
                return None
            del self._by_owner[owner]
            return holding.lease

    def take_stale(self, owner: object) -> L | None:
        """Remove and return a lost holding of ``owner`` (its node still needs deleting)."""
        with self._mutex:
            holding = self._by_owner.get(owner)
            if holding is not None and holding.lease.lost:
                del self._by_owner[owner]
                return holding.lease
            return None


class Host(Protocol[L_co]):
    """What a lock needs of the client that made it (both clients satisfy it).

    Named here, not imported, so the clients may import their lock classes and not the
    other way round. Sessions are typed loosely: each front end has its own kind.
    """

    def _session_or_raise(self) -> Any: ...

    def _session_or_none(self) -> Any: ...

    def _watch_lease(self, acquired: Acquired) -> L_co: ...


class Front(Protocol):
    """How one front end runs things apart from every caller: the only part of a lock
    operation that is not the same in the sync and the asyncio clients."""

    def timer(self, session: Any) -> Scheduler:
        """Run a callback later, on the session's event thread (or the running loop)."""
        ...

    def spawn(self, session: Any, operation: Generator[Any, Any, None]) -> None:
        """Drive ``operation`` on ``session`` apart (a thread or a task of the session's)."""
        ...


class LockCore(Generic[L]):
    """What a lock object is in either front end, apart from how it waits.

    ``_current_owner`` says who is asking: the thread (sync) or the task (asyncio).
    """

    def __init__(self, config: LockConfig, client: Host[L], front: Front) -> None:
        self._config = config
        self._client = client
        self._front = front
        self._holdings: HoldingTable[L] = HoldingTable(config)
        self._sibling: LockCore[L] | None = None  # the other half of a read/write lock
        self._peers: PathPeers | None = None  # the client's other lock objects, by path

    @staticmethod
    def _current_owner() -> object:
        raise NotImplementedError

    def _adopt(self, lease: L) -> None:
        """Make ``lease.release()`` release through this lock (each front end's own)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._config.kind} {self._config.path}>"

    @property
    def path(self) -> str:
        """The lock's directory: contender nodes are its children."""
        return self._config.path

    @property
    def kind(self) -> str:
        """ "lock", "read", "write", "permit" (a semaphore's) or "elect"."""
        return self._config.kind.name

    @property
    def held(self) -> bool:
        """Does the calling thread (or task) hold the lock, with its lease not lost?"""
        holding = self._holdings.get(self._current_owner())
        return holding is not None and not holding.lease.lost

    @property
    def lease(self) -> L | None:
        """The calling thread's (or task's) lease, or None."""
        holding = self._holdings.get(self._current_owner())
        return None if holding is None else holding.lease

    def _equip(
        self,
        lease: L,
        schedule: Scheduler,
        take_back: Callable[[], None],
        look: Callable[[], None],
        count: Callable[[], None] | None = None,
    ) -> None:
        """Give a fresh lease what each front end does its own way: ``look`` reads our
        node's data for a revoke request, ``count`` the lock directory for who waits
        behind us (only once a waiting callback is added), and this lock's ``max_hold``
        (if any) makes it lost when it falls, ``take_back`` deleting our node; all apart
        from every caller."""
        lease._allow_looks(look)
        if count is not None:
            lease._allow_waiter_counts(count)
        if self._config.max_hold is not None:
            lease._limit_hold(self._config.max_hold, schedule, take_back)

    def _lost_on_exit(self, lease: L | None, failed: bool) -> None:
        """Leaving ``with`` normally after the lease was lost raises ``LockLost``."""
        if not failed and lease is not None and lease.lost:
            raise LockLost(f"{self.path}: the lease was lost while held ({lease.lost_reason})")

    def _refuse_if_sibling_held(self, owner: object) -> None:
        """``AlreadyHeld`` where this owner would wait on its own node: the other side
        of a read/write lock, or another lock object on the same path of the same client
        with an exclusive side (``lock``, ``write``) involved."""
        if self._sibling is not None and self._sibling._holdings.get(owner) is not None:
            raise AlreadyHeld(
                f"{self.path}: this {owner_word(owner)} holds the {self._sibling.kind} side "
                f"of this read/write lock; taking the {self.kind} side too would wait on itself"
            )
        peers = self._peers
        if peers is None:
            return
        for other in peers.on_path(self):
            holding = other._holdings.get(owner)
            if holding is None or holding.lease.lost:
                continue
            if self.kind in _EXCLUSIVE or other.kind in _EXCLUSIVE:
                raise AlreadyHeld(
                    f"{self.path}: this {owner_word(owner)} holds this path through another "
                    f"{other.kind} object ({other!r}); taking it again as {self.kind} would "
                    "wait on itself (share one lock object, with reentrant=True to count)"
                )


PartT = TypeVar("PartT", bound=LockCore[Any])


class PairCore(Generic[PartT]):
    """Shared reads, exclusive writes, one queue: ``.read`` and ``.write`` are locks.

    A reader waits only for the nearest earlier writer; a writer for its immediate
    predecessor; a reader queued behind a waiting writer waits (writers never starve).
    """

    def __init__(self, read: PartT, write: PartT) -> None:
        self.read = read
        self.write = write
        read._sibling = write
        write._sibling = read

    @property
    def path(self) -> str:
        return self.read.path

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path}>"


_EXCLUSIVE = _kinds.EXCLUSIVE


class PathPeers:
    """The lock objects a client made, by path: lets a lock see its same-path peers.

    Held weakly: a lock object the program dropped is forgotten.
    """

    def __init__(self) -> None:
        self._by_path: dict[str, weakref.WeakSet[LockCore[Any]]] = {}
        self._mutex = threading.Lock()
        self._prune_at = 64

    def join(self, lock: LockCore[Any]) -> None:
        with self._mutex:
            self._by_path.setdefault(lock.path, weakref.WeakSet()).add(lock)
            if len(self._by_path) >= self._prune_at:
                # paths whose lock objects are all gone (one path per order, per user...):
                # dropped, amortised O(1) per join
                self._by_path = {path: peers for path, peers in self._by_path.items() if peers}
                self._prune_at = max(64, 2 * len(self._by_path))
        lock._peers = self

    def on_path(self, lock: LockCore[Any]) -> list[LockCore[Any]]:
        """The other lock objects on ``lock``'s path (its read/write sibling included)."""
        with self._mutex:
            peers = self._by_path.get(lock.path)
            if peers is None or len(peers) < 2:  # the usual case: one object per path
                return []
            return [p for p in peers if p is not lock]


def owner_word(owner: object) -> str:
    return "thread" if isinstance(owner, int) else "task"
