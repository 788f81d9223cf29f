"""The client's threads leave signals to the caller; the caller's waits notice them.

The kernel hands a signal sent to the process (Ctrl-C's SIGINT, a SIGTERM) to any thread
that does not block it. Python runs its handlers in the main thread, but only a signal
that interrupts the *main thread's* wait wakes it: one taken by our connection's thread
leaves a caller blocked in ``acquire()`` until its wait ends by itself (seen: a Ctrl-C
answered 30 s late, once the timeout ran out, on a loaded machine). Every thread a client
starts therefore blocks the signals a user sends, so they reach the main thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from zklocks._core.deadline import Deadline

__all__ = ["SIGNAL_SLICE", "USER_SIGNALS", "background_thread", "wait_interruptibly"]

USER_SIGNALS = frozenset(
    {
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGALRM,
    }
)


def background_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A daemon thread (not started) that runs ``target`` with ``USER_SIGNALS`` blocked."""

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, USER_SIGNALS)
        target()

    return threading.Thread(target=run, name=name, daemon=True)


SIGNAL_SLICE = 0.2  # the longest a pending Ctrl-C waits in the main thread (seconds)


def wait_interruptibly(event: threading.Event, deadline: Deadline) -> bool:
    """``event.wait`` until ``deadline``, in slices when on the main thread.

    A signal that arrives after Python last looked for one and before the wait begins
    is only acted on once the wait ends (CPython runs handlers between bytecodes, and
    the lock wait does not look first): with a 30 s timeout a Ctrl-C was seen to take
    30 s. Waiting in slices bounds that to ``SIGNAL_SLICE``; each slice is cut to what
    remains of the one deadline.
    """
    if threading.current_thread() is not threading.main_thread():
        return event.wait(deadline.remaining())
    while True:
        left = deadline.remaining()
        if left == 0.0:
            return event.is_set()
        if event.wait(SIGNAL_SLICE if left is None else min(left, SIGNAL_SLICE)):
            return True
