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
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import click
from rich.console import Console

from zklocks._cli.common import (
    CONTEXT,
    EX_SOFTWARE,
    EX_UNAVAILABLE,
    connect,
    connect_timeout_option,
    fail,
    hosts_option,
)
from zklocks._cli.demo_crew import Crew, Event, ScenarioFailed
from zklocks._cli.demo_screen import LiveScreen, PlainScreen, Row, Screen
from zklocks._cli.inspect import Place, arm_change_watch, delete_tree, line_up
from zklocks._cli.options import Seconds
from zklocks._cli.sanitise import clean
from zklocks._core.contenders import list_contenders
from zklocks._core.errors import LockError
from zklocks._sync.client import Client
from zklocks.fencing import FencedStore
from zklocks.server import ServerError, ServerSetupError, ZooKeeperServer

TICK_MS = 200  # the local server's tick: sessions from 0.4 s are allowed
WAIT = 30.0  # the longest any single step may take before the scenario fails
TICK = 0.1  # how often the live status line is redrawn while waiting
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


# -- the stage: what every scenario uses ------------------------------------------------


@dataclass
class Stage:
    client: Client
    hosts: str
    root: str
    screen: Screen
    session_timeout: float  # for the workers that crash or pause
    workdir: Path
    pace: float = 0.0  # seconds each narrated step stays on screen before the next
    crew: Crew | None = None
    owners: dict[str, str] = field(default_factory=dict)  # node -> worker name, as seen

    def new_crew(self) -> Crew:
        self.crew = Crew(self.hosts, on_event=self._on_event)
        return self.crew

    def _on_event(self, event: Event) -> None:
        if event.kind == "woke":
            node = str(event.data.get("node", ""))
            owner = self.owners.get(node)
            whose = f"{owner}'s node" if owner else f"node {node.rsplit('/', 1)[-1]}"
            self.screen.say(f"{event.worker} woke up: {whose}, which it watched, was deleted")

    def say(self, text: str) -> None:
        """Narrate a step, and hold it on screen for the pace before going on."""
        self.screen.say(text)
        if self.pace > 0:
            if self.crew is not None:
                self.crew.pump()
            time.sleep(self.pace)  # for the viewer's eyes, not to let something happen

    def look(self, path: str) -> list[Place]:
        """List the lock's contenders and show them."""
        places = line_up(self.client._run(list_contenders(path)))
        self._show(places)
        return places

    def _show(self, places: Sequence[Place]) -> None:
        crew = self.crew
        if crew is not None:
            crew.pump()
        names = {p.contender.node: p.contender.identifier for p in places}
        self.owners.update(names)
        rows = []
        for p in places:
            name = p.contender.identifier
            worker = crew.workers.get(name) if crew is not None else None
            rows.append(
                Row(
                    place=p.place,
                    name=clean(name),
                    kind=p.contender.kind,
                    holding=p.holder,
                    token=p.contender.token,
                    watches=tuple(
                        clean(names.get(node, node.rsplit("/", 1)[1])) for node in p.waits_for
                    ),
                    wakeups=worker.wakeups if worker is not None else 0,
                )
            )
        self.screen.queue(rows)

    def watch_until(
        self,
        path: str,
        done: Callable[[list[Place]], bool],
        what: str,
        status: Callable[[], str] | None = None,
    ) -> list[Place]:
        """Redraw the queue on every ZooKeeper change until ``done`` holds (or fail)."""
        deadline = time.monotonic() + WAIT
        while True:
            changed = arm_change_watch(self.client, path)
            places = self.look(path)
            if done(places):
                return places
            while not changed.wait(TICK):
                if self.crew is not None:
                    self.crew.pump()
                if status is not None:
                    self.screen.status(status())
                if time.monotonic() > deadline:
                    raise ScenarioFailed(f"{what} did not happen within {WAIT:g} s")

    def join(self, crew: Crew, name: str, path: str) -> list[Place]:
        """Tell ``name`` to acquire and wait until its node is in the queue."""
        crew.workers[name].send("acquire")
        return self.watch_until(
            path,
            lambda places: any(p.contender.identifier == name for p in places),
            f"{name} joining the queue",
        )


def _place_of(places: Sequence[Place], name: str) -> Place:
    for place in places:
        if place.contender.identifier == name:
            return place
    raise ScenarioFailed(f"{name} is not in the queue")


def _watched(places: Sequence[Place], name: str) -> list[str]:
    names = {p.contender.node: p.contender.identifier for p in places}
    return [names.get(node, node) for node in _place_of(places, name).waits_for]


def _rising(tokens: Sequence[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(tokens))


# -- 1. fair lock -------------------------------------------------------------------------


def play_fair(stage: Stage, crew: Crew) -> list[str]:
    path = f"{stage.root}/fair"
    names = [f"w{i}" for i in range(1, 6)]
    for name in names:
        crew.spawn(name, path)
    for name in names:
        crew.expect(name, "ready")
    stage.say(f"{len(names)} worker processes connected, each with its own session")
    order: list[str] = []
    tokens: list[int] = []
    for index, name in enumerate(names):
        places = stage.join(crew, name, path)
        if index == 0:
            event = crew.expect(name, "acquired")
            order.append(name)
            tokens.append(int(event.data["token"]))
            stage.say(f"{name} queues first and holds the lock (token {tokens[0]})")
            continue
        watched = _watched(places, name)
        if watched != [names[index - 1]]:
            raise ScenarioFailed(f"{name} watches {watched}, not its predecessor")
        crew.expect(name, "watching")
        stage.say(f"{name} queues and watches only {names[index - 1]}'s node")
    stage.say("watch chain: " + " → ".join(reversed(names)) + "  (one watch per waiter)")
    for holder, successor in itertools.pairwise(names):
        crew.workers[holder].send("release")
        crew.expect(holder, "released")
        event = crew.expect(successor, "acquired", forbid=("acquired",))
        order.append(successor)
        tokens.append(int(event.data["token"]))
        asleep = [n for n in names if n not in order]
        stage.look(path)
        stage.say(
            f"{holder} released → {successor} holds (token {tokens[-1]}); "
            + (f"still asleep: {' '.join(asleep)}" if asleep else "nobody left waiting")
        )
    crew.workers[names[-1]].send("release")
    crew.expect(names[-1], "released")
    stage.look(path)
    wakeups = {name: crew.workers[name].wakeups for name in names}
    total = sum(wakeups.values())
    releases = len(names) - 1  # releases with someone waiting
    if order != names:
        raise ScenarioFailed(f"acquired in the order {order}, not the queue order {names}")
    if not _rising(tokens):
        raise ScenarioFailed(f"fencing tokens did not rise: {tokens}")
    if wakeups[names[0]] != 0 or any(wakeups[n] != 1 for n in names[1:]):
        raise ScenarioFailed(f"wake-ups per worker {wakeups}; expected exactly one per waiter")
    return [
        f"acquired in queue order: {' '.join(order)}",
        "tokens " + " < ".join(map(str, tokens)),
        f"{releases} releases woke {total} waiters, one each: "
        + ", ".join(f"{n} {wakeups[n]}" for n in names[1:]),
    ]


# -- 2. read/write: readers share, writers wait their turn ----------------------------------

RW_PLAN = (
    ("R1", "read"),
    ("R2", "read"),
    ("R3", "read"),
    ("W4", "write"),
    ("W5", "write"),
    ("R6", "read"),
    ("W7", "write"),
)
# Who releases at each step, and who then holds (None: nobody new may).
RW_STEPS = (("R1", None), ("R2", None), ("R3", "W4"), ("W4", "W5"), ("W5", "R6"), ("R6", "W7"))
RW_CHAIN = {"W4": ["R3"], "W5": ["W4"], "R6": ["W5"], "W7": ["R6"]}


def play_read_write(stage: Stage, crew: Crew) -> list[str]:
    path = f"{stage.root}/rw"
    for name, kind in RW_PLAN:
        crew.spawn(name, path, kind=kind)
    for name, _ in RW_PLAN:
        crew.expect(name, "ready")
    stage.say("7 workers connected: R = wants to read, W = wants to write")
    order: list[str] = []
    tokens: list[int] = []
    places: list[Place] = []
    for name, kind in RW_PLAN:
        places = stage.join(crew, name, path)
        if name in ("R1", "R2", "R3"):
            event = crew.expect(name, "acquired", forbid=("acquired",))
            order.append(name)
            tokens.append(int(event.data["token"]))
            stage.say(f"{name} queues and reads at once: no writer ahead of it")
        else:
            watched = _watched(places, name)
            if watched != RW_CHAIN[name]:
                raise ScenarioFailed(f"{name} watches {watched}, expected {RW_CHAIN[name]}")
            why = "the nearest writer before it" if kind == "read" else "the node just before it"
            crew.expect(name, "watching")
            stage.say(f"{name} queues and watches {watched[0]}: {why}")
    stage.say("R1 R2 R3 read together; W4 W5 R6 W7 wait, each watching one node")
    stage.say("(had every writer watched the smallest node instead,")
    stage.say(" so R1's release alone would wake W4, W5 and W7: the herd effect)")
    before = 0
    for releaser, gainer in RW_STEPS:
        crew.workers[releaser].send("release")
        crew.expect(releaser, "released")
        if gainer is None:
            stage.look(path)
            woke = sum(w.wakeups for w in crew.workers.values()) - before
            stage.say(f"{releaser} released; W4 still waits for R3 ({woke} woke)")
            continue
        event = crew.expect(gainer, "acquired", forbid=("acquired",))
        order.append(gainer)
        tokens.append(int(event.data["token"]))
        stage.look(path)
        woke = sum(w.wakeups for w in crew.workers.values()) - before
        before += woke
        stage.say(
            f"{releaser} released → {gainer} woke and holds (token {tokens[-1]}); {woke} woke"
        )
    crew.workers["W7"].send("release")
    crew.expect("W7", "released")
    stage.look(path)
    expected_order = ["R1", "R2", "R3", "W4", "W5", "R6", "W7"]
    wakeups = {name: crew.workers[name].wakeups for name, _ in RW_PLAN}
    if order != expected_order:
        raise ScenarioFailed(f"held in the order {order}, expected {expected_order}")
    if not _rising(tokens):
        raise ScenarioFailed(f"fencing tokens did not rise: {tokens}")
    expected_wakeups = {name: (1 if name in RW_CHAIN else 0) for name, _ in RW_PLAN}
    if wakeups != expected_wakeups:
        raise ScenarioFailed(f"wake-ups {wakeups}, expected {expected_wakeups}")
    return [
        "held in the order: R1+R2+R3 together, then W4, W5, R6, W7",
        "tokens " + " < ".join(map(str, tokens)),
        f"7 releases woke {sum(wakeups.values())} waiters, one each: "
        + ", ".join(f"{n} {wakeups[n]}" for n in RW_CHAIN),
    ]


# -- 3. crash --------------------------------------------------------------------------------


def _granted_timeout(crew: Crew, name: str, asked: float) -> float:
    """Wait for ``name`` to be ready; the session timeout the server granted it."""
    return float(crew.expect(name, "ready").data.get("session_timeout", asked))


def _await_expiry(
    stage: Stage, path: str, node: str, name: str, since: float, timeout: float
) -> float:
    """Wait (on watches) until ZooKeeper deletes ``node``; seconds since ``since``."""
    stage.watch_until(
        path,
        lambda places: all(p.contender.node != node for p in places),
        f"ZooKeeper deleting {name}'s node",
        status=lambda: (
            f"{name}'s node is still there, {time.monotonic() - since:.1f} s on "
            f"(its session timeout is {timeout:g} s)"
        ),
    )
    stage.screen.status("")
    return time.monotonic() - since


def play_crash(stage: Stage, crew: Crew) -> list[str]:
    path = f"{stage.root}/crash"
    for name in ("w1", "w2"):
        crew.spawn(name, path, session_timeout=stage.session_timeout)
    timeout = _granted_timeout(crew, "w1", stage.session_timeout)  # w1's, as the server has it
    _granted_timeout(crew, "w2", stage.session_timeout)
    stage.join(crew, "w1", path)
    first = int(crew.expect("w1", "acquired").data["token"])
    places = stage.join(crew, "w2", path)
    node = _place_of(places, "w1").contender.node
    crew.expect("w2", "watching")
    stage.say(f"w1 holds (token {first}); w2 waits, watching w1's node")
    killed_at = time.monotonic()
    crew.signal("w1", signal.SIGKILL)
    stage.say(f"SIGKILL w1 (pid {crew.workers['w1'].pid}): it can release nothing now")
    stage.say(f"its node stays until ZooKeeper expires its session ({timeout:g} s of silence)")
    gone = _await_expiry(stage, path, node, "w1", killed_at, timeout)
    stage.say(f"ZooKeeper expired w1's session and deleted its node, {gone:.2f} s after the kill")
    event = crew.expect("w2", "acquired", forbid=("acquired",))
    second = int(event.data["token"])
    took_over = event.at - killed_at
    stage.look(path)
    stage.say(f"w2 woke and holds the lock (token {second}), {took_over:.2f} s after the kill")
    if gone < timeout / 2:
        raise ScenarioFailed(
            f"w1's node went {gone:.2f} s after the kill: before its session "
            f"could have timed out ({timeout:g} s)"
        )
    if not second > first:
        raise ScenarioFailed(f"w2's token {second} is not above w1's {first}")
    if crew.workers["w2"].wakeups != 1:
        raise ScenarioFailed(f"w2 woke {crew.workers['w2'].wakeups} times, expected once")
    return [
        f"w1 SIGKILLed while holding; ZooKeeper deleted its node {gone:.2f} s later "
        f"(session timeout {timeout:g} s)",
        f"w2 took over {took_over:.2f} s after the kill; tokens {first} < {second}",
    ]


# -- 4. pause and fencing -------------------------------------------------------------------


def play_pause(stage: Stage, crew: Crew) -> list[str]:
    path = f"{stage.root}/pause"
    store_path = stage.workdir / "fenced.sqlite"
    store = FencedStore(store_path)
    for name in ("w1", "w2"):
        crew.spawn(name, path, session_timeout=stage.session_timeout, store=str(store_path))
    timeout = _granted_timeout(crew, "w1", stage.session_timeout)
    _granted_timeout(crew, "w2", stage.session_timeout)
    stage.join(crew, "w1", path)
    old = int(crew.expect("w1", "acquired").data["token"])
    crew.workers["w1"].send("write balance 100")
    crew.expect("w1", "wrote")
    stage.say(f"w1 holds (token {old}) and writes balance=100 to the fenced store: accepted")
    places = stage.join(crew, "w2", path)
    node = _place_of(places, "w1").contender.node
    crew.expect("w2", "watching")
    stage.say("w2 waits, watching w1's node")
    paused_at = time.monotonic()
    crew.signal("w1", signal.SIGSTOP)
    stage.say("SIGSTOP w1 mid-work (think: a long GC pause); it still believes it holds the lock")
    gone = _await_expiry(stage, path, node, "w1", paused_at, timeout)
    stage.say(f"ZooKeeper expired w1's session and deleted its node, {gone:.2f} s into the pause")
    new = int(crew.expect("w2", "acquired", forbid=("acquired",)).data["token"])
    stage.look(path)
    crew.workers["w2"].send("write balance 200")
    crew.expect("w2", "wrote")
    stage.say(f"w2 holds (token {new}) and writes balance=200: accepted")
    crew.signal("w1", signal.SIGCONT)
    stage.say("SIGCONT w1: it resumes where it stopped and goes on with its work")
    crew.workers["w1"].send("resume balance 150")
    lease = crew.expect("w1", "lease")
    lost, reason = bool(lease.data["lost"]), lease.data.get("reason")
    stage.say(f"w1 asks its lease: {'lost' if lost else 'still held'} ({reason})")
    outcome = crew.expect("w1", ("refused", "wrote"))
    if outcome.kind == "wrote":
        raise ScenarioFailed(f"the fenced store accepted w1's stale write (token {old})")
    highest = int(outcome.data["highest"])
    stage.say(
        f"w1 writes balance=150 with its old token {old}: refused, the store has seen {highest}"
    )
    kept = store.read("balance")
    if not lost:
        raise ScenarioFailed("w1's lease did not say it was lost after the pause")
    if not new > old:
        raise ScenarioFailed(f"w2's token {new} is not above w1's {old}")
    if highest != new or kept != ("200", new):
        raise ScenarioFailed(f"the store holds {kept}, expected balance 200 from token {new}")
    return [
        f"w1 paused {gone:.2f} s until ZooKeeper expired its session; w2 took over, "
        f"tokens {old} < {new}",
        f"after SIGCONT w1's lease said lost ({reason})",
        f"w1's stale write (token {old}) was refused; the store kept balance=200 from {new}",
    ]


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    story: tuple[str, ...]
    play: Callable[[Stage, Crew], list[str]]


SCENARIOS = (
    Scenario(
        "fair",
        "fair lock",
        (
            "Every contender creates an ephemeral sequential node; the smallest",
            "holds, and every other one watches only the node just before it.",
            "So a release wakes exactly one waiter: the next in line.",
        ),
        play_fair,
    ),
    Scenario(
        "rw",
        "read/write",
        (
            "R1 R2 R3 W4 W5 R6 W7 queue in that order. Readers share; a reader",
            "waits for the nearest writer before it, a writer for the node just before it.",
        ),
        play_read_write,
    ),
    Scenario(
        "crash",
        "crash",
        (
            "Why ephemeral nodes: the holder dies without releasing;",
            "ZooKeeper deletes its node when its session times out, and the next proceeds.",
        ),
        play_crash,
    ),
    Scenario(
        "pause",
        "pause",
        (
            "A holder paused past its session timeout loses the",
            "lock without knowing. Its lease tells it; fencing tokens stop its late write.",
        ),
        play_pause,
    ),
)
BY_KEY = {scenario.key: scenario for scenario in SCENARIOS}


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
@click.option(
    "--session-timeout",
    type=Seconds(0.4),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="Session timeout of the workers that crash or pause.",
)
@click.option("--plain", is_flag=True, help="Plain lines even on a terminal.")
@click.option(
    "--pace",
    type=Seconds(0),
    metavar="SECONDS",
    help=f"Hold each step on screen this long. Default: {TERMINAL_PACE:g} on a terminal, "
    "0 when piped or --plain.",
)
@click.option(
    "--time-limit",
    type=Seconds(1),
    default=180.0,
    show_default=True,
    metavar="SECONDS",
    help="Stop and fail (exit 70) if the demo is still running after this long.",
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
    scenarios: Sequence[Scenario],
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
        left = client._run(delete_tree(root))
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
                    client._run(delete_tree(root))
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


def _one(stage: Stage, number: int, total: int, scenario: Scenario) -> tuple[bool, str, list[str]]:
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
        left = stage.client._run(list_contenders(path))
        if left:
            ok = False
            details.append("left behind: " + ", ".join(c.node for c in left))
    stage.screen.end(ok, scenario.title, details)
    return ok, scenario.title, details
