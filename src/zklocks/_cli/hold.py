"""``zklocks run PATH`` with no command: hold the lock until told to let go (etcdctl's
``lock`` without a command does the same).

The token, node and path go to stdout as ``NAME=value`` lines (the variables a command
would get, ready for ``eval``), a note for people to stderr. A stop signal (Ctrl-C,
SIGTERM, SIGHUP, SIGQUIT) is the intended way out: the caller releases the lock and we
exit 0. A lost lease is exit 76, as for a command.

The signal handler and the lease's lost-callback only post to a ``queue.SimpleQueue``
(safe from a signal handler and from the client's event thread); the main thread
waits on it, waking once a second to apply the lease's clock rule (no request sent).
"""

from __future__ import annotations

import queue
import shlex
import signal
import sys
from collections.abc import Iterable
from types import FrameType

import click

from zklocks import Lease
from zklocks._cli.common import EX_LOST

CHECK_INTERVAL = 1.0


def hold(path: str, lease: Lease, stop_signals: Iterable[signal.Signals], *, held: str) -> int:
    """Print the lease, wait for a stop signal (0) or the loss of the lease (76).

    ``held`` names what the lease gives, for the loss message ("the lock on /x").
    """
    inbox: queue.SimpleQueue[str] = queue.SimpleQueue()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        inbox.put(signal.Signals(signum).name)

    for sig in stop_signals:
        signal.signal(sig, on_signal)
    lease.add_lost_callback(lambda _lease: inbox.put("lost"))
    for name, value in (
        ("ZKLOCKS_TOKEN", str(lease.token)),
        ("ZKLOCKS_NODE", lease.node),
        ("ZKLOCKS_PATH", path),
    ):
        click.echo(f"{name}={shlex.quote(value)}")
    sys.stdout.flush()
    _note(f"holding {path} (token {lease.token}); Ctrl-C releases it")
    while True:
        try:
            what = inbox.get(timeout=CHECK_INTERVAL)
        except queue.Empty:
            what = None
        if lease.lost:
            _note(f"lost {held} ({lease.lost_reason})")
            return EX_LOST
        if what is not None and what != "lost":
            _note(f"{what}: releasing {path}")
            return 0


def _note(message: str) -> None:
    click.echo(f"zklocks: {message}", err=True)
