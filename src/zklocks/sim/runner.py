"""Run, replay, explore and shrink seeded schedules.

``run(seed)`` draws the fault plan from the seed; ``replay(seed, plan)`` runs with the
plan given. A failure raises ``SimulationFailure`` whose message has the seed, the plan
as text, the command that replays it and the last steps of the run's trace (the run is
replayed once more with tracing on to print them; it must fail the same way, or the
simulator itself is not deterministic and says so).
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from zklocks._core import kinds as _kinds
from zklocks._core.strategies import Rules
from zklocks._frontend.operations import AcquireFn
from zklocks.sim.actions import Outcome
from zklocks.sim.faults import FaultPlan, format_plan, operator_plan, random_plan
from zklocks.sim.invariants import Violation
from zklocks.sim.operator import RevokeFn
from zklocks.sim.scenario import FAMILIES, scenario_for
from zklocks.sim.scheduler import DecideFn, Simulation

TRACE_TAIL = 40


@dataclass(frozen=True, slots=True)
class Options:
    """How schedules are drawn (what a replay needs besides the seed and the plan).

    ``families``: the lock kinds scenarios are drawn from (a seed's scenario depends on
    it, so a replay must use the same). ``layout``: whose queue the contenders stand in
    (``zklocks._core.layouts``): ours, Curator's or kazoo's. ``operations``: what an
    operator does too: leases bounded by ``max_hold`` and revokes in the fault plans.
    """

    families: tuple[str, ...] = FAMILIES
    layout: str = "zklocks"
    operations: bool = False
    lock_delay: float | None = None  # every queued contender's, and the invariants check it

    def command_line(self) -> str:
        words = ""
        if self.families != FAMILIES:
            words += f" --families {','.join(self.families)}"
        if self.layout != "zklocks":
            words += f" --layout {self.layout}"
        if self.operations:
            words += " --operations"
        if self.lock_delay is not None:
            words += f" --lock-delay {self.lock_delay}"
        return words


DEFAULT = Options()


@dataclass(frozen=True, slots=True)
class KnownIssue:
    """A violation explore() counts instead of raising (a reported, not yet fixed bug)."""

    name: str
    pattern: str  # a regex searched in the violation message
    family: str | None = None  # only in schedules of this family

    def matches(self, family: str, violation: str) -> bool:
        if self.family is not None and self.family != family:
            return False
        return re.search(self.pattern, violation) is not None


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    # Violations the simulator has found and the flow does not fix yet, each with its
    # seed and plan in docs/simulation.md ("Findings"). Remove an entry when its fix
    # lands: tests/sim/test_findings.py then keeps the case as a regression test.
)
"""Violations explore() counts instead of raising, until the flow is fixed."""


class SimulationFailure(AssertionError):
    """A schedule broke an invariant. ``seed``, ``plan`` and ``options`` replay it."""

    def __init__(
        self,
        seed: int,
        plan: FaultPlan,
        violation: str,
        trace: list[str],
        *,
        options: Options = DEFAULT,
        original_plan: FaultPlan | None = None,
        schedules_run: int = 1,
    ) -> None:
        self.seed = seed
        self.plan = plan
        self.options = options
        self.violation = violation
        self.trace = trace
        self.schedules_run = schedules_run  # how many schedules it took to find it
        text = format_plan(plan)
        lines = [
            f"invariant violated in seed {seed}: {violation}",
            f"fault plan: {text or '(none)'}",
        ]
        if original_plan is not None and original_plan != plan:
            lines.append(f"(shrunk from: {format_plan(original_plan)})")
        lines += [
            f"replay: python -m zklocks.sim --seed {seed} --plan '{text}'"
            f"{options.command_line()} --trace",
            f"    or: zklocks.sim.replay({seed}, zklocks.sim.parse_plan({text!r}))",
            f"last {min(len(trace), TRACE_TAIL)} of {len(trace)} steps:",
            *("  " + line for line in trace[-TRACE_TAIL:]),
        ]
        super().__init__("\n".join(lines))


@dataclass(slots=True)
class RunResult:
    """What one schedule did."""

    seed: int
    plan: FaultPlan
    family: str
    steps: int
    virtual_time: float
    outcomes: list[Outcome]
    fault_kinds: Counter[str]
    trace: list[str] | None

    @property
    def faults_fired(self) -> int:
        return sum(self.fault_kinds.values())


@dataclass(slots=True)
class ExploreStats:
    """Totals over many schedules."""

    schedules: int = 0
    steps: int = 0
    seconds: float = 0.0
    with_faults: int = 0  # schedules in which at least one fault actually fired
    faults_fired: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    known: Counter[str] = field(default_factory=Counter)  # KnownIssue name -> schedules
    known_seeds: dict[str, int] = field(default_factory=dict)  # first seed of each

    @property
    def per_second(self) -> float:
        return self.schedules / self.seconds if self.seconds else 0.0

    def add(self, result: RunResult) -> None:
        self.schedules += 1
        self.steps += result.steps
        self.with_faults += result.faults_fired > 0
        self.faults_fired.update(result.fault_kinds)
        self.outcomes.update(o.result for o in result.outcomes)
        self.families[result.family] += 1

    def merge(self, other: ExploreStats) -> None:
        self.schedules += other.schedules
        self.steps += other.steps
        self.with_faults += other.with_faults
        self.faults_fired.update(other.faults_fired)
        self.outcomes.update(other.outcomes)
        self.families.update(other.families)
        self.known.update(other.known)
        for name, seed in other.known_seeds.items():
            self.known_seeds.setdefault(name, seed)

    def summary(self) -> str:
        lines = [
            f"{self.schedules} schedules ({self.with_faults} with faults that fired), "
            f"{self.steps} steps in {self.seconds:.1f}s: {self.per_second:.0f} schedules/s",
            f"  families: {dict(sorted(self.families.items()))}",
            f"  faults fired: {dict(sorted(self.faults_fired.items()))}",
            f"  acquire outcomes: {dict(sorted(self.outcomes.items()))}",
        ]
        if self.known:
            lines.append(
                "  known issues met: "
                + ", ".join(
                    f"{n} x{c} (first seed {self.known_seeds[n]})"
                    for n, c in sorted(self.known.items())
                )
            )
        return "\n".join(lines)


def plan_for(seed: int, options: Options = DEFAULT) -> FaultPlan:
    """The fault plan a seed draws when none is given."""
    scenario = scenario_for(
        seed, families=options.families, layout=options.layout, operations=options.operations
    )
    rng = random.Random(seed * 4 + 1)
    plan = random_plan(
        rng,
        clients=len(scenario.clients),
        session_timeout=min(c.session_timeout for c in scenario.clients),
        horizon=scenario.horizon,
    )
    if options.operations:  # drawn apart: the seed's other faults stay as they were
        plan += operator_plan(random.Random(f"operator-{seed}"), horizon=scenario.horizon)
    return plan


def replay(
    seed: int,
    plan: FaultPlan,
    *,
    decide: DecideFn | None = None,
    trace: bool = False,
    options: Options = DEFAULT,
    acquire: AcquireFn | None = None,
    revoke: RevokeFn | None = None,
) -> RunResult:
    """Run one schedule exactly as ``seed`` and ``plan`` say; ``SimulationFailure`` if bad.

    ``decide``, ``acquire`` and ``revoke`` replace the strategy, the acquire flow or the
    revoke flow (to plant a bug).
    """
    try:
        return _run(seed, plan, decide, trace, options, acquire, revoke)
    except Violation as violation:
        traced = getattr(violation, "trace", None)
        if traced is None:  # run it again, tracing, for the failure's message
            try:
                _run(seed, plan, decide, True, options, acquire, revoke)
            except Violation as again:
                if str(again) != str(violation):
                    raise AssertionError(
                        f"seed {seed} did not replay deterministically: first {violation}, "
                        f"then {again}"
                    ) from violation
                traced = getattr(again, "trace", [])
            else:
                raise AssertionError(
                    f"seed {seed} did not replay deterministically: {violation}, then passed"
                ) from violation
        raise SimulationFailure(seed, plan, str(violation), traced, options=options) from None


def run(
    seed: int,
    *,
    decide: DecideFn | None = None,
    trace: bool = False,
    options: Options = DEFAULT,
    acquire: AcquireFn | None = None,
    revoke: RevokeFn | None = None,
) -> RunResult:
    """One schedule with the fault plan the seed draws."""
    plan = plan_for(seed, options)
    return replay(
        seed, plan, decide=decide, trace=trace, options=options, acquire=acquire, revoke=revoke
    )


def _run(
    seed: int,
    plan: FaultPlan,
    decide: DecideFn | None,
    trace: bool,
    options: Options,
    acquire: AcquireFn | None = None,
    revoke: RevokeFn | None = None,
) -> RunResult:
    rules = None if decide is None else Rules.everywhere("planted", decide, _kinds.NAMES)
    sim = Simulation(
        seed,
        plan,
        trace=trace,
        families=options.families,
        acquire=acquire,
        rules=rules,
        layout=options.layout,
        operations=options.operations,
        revoke=revoke,
        lock_delay=options.lock_delay,
    )
    try:
        sim.run()
    except Violation as violation:
        violation.family = sim.scenario.family  # type: ignore[attr-defined]
        if sim.trace is not None:
            violation.trace = sim.trace  # type: ignore[attr-defined]
        raise
    return RunResult(
        seed=seed,
        plan=plan,
        family=sim.scenario.family,
        steps=sim.steps,
        virtual_time=sim.now,
        outcomes=sim.outcomes,
        fault_kinds=Counter(type(f).__name__ for f in sim.faults_fired),
        trace=sim.trace,
    )


def shrink(
    seed: int,
    plan: FaultPlan,
    *,
    decide: DecideFn | None = None,
    options: Options = DEFAULT,
    acquire: AcquireFn | None = None,
    revoke: RevokeFn | None = None,
) -> FaultPlan:
    """A smallest sub-plan (dropping faults one at a time) that still fails the same way.

    "The same way": the violation's kind (its text up to the first colon) is unchanged.
    """
    try:
        _run(seed, plan, decide, False, options, acquire, revoke)
    except Violation as violation:
        kind = _kind(str(violation))
    else:
        return plan
    current = plan
    changed = True
    while changed and current:
        changed = False
        for index in range(len(current)):
            candidate = current[:index] + current[index + 1 :]
            try:
                _run(seed, candidate, decide, False, options, acquire, revoke)
            except Violation as violation:
                if _kind(str(violation)) == kind:
                    current = candidate
                    changed = True
                    break
    return current


def _kind(violation: str) -> str:
    return re.sub(r"c\d+", "c#", violation.split(":", 1)[0])


def explore(
    seeds: Iterable[int],
    *,
    decide: DecideFn | None = None,
    options: Options = DEFAULT,
    known: Sequence[KnownIssue] = (),
    shrink_failures: bool = True,
    acquire: AcquireFn | None = None,
    revoke: RevokeFn | None = None,
) -> ExploreStats:
    """Run every seed; the first failure raises ``SimulationFailure`` (plan shrunk).

    A violation that matches one of ``known`` is counted in ``stats.known`` instead.
    """
    stats = ExploreStats()
    started = time.perf_counter()
    for seed in seeds:
        plan = plan_for(seed, options)
        try:
            result = _run(seed, plan, decide, False, options, acquire, revoke)
        except Violation as violation:
            family = getattr(violation, "family", "")
            issue = next((k for k in known if k.matches(family, str(violation))), None)
            if issue is not None:
                stats.schedules += 1
                stats.known[issue.name] += 1
                stats.known_seeds.setdefault(issue.name, seed)
                continue
            small = (
                shrink(seed, plan, decide=decide, options=options, acquire=acquire, revoke=revoke)
                if shrink_failures
                else plan
            )
            try:
                replay(seed, small, decide=decide, options=options, acquire=acquire, revoke=revoke)
            except SimulationFailure as failure:
                raise SimulationFailure(
                    seed,
                    small,
                    failure.violation,
                    failure.trace,
                    options=options,
                    original_plan=plan,
                    schedules_run=stats.schedules + 1,
                ) from None
            raise AssertionError(f"seed {seed}: the shrunk plan no longer fails") from None
        stats.add(result)
    stats.seconds = time.perf_counter() - started
    return stats


def explore_chunk(
    job: tuple[int, int, Options, tuple[KnownIssue, ...]],
) -> tuple[ExploreStats, str | None]:
    """``explore`` over ``range(first, first + count)`` for a worker process: its stats,
    and the failure's text if one was found."""
    quiet_simulated_clients()
    first, count, options, known = job
    try:
        return explore(range(first, first + count), options=options, known=known), None
    except SimulationFailure as failure:
        stats = ExploreStats()
        stats.schedules = failure.schedules_run
        return stats, str(failure)


def quiet_simulated_clients() -> None:
    """Silence the flows' warnings in this process (for ``python -m zklocks.sim``).

    The simulated clients run the real flows, which warn when another client deletes a
    waiter's node: over thousands of schedules with ``DeleteNode`` faults that is the
    plan at work, not news (the trace shows each deletion).
    """
    logging.getLogger("zklocks.lock").setLevel(logging.ERROR)
