"""What a forked child inherits: the parent's sessions, which it must never use.

``os.fork()`` copies the whole process: each started client, its connection's socket
(the same TCP connection as the parent's, not a copy of it), the sync client's event
loop and its epoll instance (shared with the parent too), but not the sync client's
loop thread, and none of the other threads. A child that used such a client would write
into the parent's session, steal its replies, or wait for ever on a thread that does
not exist (kazoo#554, celery#3129). So, at the fork, in the child:

* every started client is marked inherited: each call raises ``ClientClosed`` saying so
  and what to do, its leases read as lost, and ``stop()`` forgets it, sending nothing;
* its sockets are let go without a byte sent: each of the child's descriptors is made
  to name ``/dev/null`` (``dup2``), so the parent's connection is untouched, nothing the
  child does later can reach it, and the number stays taken (a later close of the old
  socket object closes ``/dev/null``, never a descriptor the child has opened since).
  The sync client's epoll descriptor goes the same way, so an accidental use of its loop
  cannot change what the parent's loop watches (epoll registrations are shared);
* the inherited objects are kept referenced for the child's life, so no finaliser
  (asyncio's "unclosed" ones among them) ever runs on them.

The hook takes no lock: one held by a thread of the parent at the fork stays held in
the child for ever. It only sets attributes and swaps descriptors. A client made in
the child is a client like any other.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterable
from typing import Protocol

INHERITED = (
    "this client was started in another process and inherited across fork (os.fork, "
    "multiprocessing's 'fork' start method, a prefork server such as Celery's or "
    "gunicorn's): its ZooKeeper session is the parent's, and this process must not use "
    "it. Make a new client in this process after the fork (e.g. in a worker-init hook), "
    "or use zklocks.exclusive, which makes one per process"
)
INHERITED_LEASE = (
    "this process was forked from the one that holds the lock: the lease is the parent's"
)


class Inherited(Protocol):
    def _after_fork_in_child(self) -> None:
        """Mark this object unusable in the child; take no lock, run no callback."""


_live: weakref.WeakSet[Inherited] = weakref.WeakSet()
_kept: list[object] = []  # in a child: what it inherited, never to be finalised


def track(obj: Inherited) -> None:
    """Call ``obj._after_fork_in_child()`` in every child forked while ``obj`` lives."""
    _live.add(obj)


def untrack(obj: Inherited) -> None:
    _live.discard(obj)


def keep(obj: object) -> None:
    """In a child: hold ``obj`` for the child's life (no finaliser runs on it)."""
    _kept.append(obj)


def drop_descriptors(fds: Iterable[int]) -> None:
    """Let go of the child's copies of ``fds`` without touching what they name: each
    now names ``/dev/null`` (close-on-exec), so nothing is sent and the numbers stay
    taken. A descriptor already closed (-1) is skipped."""
    fds = [fd for fd in fds if fd >= 0]
    if not fds:
        return
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def _in_child() -> None:
    inherited = list(_live)
    _live.clear()
    for obj in inherited:
        # Whatever fails for one object must not stop the others (nor the fork's
        # caller): the object is already marked before anything here can fail.
        with contextlib.suppress(Exception):
            obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_in_child)
