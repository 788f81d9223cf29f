"""``zklocks run`` and ``zklocks elect`` after the lock is ours: the command under it.

Steps 3 and 4 of ``zklocks._cli.run``'s theory of operation live here: spawn the
command with ``ZKLOCKS_TOKEN``/``ZKLOCKS_NODE``/``ZKLOCKS_PATH`` set, then wait on one
event that the command's exit (a waiter thread), a stop signal (the handler) and the
lease's lost- and revoke-callbacks all set, and decide on each wake-up whether to
forward a signal, stop the command (SIGTERM, SIGKILL after ``kill_after``) or say so.
Kept apart from ``run`` so that the command's option parsing and the lock's acquire
and release read without the signal and process-group rules, and these without them.

Where the command runs: with a terminal in the foreground (an operator typing), the
command shares our process group, so it can read the terminal and gets Ctrl-C and
Ctrl-Z straight from it, as under a shell; we then forward only SIGTERM and SIGHUP.
Otherwise (scripts, cron, CI) it gets a process group of its own, as under
``timeout(1)``: signals we receive are forwarded to the whole group, and a lost lease
stops the whole group, grandchildren included. A second Ctrl-C typed at the terminal
while the command still runs kills it (SIGKILL), as a second forwarded signal does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any

import click

from zklocks import Lease
from zklocks._cli.common import EX_CANNOT_EXECUTE, EX_LOST, EX_NOT_FOUND, signals_blocked
from zklocks._cli.sanitise import clean

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: What a terminal sends the whole foreground process group: not forwarded in foreground.
TERMINAL_SIGNALS = frozenset({signal.SIGINT, signal.SIGQUIT})
CHECK_INTERVAL = 1.0  # the lease's clock rule is applied at least this often
#: After a Ctrl-C at the terminal, how long the command may take to exit before we say
#: that a second one kills it.
STILL_RUNNING_HINT = 1.0


def note(message: str) -> None:
    """Tell the person running us something, on stderr (``zklocks: ...``)."""
    # Messages may quote what the server said (a holder's identifier and host): escaped.
    click.echo(f"zklocks: {clean(message, newlines=True, limit=None)}", err=True)


def _terminal_foreground() -> bool:
    """Is a terminal's foreground process group ours (someone typing at us)?"""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


class Supervisor:
    """Runs one command while a lease is held and turns what happens into an exit status:
    the command's own, ``EX_LOST`` when the lease was lost, 128+signal when signalled."""

    def __init__(
        self,
        command: tuple[str, ...],
        *,
        path: str,
        held: str,
        kill_after: float,
        term_on_revoke: bool,
        stops: tuple[signal.Signals, ...],
    ) -> None:
        self.command = command
        self.path = path  # for ZKLOCKS_PATH
        self.held = held  # what the lease gives, in words, for our notes
        self.kill_after = kill_after
        self.term_on_revoke = term_on_revoke
        self.stops = stops  # the stop signals we act on (not those ignored at start)
        self.foreground = _terminal_foreground()
        self.wake = threading.Event()
        self.received: list[int] = []
        self.child: subprocess.Popen[bytes] | None = None
        self.revoked = threading.Event()  # someone asked us to let go (zklocks revoke)
        # Set by the waiter thread once the command has exited (see _wait_child).
        self.exited = threading.Event()
        self.lost_when_exited = False  # the lease already read lost when the exit was seen
        self.status: int | None = None  # the command's own exit status, once known

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        self.wake.set()

    def _spawn(self, lease: Lease) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "ZKLOCKS_TOKEN": str(lease.token),
            "ZKLOCKS_NODE": lease.node,
            "ZKLOCKS_PATH": self.path,
        }
        traceparent = lease.traceparent  # the hold's span, when traced: the child joins it
        if traceparent is not None:
            env["TRACEPARENT"] = traceparent
            env.pop("TRACESTATE", None)  # it belonged to the context we were started in
        group: dict[str, Any] = {}
        if not self.foreground:
            group["process_group"] = 0
        return subprocess.Popen(list(self.command), env=env, **group)

    def run(self, lease: Lease) -> int:
        for sig in self.stops:
            signal.signal(sig, self._on_signal)
        lease.add_lost_callback(lambda _lease: self.wake.set())
        if self.term_on_revoke:
            lease.add_revoke_callback(self._on_revoke)
        try:
            child = self._spawn(lease)
        except FileNotFoundError:
            note(f"cannot run {self.command[0]!r}: command not found")
            return EX_NOT_FOUND
        except OSError as error:
            note(f"cannot run {self.command[0]!r}: {error.strerror or error}")
            return EX_CANNOT_EXECUTE
        self.child = child
        with signals_blocked(STOP_SIGNALS):  # the waiter thread must not take our signals
            waiter = threading.Thread(
                target=self._wait_child, args=(lease,), name="zklocks-child", daemon=True
            )
            waiter.start()
        return self._supervise(lease, child)

    def _on_revoke(self, _lease: object) -> None:
        self.revoked.set()
        self.wake.set()

    def _wait_child(self, lease: Lease) -> None:
        """Reap the command, then judge at once whether the lease still held when it had
        exited. Only this thread may ask: while it waits it holds the Popen's lock, and
        ``poll()`` from the main thread then answers "still running" even for a command
        that has exited (it had said "stopping it with SIGTERM" of a finished command).
        Judged after a pause (SIGSTOP, a suspended VM) that saw both the exit and the
        loss's instant, it reads lost: which came first is then unknowable, and a command
        that may have run unprotected is not reported as a success."""
        assert self.child is not None
        self.child.wait()
        self.lost_when_exited = lease.lost
        self.exited.set()
        self.wake.set()

    def _supervise(self, lease: Lease, child: subprocess.Popen[bytes]) -> int:
        kill_at: float | None = None  # when to SIGKILL, once a stop was asked for
        ours: int | None = None  # the exit status we decided, overriding the command's
        lost_seen = False
        revoke_seen = False
        terminal_stops = 0  # Ctrl-C (or Ctrl-\\) typed while the command runs in front
        hint_at: float | None = None  # when to say that a second Ctrl-C kills the command
        while True:
            self.wake.clear()
            if self._has_exited(child):
                self.exited.wait()  # the waiter reaps it now, and judges the lease
                break
            while self.received:
                sig = self.received.pop(0)
                if self.foreground and sig in TERMINAL_SIGNALS:
                    # The terminal sent it to the command as well; typed again while
                    # the command still runs, it escalates as a forwarded one does.
                    terminal_stops += 1
                    if terminal_stops == 1:
                        hint_at = time.monotonic() + STILL_RUNNING_HINT
                    else:
                        note("interrupted again: the command is still running; sending SIGKILL")
                        self._signal(signal.SIGKILL)
                        ours = 128 + sig
                    continue
                if kill_at is not None:
                    self._signal(signal.SIGKILL)  # asked twice: no more patience
                    continue
                self._signal(signal.Signals(sig))
                ours = 128 + sig
                kill_at = time.monotonic() + self.kill_after
            if not lost_seen and lease.lost:
                lost_seen = True
                ours = EX_LOST
                note(
                    f"lost {self.held} while the command ran "
                    f"({lease.lost_reason}); stopping it with SIGTERM"
                )
                self._signal(signal.SIGTERM)
                if kill_at is None:
                    kill_at = time.monotonic() + self.kill_after
            if not revoke_seen and not lost_seen and self.revoked.is_set():
                revoke_seen = True  # a request: SIGTERM once, no SIGKILL, its own status
                note(f"asked to let go of {self.held} (revoke); stopping the command with SIGTERM")
                self._signal(signal.SIGTERM)
            if kill_at is not None and time.monotonic() >= kill_at:
                note(
                    f"the command did not exit {self.kill_after:g} s after SIGTERM; sending SIGKILL"
                )
                self._signal(signal.SIGKILL)
                kill_at = None
            if hint_at is not None and terminal_stops == 1 and time.monotonic() >= hint_at:
                note("the command is still running; press Ctrl-C again to kill it")
                hint_at = None
            wait = CHECK_INTERVAL
            for due in (kill_at, hint_at):
                if due is not None:
                    wait = max(0.0, min(wait, due - time.monotonic()))
            self.wake.wait(wait)
        returncode = child.returncode
        status = self.status = 128 - returncode if returncode < 0 else returncode
        if lost_seen:
            note(f"the command exited with status {status}; exiting {EX_LOST} (lock lost)")
        elif self.lost_when_exited:
            lost_seen = True
            ours = EX_LOST
            note(
                f"lost {self.held} while the command ran "
                f"({lease.lost_reason}); it exited with status {status} meanwhile"
            )
        if lost_seen and not self.foreground:
            self._signal(signal.SIGKILL)  # no straggler of its group may go on unprotected
        return status if ours is None else ours

    def _has_exited(self, child: subprocess.Popen[bytes]) -> bool:
        """Has the command exited (reaped or not)? Asked without reaping it (WNOWAIT), so
        it never races the waiter thread, which holds the Popen's lock while it waits.
        After a pause both may wake in any order: this is what keeps a command that
        exited meanwhile from being "stopped" as if it still ran."""
        if self.exited.is_set():
            return True
        try:
            found = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True  # reaped by the waiter already
        return found is not None

    def lost_afterwards(self, lease: Lease) -> bool:
        """After the command exited with the lease held, before we release it: is the
        lease lost now? Then say so; the command's status stands, since its work was
        done under the lock (a loss after it exited cannot have let anyone in on it)."""
        if self.status is None or self.lost_when_exited or not lease.lost:
            return False
        note(
            f"lost {self.held} after the command exited ({lease.lost_reason}); "
            f"exiting with its status, {self.status}"
        )
        return True

    def _signal(self, sig: signal.Signals) -> None:
        child = self.child
        if child is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.foreground:
                if child.poll() is None:
                    child.send_signal(sig)
            else:
                os.killpg(child.pid, sig)  # its own group: grandchildren too
