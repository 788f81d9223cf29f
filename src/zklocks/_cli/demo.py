"""``zklocks demo``: four lock scenarios, played live by real processes.

Four scenarios, each with worker processes (``demo_worker``) that have their own
ZooKeeper sessions, on a lock path of their own under a fresh root:

1. **fair lock**: five workers queue; each release wakes exactly the next
   one, because each waiter watches only its predecessor (the watch chain).
2. **read/write**: the timeline R1 R2 R3 W4 W5 R6 W7, step by step.
3. **crash**: the holder is SIGKILLed; ZooKeeper deletes its ephemeral
   node once the session times out, and the next worker proceeds.
4. **pause**: the holder is SIGSTOPped past its session timeout; another
   worker takes the lock with a higher fencing token and writes; on SIGCONT the paused
   worker learns from its lease that it lost the lock, and its stale write is refused
   by a fenced store.

The story is ordered by events only (worker reports, ZooKeeper watches), never by
sleeping, and every expectation is checked: a failed one makes the demo exit 70, so
``make demo`` doubles as an end-to-end smoke test. Every worker is stopped and every
node removed before it exits, on success, failure or Ctrl-C.

This module is the command: options, the local server, the watchdog, the clean-up. The
stories are in ``demo_scenarios``, what they play on (queue views, waits on watches) in
``demo_stage``, the workers in ``demo_crew`` and ``demo_worker``, the output in
``demo_screen``.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import click
from rich.console import Console

from zklocks import Client, LockError
from zklocks._cli.common import (
    CONTEXT,
    EX_SOFTWARE,
    EX_UNAVAILABLE,
    connect,
    connect_timeout_option,
    fail,
    hosts_option,
    seconds_option,
)
from zklocks._cli.demo_crew import ScenarioFailed
from zklocks._cli.demo_scenarios import BY_KEY, SCENARIOS, DemoScenario
from zklocks._cli.demo_screen import LiveScreen, PlainScreen, Screen
from zklocks._cli.demo_stage import Stage
from zklocks._cli.options import Seconds
from zklocks.server import ServerError, ServerSetupError, ZooKeeperServer

TICK_MS = 200  # the local server's tick: sessions from 0.4 s are allowed
# On a terminal each step of the story stays on screen this long before the next one, so
# a person can follow it (unpaced, the whole demo is over in about 2 s). Not a wait for
# anything: steps still wait for events. Piped or --plain, nobody watches: no pace.
TERMINAL_PACE = 0.6

EPILOG = """\b
Examples:
  zklocks demo                          # starts its own ZooKeeper, then plays all four
  zklocks demo --scenario pause         # just one scenario
  zklocks demo --hosts 127.0.0.1:2181   # on a running ZooKeeper (it must allow sessions
                                        # of --session-timeout; see `zklocks server`)
  zklocks demo > demo.log               # plain lines when not on a terminal
  zklocks demo --pace 2                 # slower: 2 s per step (0: as fast as it goes)

\b
Exit status: 0 when every scenario behaved as the story says, 70 when one did not,
69 when no ZooKeeper could be started or reached, 130 on Ctrl-C.
"""


# -- the command ------------------------------------------------------------------------------


@click.command(
    context_settings=CONTEXT, epilog=EPILOG, short_help="Watch the locks work, live (< 1 min)."
)
@hosts_option(
    envvar=None,
    default=None,
    help_text="Use this ZooKeeper instead of starting a local one.",
)
@connect_timeout_option()
@click.option(
    "--scenario",
    "chosen",
    multiple=True,
    type=click.Choice([s.key for s in SCENARIOS]),
    help="Play only this scenario (repeat for several). Default: all four.",
)
@seconds_option(
    "--session-timeout",
    minimum=0.4,
    default=1.0,
    help_text="Session timeout of the workers that crash or pause.",
)
@click.option("--plain", is_flag=True, help="Plain lines even on a terminal.")
@click.option(
    "--pace",
    type=Seconds(0),
    metavar="SECONDS",
    help=f"Hold each step on screen this long. Default: {TERMINAL_PACE:g} on a terminal, "
    "0 when piped or --plain.",
)
@seconds_option(
    "--time-limit",
    minimum=1,
    default=180.0,
    help_text="Stop and fail (exit 70) if the demo is still running after this long.",
)
def demo(
    hosts: str | None,
    connect_timeout: float,
    chosen: tuple[str, ...],
    session_timeout: float,
    plain: bool,
    pace: float | None,
    time_limit: float,
) -> None:
    """Watch the locks work: fair queueing, readers sharing, a crashed holder released by
    ZooKeeper, a paused holder fenced off. Real processes, real ZooKeeper, under a minute.

    Starts its own ZooKeeper unless --hosts is given (ZKLOCKS_HOSTS is not used, so that
    the demo never touches a server you did not name).
    """
    console = Console(highlight=False)
    live = console.is_terminal and not plain
    screen: Screen = LiveScreen(console) if live else PlainScreen()
    scenarios = [BY_KEY[key] for key in dict.fromkeys(chosen)] or list(SCENARIOS)
    watchdog = _Watchdog(time_limit)
    try:
        status = _play(
            screen,
            scenarios,
            hosts,
            connect_timeout,
            session_timeout,
            pace=resolve_pace(pace, live),
        )
    except KeyboardInterrupt:
        screen.close()
        if watchdog.fired:
            click.echo(
                f"zklocks: the demo was still running after {time_limit:g} s, so it was "
                "stopped; its workers, nodes and server are gone",
                err=True,
            )
            sys.exit(EX_SOFTWARE)
        click.echo("zklocks: demo interrupted; its workers, nodes and server are gone", err=True)
        sys.exit(130)
    finally:
        watchdog.cancel()
        screen.close()
    sys.exit(status)


def resolve_pace(pace: float | None, live: bool) -> float:
    """--pace as given, else a pace someone can follow on a terminal and none elsewhere."""
    if pace is not None:
        return pace
    return TERMINAL_PACE if live else 0.0


class _Watchdog:
    """A smoke test must not hang CI: after ``limit`` seconds, interrupt the main thread
    as Ctrl-C would (a real SIGINT to it, so even a blocking wait is cut short).

    Started with SIGINT ignored (``nohup``, a script's ``&``, some CI runners), a Ctrl-C
    from outside stays without effect, but ours must still land: a handler that raises
    only once the watchdog has fired stands in for the ignored disposition.
    """

    def __init__(self, limit: float) -> None:
        self.fired = False
        self._main = threading.main_thread().ident
        self._ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        if self._ignored:
            signal.signal(signal.SIGINT, self._only_ours)
        self._timer = threading.Timer(limit, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _only_ours(self, signum: int, frame: FrameType | None) -> None:
        if self.fired:
            raise KeyboardInterrupt

    def _fire(self) -> None:
        self.fired = True
        if self._main is not None:
            signal.pthread_kill(self._main, signal.SIGINT)

    def cancel(self) -> None:
        self._timer.cancel()
        if self._ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _play(
    screen: Screen,
    scenarios: Sequence[DemoScenario],
    hosts: str | None,
    connect_timeout: float,
    session_timeout: float,
    *,
    pace: float = 0.0,
) -> int:
    started = time.monotonic()
    server: ZooKeeperServer | None = None
    client: Client | None = None
    stage: Stage | None = None
    root = f"/zklocks-demo-{uuid.uuid4().hex[:8]}"
    try:
        if hosts is None:
            server, hosts = _start_server(screen)
        else:
            screen.intro([f"ZooKeeper: {hosts} (given with --hosts)"])
        client = connect(hosts, connect_timeout)
        screen.intro(
            [
                f"Lock paths under {root}; every worker is a process of its own.",
                "Nothing below waits by sleeping: each step waits for a worker's report "
                "or a ZooKeeper watch"
                + (f" (then stays on screen {pace:g} s: --pace)." if pace else "."),
            ]
        )
        with tempfile.TemporaryDirectory(prefix="zklocks-demo-") as workdir:
            stage = Stage(client, hosts, root, screen, session_timeout, Path(workdir), pace)
            results = [_one(stage, n, len(scenarios), s) for n, s in enumerate(scenarios, 1)]
        left = client.delete_tree(root)
        failed = sum(1 for ok, _, _ in results if not ok) + (1 if left else 0)
        cleanup = "every worker stopped, " + (
            "no node left behind" if not left else f"nodes left behind: {', '.join(left)}"
        )
        verdict = (
            f"all {len(results)} scenarios behaved as the story says"
            if not failed
            else f"{failed} of {len(results)} checks FAILED"
        )
        elapsed = time.monotonic() - started
        screen.summary(results, f"{verdict} ({elapsed:.1f} s); {cleanup}")
        return EX_SOFTWARE if failed else 0
    finally:
        # Also on Ctrl-C or an error: no worker, node or server may outlive the demo.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if stage is not None and stage.crew is not None:
                stage.crew.stop_all(grace=2.0)
            if client is not None:
                with contextlib.suppress(LockError):
                    client.delete_tree(root)
                client.stop()
            if server is not None:
                server.stop()
        finally:
            signal.signal(signal.SIGINT, previous)


def _start_server(screen: Screen) -> tuple[ZooKeeperServer, str]:
    screen.intro([f"Starting a local ZooKeeper (tickTime {TICK_MS} ms: sessions from 0.4 s)..."])
    began = time.monotonic()
    server = ZooKeeperServer(tick_time=TICK_MS, max_session_timeout=60_000)
    try:
        server.start()
    except ServerSetupError as error:
        hint = "  Or use a ZooKeeper that runs elsewhere: zklocks demo --hosts host:port"
        fail(f"{error}\n{hint}", EX_UNAVAILABLE)
    except ServerError as error:
        fail(f"could not start ZooKeeper: {error}", EX_UNAVAILABLE)
    screen.intro(
        [f"ZooKeeper: serving on {server.hosts}, ready in {time.monotonic() - began:.1f} s"]
    )
    return server, server.hosts


def _one(
    stage: Stage, number: int, total: int, scenario: DemoScenario
) -> tuple[bool, str, list[str]]:
    stage.screen.begin(number, total, scenario.title, scenario.story)
    crew = stage.new_crew()
    ok = True
    try:
        details = scenario.play(stage, crew)
    except ScenarioFailed as error:
        ok, details = False, [str(error)]
    except LockError as error:
        ok, details = False, [f"{type(error).__name__}: {error}"]
    finally:
        crew.stop_all()
        stage.crew = None
    path = f"{stage.root}/{scenario.key}"
    with contextlib.suppress(LockError):
        left = stage.client.contenders(path)
        if left:
            ok = False
            details.append("left behind: " + ", ".join(c.node for c in left))
    stage.screen.end(ok, scenario.title, details)
    return ok, scenario.title, details
