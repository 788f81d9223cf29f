"""What one seed asks of the simulator: which lock, how many clients, what each one does.

A scenario is drawn from the seed alone, so ``replay(seed, plan)`` rebuilds it exactly;
the fault plan is drawn from the seed too unless one is given.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from zklocks._core.kinds import PERMIT

FAMILIES = ("mutex", "single", "rw", "semaphore", "mixed")
"""mutex: fair lock; single: the one-node lock (``fair=False``); rw: readers and
writers on one path; semaphore: leases of N permits; mixed: fair and one-node locks on
one path (a misuse that must still never give two holders)."""

MIXED_SHARE = 0.3
"""How many mutex and single scenarios become mixed ones (when "mixed" is drawn from).

Drawn after everything else of a scenario, so that adding the family left every other
seed's scenario as it was."""

MORE_FAMILIES = ("election", "multi")
"""Drawn only when asked for (``families=``), so the default seeds keep their scenarios:
election: candidates campaign and resign (at most one leader; no candidate stuck);
multi: each cycle takes two fair locks as one multi-lock, given in a random order."""

LAYOUT_FAMILIES = {"curator": ("mutex", "rw", "semaphore"), "kazoo": ("mutex", "rw")}
"""What a peer's layout is explored with: what the peer has (Curator's semaphore is
SemaphoreV2's two stages), on a lock path whose counter is far from the wrap (the peers
compare sequence suffixes as text, which is right only before it)."""

LOCK_PATH = "/locks/x"
MULTI_PATHS = (LOCK_PATH, "/locks/y")


@dataclass(frozen=True, slots=True)
class Cycle:
    """One acquire-hold-release round of a client."""

    kind: str  # lock | read | write | lease
    blocking: bool
    timeout: float | None  # seconds, or None: wait for ever
    hold: float  # seconds held before release
    think: float  # seconds before the acquire call
    fair: bool = True  # False: the one-node lock (family single, or a mixed scenario)
    given: tuple[int, ...] = ()  # multi: the order the locks are given in (indices of paths)
    max_hold: float | None = None  # operations: the lease's bound (``max_hold=``)


@dataclass(frozen=True, slots=True)
class ClientScript:
    session_timeout: float
    cycles: tuple[Cycle, ...]


@dataclass(frozen=True, slots=True)
class Scenario:
    family: str
    path: str
    permits: int | None
    clients: tuple[ClientScript, ...]
    start_cversion: int | None  # lock path pre-made (persistent) with this child counter
    shuffle_children: bool  # getChildren answers in a shuffled order, as a HashSet would
    paths: tuple[str, ...] = ()  # multi: every lock path (``path`` is the first)
    layout: str = "zklocks"  # whose queue every contender stands in
    operations: bool = False  # holders listen for revokes; some leases have a max_hold
    lock_delay: float | None = None  # every queued contender's ``lock_delay=``

    @property
    def lock_paths(self) -> tuple[str, ...]:
        """Every path a client of this scenario locks."""
        return self.paths or (self.path,)

    @property
    def fair(self) -> bool:
        """Are any of its contenders queued (not all one-node locks)?"""
        return self.family != "single"

    @property
    def horizon(self) -> float:
        """Roughly how long the busy part of a schedule lasts (for fault times)."""
        busiest = max(sum(c.hold + c.think for c in s.cycles) for s in self.clients)
        return 0.2 + busiest * len(self.clients) / 2


def scenario_for(
    seed: int,
    *,
    families: tuple[str, ...] = FAMILIES,
    layout: str = "zklocks",
    operations: bool = False,
    lock_delay: float | None = None,
) -> Scenario:
    """The scenario of a seed (``families`` narrows the lock kinds drawn; a peer's
    ``layout`` keeps only its ``LAYOUT_FAMILIES``; ``operations`` gives about half the
    cycles a ``max_hold`` shorter than some holds, drawn apart so every other draw of
    the seed stays as it was)."""
    if layout != "zklocks":
        families = tuple(f for f in families if f in LAYOUT_FAMILIES[layout]) or ("mutex",)
    rng = random.Random(seed * 4)
    drawn = tuple(f for f in families if f != "mixed") or ("mutex",)
    family = drawn[rng.randrange(len(drawn))]
    permits = rng.choice((1, 2, 2, 3)) if family == "semaphore" else None
    count = rng.choice((2, 3, 3, 4, 4, 5))
    start_cversion = None
    if rng.random() < 0.2:
        start_cversion = (1 << 31) - rng.randint(1, 6)  # sequence numbers wrap negative
    clients = []
    for _ in range(count):
        timeout = rng.choice((0.5, 1.0, 2.0))
        cycles = tuple(_cycle(rng, family) for _ in range(rng.choice((1, 2, 2, 3))))
        clients.append(ClientScript(timeout, cycles))
    shuffle_children = rng.random() < 0.5
    if "mixed" in families and family in ("mutex", "single"):
        only_mixed = "mutex" not in families and "single" not in families
        if only_mixed or rng.random() < MIXED_SHARE:
            family = "mixed"
            clients = _mix(rng, clients)
    if operations and family not in MORE_FAMILIES:
        clients = _bound_holds(random.Random(f"operations-{seed}"), clients)
    return Scenario(
        family=family,
        path=LOCK_PATH,
        permits=permits,
        clients=tuple(clients),
        start_cversion=start_cversion if layout == "zklocks" else None,
        shuffle_children=shuffle_children,
        paths=MULTI_PATHS if family == "multi" else (),
        layout=layout,
        operations=operations,
        lock_delay=lock_delay if layout == "zklocks" else None,
    )


def _bound_holds(rng: random.Random, clients: list[ClientScript]) -> list[ClientScript]:
    bounded = []
    for script in clients:
        cycles = tuple(
            dataclasses.replace(cycle, max_hold=round(rng.uniform(0.02, 0.4), 3))
            if rng.random() < 0.5
            else cycle
            for cycle in script.cycles
        )
        bounded.append(dataclasses.replace(script, cycles=cycles))
    return bounded


def _mix(rng: random.Random, clients: list[ClientScript]) -> list[ClientScript]:
    """Client 0 takes the fair lock, client 1 the one-node lock, the others either."""
    mixed = []
    for index, script in enumerate(clients):
        fair = index == 0 or (index > 1 and rng.random() < 0.5)
        cycles = tuple(dataclasses.replace(cycle, fair=fair) for cycle in script.cycles)
        mixed.append(dataclasses.replace(script, cycles=cycles))
    return mixed


def _cycle(rng: random.Random, family: str) -> Cycle:
    if family == "rw":
        kind = "write" if rng.random() < 0.5 else "read"
    elif family == "semaphore":
        kind = PERMIT.name
    elif family == "election":
        kind = "elect"
    else:
        kind = "lock"
    blocking = rng.random() < 0.85
    timeout = None if not blocking or rng.random() < 0.5 else round(rng.uniform(0.0, 0.8), 3)
    return Cycle(
        kind=kind,
        blocking=blocking,
        timeout=timeout,
        hold=round(rng.uniform(0.0, 0.3), 3),
        think=round(rng.uniform(0.0, 0.15), 3),
        given=(((0, 1) if rng.random() < 0.5 else (1, 0)) if family == "multi" else ()),
    )
