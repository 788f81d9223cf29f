"""``lock.hold()``: a ``with`` block whose body is interrupted at the instant its lease is
lost, for work that cannot be fenced (an email, a payment call, a file on NFS).

The lease's lost-callback runs on the client's event thread; it raises ``LockLost`` in
the thread that entered the block, between two bytecodes, with
``PyThreadState_SetAsyncExc``. What that cannot do (and the docs say so): interrupt a
blocking C call (``time.sleep``, a socket read, a database driver's wait), which sees the
exception only when it returns; or protect the body's own ``finally``/``except``, which
the exception interrupts like any other code.

The race that matters is the block's end: the loss must never reach a thread that has
left the block (it has moved on to unrelated work). The callback raises only while the
block is entered, under a mutex, and the exit clears, under the same mutex, an exception
raised but not yet delivered; one delivered inside the exit itself, before it took the
mutex, is caught there.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

from zklocks._core.errors import LockLost
from zklocks._core.lease import Lease, LeaseBase

__all__ = ["Hold"]


class _LostInHold(LockLost):
    """What the event thread raises in the holding thread (a class: the interpreter
    makes the instance). ``Hold.__exit__`` replaces it with a ``LockLost`` that says why."""


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Deliver ``exception`` to ``thread_id`` at its next bytecode (None: cancel one not
    delivered yet). No ``argtypes`` are set: ``pythonapi`` is shared by every library."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), None if exception is None else ctypes.py_object(exception)
    )


class Hold:
    """The context manager ``Lock.hold()`` returns; ``with`` gives the ``Lease``.

    ``acquire`` grants the lease on entry (``exclusive`` hands one it already took).
    A lost lease is let go (``let_go``) rather than released: its delete may wait for a
    connection, and the point of the block is to give the thread back at the loss."""

    def __init__(
        self, path: str, acquire: Callable[[], Lease], let_go: Callable[[Lease], None]
    ) -> None:
        self._path = path
        self._acquire = acquire
        self._let_go = let_go  # releases a lost lease without waiting for a connection
        self._lease: Lease | None = None
        self._thread = 0
        self._mutex = threading.Lock()
        self._inside = False  # the block is entered and not left: a loss may interrupt it
        self._raised = False  # a loss was raised in the holding thread (maybe not delivered)
        self._lost_early = False  # lost before the block began: __enter__ raises

    def __enter__(self) -> Lease:
        lease = self._acquire()
        self._lease = lease
        self._thread = threading.get_ident()
        with self._mutex:
            self._inside = True
        lease.add_lost_callback(self._lost)  # at once, on this thread, if lost already
        if self._lost_early:
            self._leave()
            self._let_go(lease)
            lease._lost_on_exit(None)  # raises LockLost: lost as it is
        return lease

    def _lost(self, lease: LeaseBase) -> None:
        """The lease's lost-callback: interrupt the body, if it still runs."""
        with self._mutex:
            if not self._inside:
                return
            if threading.get_ident() == self._thread:
                self._lost_early = True  # (still in __enter__)
                return
            self._raised = True
            _raise_in(self._thread, _LostInHold)

    def _leave(self) -> None:
        """No loss reaches this thread from now on, not even one raised already."""
        while True:
            try:
                with self._mutex:
                    self._inside = False
                    if self._raised:
                        _raise_in(self._thread, None)
                return
            except _LostInHold:
                continue  # delivered here, in the exit: it is the loss we report below

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: object,
    ) -> None:
        self._leave()
        lease = self._lease
        assert lease is not None
        if not lease.lost:
            lease.__exit__(exc_type, exc, None)  # release (lost meanwhile: LockLost)
            return
        self._let_go(lease)
        if not isinstance(exc, _LostInHold):
            lease._lost_on_exit(exc)  # leaving normally: LockLost, as `with lock`
            return
        raise LockLost(
            f"{self._path}: the lease was lost while held ({lease.lost_reason}); "
            "the block was interrupted"
        ) from exc
