"""``zklocks run``: run a command while holding a lock, like ``flock(1)`` for a cluster.

Theory of operation
-------------------
1. **Connect** with SIGINT/SIGTERM/SIGHUP/SIGQUIT blocked, so the client's threads
   (which inherit the mask) never take them: every signal lands on the main thread,
   where a handler can act at once.
2. **Wait** for the lock in the main thread. A signal raises ``_Interrupted`` inside the
   acquire flow, which deletes our node on its way out (every way out does); then we
   close the session and exit 128+signal (130 for Ctrl-C). Not acquired in time: 75
   (or ``-E N``), said on stderr unless ``-q``, as cron jobs want under ``flock(1)``.
3. **Run** the command with ``ZKLOCKS_TOKEN``/``ZKLOCKS_NODE``/``ZKLOCKS_PATH`` set. One
   event wakes the main loop: the command exited (a waiter thread), a signal arrived
   (the handler), or the lease was lost (its lost-callback, on the client's event
   thread, only sets the event). Nothing polls ZooKeeper; the loop also wakes once a
   second to apply the lease's clock rule, which needs no request.
4. **Stop** the command on loss or on a signal: SIGTERM (or the signal itself), SIGKILL
   after ``--kill-after``. ``--max-hold`` is a loss like any other (the library marks
   the lease lost at the bound and deletes our node, so the next waiter goes on); a
   revoke request (``zklocks revoke``) sends SIGTERM only, unless ``--on-revoke ignore``:
   the command is asked to finish, and its own exit status is ours. We never release
   while the command may still run: the lock protects its work, not ours.
5. **Release**, close the session (the server drops any node of ours at once), exit with
   the command's status, 76 if the lease was lost while it ran, 128+signal if we were
   signalled. A lease lost only after the command exited is said, and the command's
   status stands: its work was done under the lock.

A stop signal that we were started with ignored (``nohup``'s SIGHUP, the SIGINT and
SIGQUIT of a script's ``&``) stays ignored, for us and for the command, as under a shell.

Steps 3 and 4, with where the command runs and how signals reach it, are in
``zklocks._cli.supervise``. With no command, the lock is held until a stop signal
(``zklocks._cli.hold``).
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import click

from zklocks import AccessDenied, Client, Lease, LeaseUnkeepable, Lock, LockError, LockTimeout
from zklocks._cli.common import (
    CONTEXT,
    ELECT,
    EX_CANNOT_EXECUTE,
    EX_CONFIG,
    EX_NOPERM,
    EX_NOT_ACQUIRED,
    EX_NOT_FOUND,
    LOCK,
    PERMIT,
    READ,
    WRITE,
    check_path,
    command_verbosity,
    connect,
    connection_options,
    fail,
    not_ignored,
    seconds,
    signals_blocked,
    verbose_option,
)
from zklocks._cli.hold import hold
from zklocks._cli.options import TEXT, Seconds
from zklocks._cli.run_options import (
    command_line,
    identifier_option,
    kill_after_option,
    lock_delay_option,
    non_blocking_option,
    session_timeout_option,
    shell_command_option,
    timeout_option,
)
from zklocks._cli.sanitise import cannot, clean
from zklocks._cli.security import Security, security_options
from zklocks._cli.supervise import STOP_SIGNALS, Supervisor, note

EPILOG = """\b
Examples:
  zklocks run /locks/backup -- ./backup.sh --full
  zklocks run /locks/report --timeout 30 -- make report
  zklocks run /locks/deploy --non-blocking -- ./deploy.sh || echo "busy, skipped"
  zklocks run /locks/cron -n -q -E 0 -- ./job.sh    # cron: a busy lock is a quiet skip
  zklocks run /locks/db --read  -- ./dump.sh        # shared with other readers
  zklocks run /locks/db --write -- ./migrate.sh     # alone
  zklocks run /locks/api --semaphore 3 -- ./call-api.sh
  zklocks run /locks/x -c 'echo "token $ZKLOCKS_TOKEN, node $ZKLOCKS_NODE"'
  zklocks run /locks/maintenance                    # hold it until Ctrl-C
  zklocks run /locks/job --max-hold 600 -- ./job.sh # stopped (exit 76) after 10 min

\b
The command sees ZKLOCKS_TOKEN (the fencing token: pass it to what the lock protects),
ZKLOCKS_NODE (our contender node) and ZKLOCKS_PATH.

\b
Exit status: the command's own; 75 not acquired (--timeout, --non-blocking; or
-E N); 76 the lock was lost while the command ran (it was stopped; --max-hold passing
is a loss; lost only after it exited: its own status); 130 interrupted (Ctrl-C);
69 ZooKeeper unreachable; 78 no lease can be kept with this session on these servers
(the message names the fix, e.g. a longer --session-timeout; the command is not run);
126/127 the command could not be run; 2 usage error.
With no command: 0 when released on Ctrl-C, 76 when the lock was lost.
"""


class _Interrupted(KeyboardInterrupt):
    """A stop signal while we wait for the lock (raised into the acquire flow)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted(signum)


@dataclass(frozen=True)
class RunOptions:
    path: str
    command: tuple[str, ...]
    kind: str  # a kind's name (zklocks._core.kinds): lock | read | write | permit | elect
    permits: int | None
    timeout: float | None
    non_blocking: bool
    identifier: str | None
    kill_after: float
    session_timeout: float
    verbose: bool
    hosts: str
    connect_timeout: float
    security: Security = field(default_factory=Security)
    layout: str = "zklocks"
    max_hold: float | None = None  # the lease is lost (the command stopped) after this
    lock_delay: float | None = None  # after an abnormal loss ahead, wait this before running
    on_revoke: str = "term"  # term: SIGTERM the command when asked to let go; or ignore
    quiet: bool = False  # say nothing when not acquired
    conflict_exit_code: int = EX_NOT_ACQUIRED  # the status when not acquired

    @property
    def held(self) -> str:
        """What the lease gives, in words: the lock on PATH, or leadership of PATH."""
        elected = self.kind == ELECT.name
        return f"leadership of {self.path}" if elected else f"the lock on {self.path}"


def exit_unless_runnable(command: tuple[str, ...]) -> None:
    """Exit 127/126 now when ``command`` cannot be run: found out before queueing, not
    after waiting for the lock (or to be elected)."""
    missing = _cannot_start(command[0])
    if missing is not None:
        note(f"cannot run {clean(command[0])!r}: {missing[1]}")
        sys.exit(missing[0])


@click.command(
    context_settings=CONTEXT, epilog=EPILOG, short_help="Run a command while holding a lock."
)
@click.argument("path", type=TEXT, callback=check_path)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARGS]...]")
@shell_command_option("Run TEXT with `sh -c` instead of COMMAND (flock's -c).")
@click.option("--read", is_flag=True, help="Take the shared (read) side.")
@click.option("--write", is_flag=True, help="Take the exclusive (write) side.")
@click.option(
    "--semaphore",
    "permits",
    type=click.IntRange(1, 10**9 - 1),
    metavar="N",
    help="Let up to N commands run at once.",
)
@click.option(
    "--layout",
    type=click.Choice(["zklocks", "curator", "kazoo"]),
    default="zklocks",
    show_default=True,
    help="Whose queue to stand in: ours, Apache Curator's (InterProcessMutex, "
    "ReadWriteLock, SemaphoreV2) or kazoo's (Lock, ReadLock/WriteLock). See docs/interop.md.",
)
@timeout_option("Give up (exit 75) when not acquired in time. Default: wait as long as it takes.")
@non_blocking_option("Give up at once (exit 75) when someone else holds it.")
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Say nothing when not acquired (--non-blocking, --timeout): a cron job's skip.",
)
@click.option(
    "-E",
    "--conflict-exit-code",
    type=click.IntRange(0, 255),
    default=EX_NOT_ACQUIRED,
    show_default=True,
    metavar="N",
    help="The exit status when not acquired (--non-blocking, --timeout), as flock(1)'s -E.",
)
@identifier_option("How `zklocks status` names us. Default: the command line.")
@kill_after_option
@click.option(
    "--max-hold",
    type=Seconds(0.001),
    metavar="SECONDS",
    help="Hold at most this long: then the lock is released for the next waiter and the "
    "command stopped as on a loss (SIGTERM, SIGKILL after --kill-after; exit 76).",
)
@lock_delay_option
@click.option(
    "--on-revoke",
    type=click.Choice(["term", "ignore"]),
    default="term",
    show_default=True,
    help="When `zklocks revoke PATH` asks us to let go: SIGTERM the command, or ignore it.",
)
@session_timeout_option("If this process dies, the lock is freed this long after.")
@verbose_option(
    "Say when the lock is acquired and released, with the library's lock and connection "
    "events (the same as `zklocks -v run`); -vv: everything."
)
@connection_options
@security_options(acl=True)
def run(
    path: str,
    command: tuple[str, ...],
    shell_command: str | None,
    read: bool,
    write: bool,
    permits: int | None,
    layout: str,
    timeout: float | None,
    non_blocking: bool,
    quiet: bool,
    conflict_exit_code: int,
    identifier: str | None,
    kill_after: float,
    max_hold: float | None,
    lock_delay: float | None,
    on_revoke: str,
    session_timeout: float,
    verbosity: int,
    hosts: str,
    connect_timeout: float,
    security: Security,
) -> None:
    """Run COMMAND while holding the lock at PATH; release it when COMMAND exits.

    Waits in a fair (first come, first served) queue. If the lock is lost while the
    command runs (ZooKeeper expired our session), the command is stopped: SIGTERM,
    then SIGKILL after --kill-after. With no COMMAND (and no -c), holds the lock,
    prints its token and node, and releases it on Ctrl-C (exit 0).
    """
    command = command_line(command, shell_command)
    if read and write:
        raise click.UsageError("--read and --write exclude each other: pick one side")
    mode = READ.name if read else WRITE.name if write else None
    if timeout == math.inf:
        timeout = None  # no limit: wait as long as it takes
    if mode is not None and permits is not None:
        raise click.UsageError("--semaphore cannot be combined with --read or --write")
    if non_blocking and timeout is not None:
        raise click.UsageError("--non-blocking and --timeout exclude each other")
    if layout == "kazoo" and permits is not None:
        raise click.UsageError("--layout kazoo has no semaphore (kazoo's is not offered)")
    if command:  # no command: we hold the lock ourselves
        exit_unless_runnable(command)
    kind = PERMIT.name if permits is not None else mode or LOCK.name
    options = RunOptions(
        path=path,
        command=command,
        kind=kind,
        permits=permits,
        timeout=timeout,
        non_blocking=non_blocking or timeout == 0,
        identifier=identifier or (_describe(command) if command else "zklocks run (holding)"),
        kill_after=kill_after,
        session_timeout=session_timeout,
        verbose=command_verbosity(verbosity) > 0,
        hosts=hosts,
        connect_timeout=connect_timeout,
        security=security,
        layout=layout,
        max_hold=max_hold,
        lock_delay=lock_delay,
        on_revoke=on_revoke,
        quiet=quiet,
        conflict_exit_code=conflict_exit_code,
    )
    sys.exit(execute(options))


def _cannot_start(program: str) -> tuple[int, str] | None:
    """(exit status, why) when ``program`` cannot be run, as a shell would find it."""
    if os.sep in program:
        if not os.path.exists(program):
            return EX_NOT_FOUND, "no such file"
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            return EX_CANNOT_EXECUTE, "not an executable file"
        return None
    if shutil.which(program) is None:
        return EX_NOT_FOUND, "command not found"
    return None


def _describe(command: tuple[str, ...]) -> str:
    text = shlex.join(command)
    printable = "".join(ch if ch.isprintable() else "?" for ch in text)
    return printable if len(printable) <= 200 else printable[:199] + "…"


def execute(options: RunOptions) -> int:
    """Everything after argument parsing; returns the exit status."""
    stops = not_ignored(STOP_SIGNALS)  # nohup's SIGHUP, `&`'s SIGINT: left ignored
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in stops}
    client: Client | None = None
    try:
        with signals_blocked(STOP_SIGNALS):  # the client's threads inherit the mask
            client = connect(
                options.hosts,
                options.connect_timeout,
                session_timeout=options.session_timeout,
                security=options.security,
            )
        return _Run(options, client, stops).run()
    except _Interrupted as interrupt:
        if client is not None:
            note(f"interrupted ({interrupt}) while waiting for {options.path}; left the queue")
        return 128 + interrupt.signum
    finally:
        for sig in STOP_SIGNALS:  # a second Ctrl-C must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        if client is not None:
            client.stop()  # closes the session: the server deletes any node of ours now
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Run:
    """Take the lock, hand it to the command (or hold it), release it."""

    def __init__(
        self, options: RunOptions, client: Client, stops: tuple[signal.Signals, ...]
    ) -> None:
        self.options = options
        self.client = client
        self.stops = stops  # the stop signals we act on (not those ignored at start)
        # Built before the wait, as it judges whether a terminal's foreground is ours.
        self.supervisor = Supervisor(
            options.command,
            path=options.path,
            held=options.held,
            kill_after=options.kill_after,
            term_on_revoke=options.on_revoke == "term",
            stops=stops,
        )

    def _lock(self) -> Lock:
        o = self.options
        if o.kind == PERMIT.name:
            assert o.permits is not None
            return self.client.semaphore(
                o.path,
                permits=o.permits,
                identifier=o.identifier,
                layout=o.layout,
                max_hold=o.max_hold,
                lock_delay=o.lock_delay,
            )
        if o.kind == ELECT.name:  # zklocks elect: an election is a lock kind
            return self.client.election(o.path, identifier=o.identifier, lock_delay=o.lock_delay)
        options: dict[str, Any] = {
            "identifier": o.identifier,
            "layout": o.layout,
            "max_hold": o.max_hold,
            "lock_delay": o.lock_delay,
        }
        if o.kind in (READ.name, WRITE.name):
            rw = self.client.read_write_lock(o.path, **options)
            return rw.read if o.kind == READ.name else rw.write
        return self.client.lock(o.path, **options)

    def run(self) -> int:
        lock = self._lock()
        started = time.monotonic()
        try:
            if self.options.non_blocking:
                lease = lock.try_acquire()
            else:
                lease = lock.acquire(self.options.timeout)
        except LockTimeout:
            lease = None
        except AccessDenied as error:
            fail(cannot("take", self.options.path, error), EX_NOPERM)
        except LeaseUnkeepable as error:  # before the command runs, not seconds into it
            fail(f"cannot take {error}", EX_CONFIG)
        except LockError as error:
            fail(cannot("take", self.options.path, error))
        if lease is None:
            if not self.options.quiet:
                note(self._not_acquired(lock))
            return self.options.conflict_exit_code
        if self.options.verbose:
            waited = seconds(time.monotonic() - started)
            note(f"acquired {lease.node} (token {lease.token}) after {waited}")
        try:
            if self.options.command:
                status = self.supervisor.run(lease)
                self.supervisor.lost_afterwards(lease)  # said; the status stands
            else:
                status = hold(self.options.path, lease, self.stops, held=self.options.held)
        finally:
            self._release(lock, lease)
        return status

    def _not_acquired(self, lock: Lock) -> str:
        o = self.options
        outcome = "elected" if o.kind == ELECT.name else "acquired"
        why = (
            f"not {outcome} (--non-blocking)"
            if o.non_blocking
            else f"not {outcome} within {o.timeout:g} s"
        )
        try:
            holders = [c for c in lock.contenders() if c.holder]
        except LockError:
            holders = []
        if not holders:
            return f"{o.path}: {why}"
        who = "; ".join(
            f"{clean(c.identifier)} (pid {c.pid} on {clean(c.host)}, token {c.token})"
            for c in holders[:3]
        )
        more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
        return f"{o.path}: {why}; held by {who}{more}"

    def _release(self, lock: Lock, lease: Lease) -> None:
        if not self.client.connected:
            # Cut off: a delete would wait for the connection. Closing the session ends
            # it (or the server expires it): either way our node goes. A lost lease was
            # said already, with why ("the session expired": nothing is left to free).
            if not lease.lost:
                path = self.options.path
                note(f"not connected to ZooKeeper; {path} is freed when our session ends")
            return
        try:
            lock.release()
        except LockError as error:
            note(f"could not release {self.options.path} cleanly ({error}); closing the session")
            return
        if self.options.verbose:
            note(f"released {self.options.path}")
