"""``zklocks status --watch``: redraw on every change, and say so when ZooKeeper is gone.

Theory of operation
-------------------
Two threads and one inbox (a ``queue.SimpleQueue``):

- The **feed** thread does every ZooKeeper call: arm the child watch, list, post the
  state to the inbox, wait for the watch; again. While ZooKeeper is unreachable its
  calls block until the client reconnects, so it must not be the thread that draws.
- The **main** thread only takes from the inbox (a state, an error, or "stop") and
  draws. It wakes at least once a second to advance the durations and to look at
  ``Client.connected`` (a local flag, no request): while it is false, the last table
  stays on screen under "disconnected from HOSTS for N s; showing the last known
  state", until a listing made after the reconnection arrives.

Ctrl-C (SIGINT, and SIGTERM/SIGHUP) only posts "stop" to the inbox: the handler raises
nothing, so no ``KeyboardInterrupt`` can escape from some other line (click would print
"Aborted!" and exit 1). ``SimpleQueue.put`` is safe to call from a signal handler,
unlike ``threading.Event.set``. The signals are blocked while connecting, so the
client's threads and the feed inherit a mask that sends every signal to the main
thread; one that arrives during the connection attempt is handled right after it.
Whatever happens, a stop is exit status 0. A stop signal we were started with ignored
(``nohup``'s SIGHUP, a script's ``&``) stays ignored (``common.not_ignored``).

While the table is drawn live, the library's log lines (``zklocks: ... refused the
connection``) are printed through the live display, above the table, instead of as raw
stderr lines that would land in the middle of it (``_log_lines_above``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from zklocks import Client, ClientClosed, LockError
from zklocks._cli.common import (
    Failure,
    arm_change_watch,
    connect,
    fail,
    not_ignored,
    signals_blocked,
)
from zklocks._cli.sanitise import cannot, clean
from zklocks._cli.security import Security
from zklocks._cli.status_view import (
    REDRAW_INTERVAL,
    new_console,
    note_grants,
    print_clean,
    render,
    snapshot,
)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RETRIES = 3  # listings in a row that may fail while the connection is down


class _Stop:
    """The inbox message a stop signal posts."""


STOP = _Stop()


def watch(
    hosts: str, connect_timeout: float, path: str, as_json: bool, security: Security | None = None
) -> None:
    """Connect, then show ``path`` until a stop signal; a stop always returns normally."""
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        inbox.put(STOP)

    previous = {sig: signal.signal(sig, on_signal) for sig in not_ignored(STOP_SIGNALS)}
    client: Client | None = None
    try:
        try:
            # the client's threads and the feed inherit the mask
            with signals_blocked(STOP_SIGNALS):
                client = connect(hosts, connect_timeout, security=security)
                feed = threading.Thread(
                    target=_feed, args=(client, path, inbox), name="zklocks-status", daemon=True
                )
                feed.start()
        except Failure:
            if _stop_pending(inbox):
                return  # interrupted while connecting: not an error
            raise
        _Screen(client, hosts, path, as_json).show(inbox)
    finally:
        for sig in STOP_SIGNALS:  # a second Ctrl-C must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        if client is not None:
            client.stop()  # the feed's pending call returns ClientClosed; it posts and ends
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_pending(inbox: queue.SimpleQueue[Any]) -> bool:
    """Did a stop signal arrive (its handler ran as the signals were unblocked)?"""
    try:
        return inbox.get_nowait() is STOP
    except queue.Empty:
        return False


def _feed(client: Client, path: str, inbox: queue.SimpleQueue[Any]) -> None:
    """Arm the watch, list, post; wait for the watch. Ends by posting the error that
    stopped it (``ClientClosed`` once the main thread stops the client).

    A listing that fails while the connection is down (its session expired under it)
    is tried again: the next calls wait for the new session. An error that repeats
    with the connection up is the answer, and is posted.
    """
    failures = 0
    try:
        while True:
            try:
                changed = arm_change_watch(client, path)
                state = snapshot(client, path)
            except ClientClosed:
                raise
            except LockError:
                failures += 1
                if failures > RETRIES or client.connected:
                    raise
                continue
            failures = 0
            inbox.put(state)
            changed.wait()
    except BaseException as error:
        inbox.put(error)


class _Screen:
    """The main thread's side: draw what the feed posts, mark outages, stop on STOP."""

    def __init__(self, client: Client, hosts: str, path: str, as_json: bool) -> None:
        self.client = client
        self.hosts = hosts
        self.path = path
        self.as_json = as_json
        self.console = new_console()
        self.state: dict[str, Any] | None = None
        self.observed_at = 0.0
        self.down_since: float | None = None  # when we saw the connection gone
        self.granted_at: dict[str, float] = {}
        self.seen_waiting: set[str] = set()
        self.shown: object = None  # who held and waited in the last document printed

    def show(self, inbox: queue.SimpleQueue[Any]) -> None:
        live: Live | None = None
        if not self.as_json and self.console.is_terminal:
            live = Live(console=self.console, auto_refresh=False, transient=False)
            live.start()
        with _log_lines_above(live) if live is not None else contextlib.nullcontext():
            self._show(inbox, live)

    def _show(self, inbox: queue.SimpleQueue[Any], live: Live | None) -> None:
        try:
            while True:
                try:
                    item = inbox.get(timeout=REDRAW_INTERVAL)
                except queue.Empty:
                    item = None
                if item is STOP:
                    return
                if isinstance(item, BaseException):
                    if isinstance(item, LockError):
                        fail(cannot("read", self.path, item))
                    raise item
                self._note_connection(fresh=item is not None)
                if item is not None:
                    self._take(item)
                if live is not None and self.state is not None:
                    live.update(self._frame(), refresh=True)
        finally:
            if live is not None:
                live.stop()

    def _note_connection(self, *, fresh: bool) -> None:
        """Start an outage when the client says so; end it with the first listing after."""
        if not self.client.connected:
            if self.down_since is None:
                self.down_since = time.monotonic()
                if not self.console.is_terminal or self.as_json:
                    _say(f"disconnected from {self.hosts}; the last state shown stands")
        elif fresh and self.down_since is not None:
            self.down_since = None
            if not self.console.is_terminal or self.as_json:
                _say(f"reconnected to {self.hosts}")

    def _take(self, state: dict[str, Any]) -> None:
        self.state, self.observed_at = state, time.monotonic()
        note_grants(state, self.seen_waiting, self.granted_at, self.observed_at)
        if self.console.is_terminal and not self.as_json:
            return  # drawn live by the caller
        # A printed document per change of the queue; a watch that fired for a change
        # the listing already showed prints nothing new.
        line_up_now = _queue_key(state)
        if line_up_now == self.shown:
            return
        self.shown = line_up_now
        if self.as_json:
            click.echo(json.dumps(state, separators=(",", ":")))
        else:
            self.console.print(Text(f"-- {state['at']}", style="dim"))
            print_clean(self.console, render(state))
        sys.stdout.flush()

    def _frame(self) -> RenderableType:
        assert self.state is not None
        table = render(self.state, observed_at=self.observed_at)
        if self.down_since is None:
            return table
        down = int(time.monotonic() - self.down_since)
        banner = Text(
            f"disconnected from {self.hosts} for {down} s; showing the last known state",
            style="bold red",
        )
        return Group(banner, table)


class _AboveTheTable(logging.Handler):
    """A library record as a ``zklocks: ...`` line printed above the live table."""

    def __init__(self, live: Live) -> None:
        super().__init__()
        self.live = live

    def emit(self, record: logging.LogRecord) -> None:
        try:  # from any thread: rich's console takes its own lock
            message = clean(record.getMessage(), newlines=True, limit=None)
            self.live.console.print(Text(f"zklocks: {message}"))
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _log_lines_above(live: Live) -> Iterator[None]:
    """While the table is live, the library logs through it instead of onto stderr."""
    logger = logging.getLogger("zklocks")
    plain = list(logger.handlers)
    for handler in plain:
        logger.removeHandler(handler)
    above = _AboveTheTable(live)
    logger.addHandler(above)
    try:
        yield
    finally:
        logger.removeHandler(above)
        for handler in plain:
            logger.addHandler(handler)


def _say(message: str) -> None:
    click.echo(f"zklocks: {message}", err=True)


def _queue_key(state: dict[str, Any]) -> tuple[tuple[str, bool], ...]:
    return tuple((e["node"], e["holder"]) for e in state["holders"] + state["waiters"])
