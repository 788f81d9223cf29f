"""The demo's four scenarios: each plays its story on a stage and checks it.

A scenario spawns its workers, tells them what to do step by step, narrates each step
and, at the end, checks what the story promises (queue order, rising fencing tokens,
exactly one wake-up per waiter, a refused stale write); a broken promise raises
``ScenarioFailed``. ``SCENARIOS`` is the list the command offers (``--scenario``), in
the order it plays them. Kept out of the command so that adding or reading a story does
not mean reading the server set-up, the watchdog and the clean-up around it.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from zklocks._cli.common import Place
from zklocks._cli.demo_crew import Crew, ScenarioFailed
from zklocks._cli.demo_stage import Stage
from zklocks.fencing import FencedStore


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
class DemoScenario:
    """One scene ``zklocks demo`` plays (not the simulator's ``zklocks.sim.Scenario``)."""

    key: str
    title: str
    story: tuple[str, ...]
    play: Callable[[Stage, Crew], list[str]]


SCENARIOS = (
    DemoScenario(
        "fair",
        "fair lock",
        (
            "Every contender creates an ephemeral sequential node; the smallest",
            "holds, and every other one watches only the node just before it.",
            "So a release wakes exactly one waiter: the next in line.",
        ),
        play_fair,
    ),
    DemoScenario(
        "rw",
        "read/write",
        (
            "R1 R2 R3 W4 W5 R6 W7 queue in that order. Readers share; a reader",
            "waits for the nearest writer before it, a writer for the node just before it.",
        ),
        play_read_write,
    ),
    DemoScenario(
        "crash",
        "crash",
        (
            "Why ephemeral nodes: the holder dies without releasing;",
            "ZooKeeper deletes its node when its session times out, and the next proceeds.",
        ),
        play_crash,
    ),
    DemoScenario(
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
