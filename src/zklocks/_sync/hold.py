"""``lock.hold()``: a ``with`` block whose body is interrupted at the instant its lease is
lost, for work that cannot be fenced (an email, a payment call, a file on NFS).

The lease's lost-callback runs on the client's event thread; it raises ``LockLost`` in
the thread that entered the block, between two bytecodes, with
``PyThreadState_SetAsyncExc``. What that cannot do (and the docs say so): interrupt a
blocking C call (``time.sleep``, a socket read, a database driver's wait), which sees the
exception only when it returns; or protect the body's own ``finally``/``except``, which
the exception interrupts like any other code.

The races that matter are the block's ends. The loss must never reach a thread that has
left the block (it has moved on to unrelated work): the callback raises only while the
block is entered, under a mutex, and the exit clears, under the same mutex, an exception
raised but not yet delivered; one delivered inside the exit itself, before it took the
mutex, is caught there. And one delivered in the entry, after the block counts as
entered but before the body began, is caught there: the lease is let go, as at the exit
(the body never runs, and ``with`` calls no exit for an entry that raised).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

from zklocks._core import current as _current
from zklocks._core.lease import Lease, LeaseBase
from zklocks._errors import LockLost

__all__ = ["Hold"]


class _LostInHold(LockLost):
    """What the event thread raises in the holding thread (a class: the interpreter
    makes the instance). ``Hold.__exit__`` replaces it with a ``LockLost`` that says why;
    one delivered at the very entry of the exit (before any of its code runs) leaves the
    ``with`` as it is, a ``LockLost`` that says what happened."""

    def __str__(self) -> str:
        return "the lease was lost while held; the block was interrupted"


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
        self._released = False  # the lost lease was let go (by the loss or the exit)

    def __enter__(self) -> Lease:
        lease = self._acquire()
        _current.entered(lease)  # zklocks.current_lease() inside the block
        self._lease = lease
        self._thread = threading.get_ident()
        try:
            with self._mutex:
                self._inside = True
            lease.add_lost_callback(self._lost)  # at once, on this thread, if lost already
        except _LostInHold:  # lost, and raised here, before the body began
            self._lost_early = True
        if self._lost_early:
            self._leave()
            _current.left()
            self._release_lost(lease)
            lease._lost_on_exit(None)  # raises LockLost: lost as it is
        return lease

    def _release_lost(self, lease: Lease) -> None:
        """Let the lost lease go, once (from the loss, or the exit: whichever is first)."""
        with self._mutex:
            done, self._released = self._released, True
        if not done:
            self._let_go(lease)

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
        # The hold ends here, not only in the exit: an interruption delivered at the
        # exit's very entry would leave the exit no code to release it with.
        if isinstance(lease, Lease):
            self._release_lost(lease)

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
        _current.left()
        self._release_lost(lease)
        if not isinstance(exc, _LostInHold):
            lease._lost_on_exit(exc)  # leaving normally: LockLost, as `with lock`
            return
        raise LockLost(
            f"{self._path}: the lease was lost while held ({lease.lost_reason}); "
            "the block was interrupted"
        ) from exc
