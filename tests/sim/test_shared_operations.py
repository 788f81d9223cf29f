"""The simulated clients take and release their locks through the real clients'
operations (``zklocks._frontend.operations``), so what the simulator explores is what
``Lock`` and ``MultiLock`` do: one deadline for a whole multi-lock, and a lease past its
``max_hold`` taken back apart from its holder."""

from __future__ import annotations

from collections import defaultdict

from zklocks.sim.client import short
from zklocks.sim.runner import Options, plan_for
from zklocks.sim.scheduler import Simulation


def _trace(sim: Simulation) -> list[tuple[float, str, str]]:
    """(virtual time, who, what) of each line of a traced run."""
    assert sim.trace is not None
    lines = []
    for line in sim.trace:
        _step, now, who, text = line.split(None, 3)
        lines.append((float(now), who, text))
    return lines


def test_a_multi_lock_takes_every_part_under_one_deadline() -> None:
    """``acquire_all``: the second part waits only for what is left of the first's
    deadline, and not at all once it passed (the simulator's own copy of the multi-lock
    gave each part the whole timeout again)."""
    options = Options(families=("multi",))
    second_parts = 0
    for seed in range(60):
        sim = Simulation(seed, plan_for(seed, options), families=options.families, trace=True)
        sim.run()
        held: dict[str, int] = defaultdict(int)
        first: dict[str, str] = {}
        for now, who, text in _trace(sim):
            if text.startswith("acquire lock blocking="):
                deadline = text.rsplit("deadline=", 1)[1]
                if held[who] != 1:
                    first[who] = deadline
                elif deadline == "never":  # the second part of the cycle's multi-lock
                    assert first[who] == "never", (seed, who, text)
                else:  # what is left of the first one (nothing, once it passed)
                    left = max(float(first[who]), now)
                    assert abs(float(deadline) - left) < 1e-3, (seed, who, text)
                    second_parts += 1
            elif text.startswith("acquire lock: granted"):
                held[who] += 1
            elif text.startswith("releases"):
                held[who] -= 1
    assert second_parts >= 20


def test_past_max_hold_the_node_is_taken_back_before_the_holder_lets_go() -> None:
    """The bound makes the lease lost and deletes its node apart from the holder, who
    holds on (as a hung one would): the next contender is granted before its release."""
    options = Options(operations=True)
    overtaken = 0
    for seed in range(300):
        sim = Simulation(seed, plan_for(seed, options), operations=True, trace=True)
        if sim.scenario.family not in ("mutex", "single"):
            continue
        sim.run()
        releases = [
            (now, who, text.split()[1])
            for now, who, text in _trace(sim)
            if text.startswith("releases ")
        ]
        for holding in sim.grants:
            if "max_hold" not in (holding.lease._lost_reason or ""):
                continue
            let_go = min(
                now
                for now, who, name in releases
                if who == f"c{holding.client}"
                and name == short(holding.node)
                and now >= holding.granted_at
            )
            overtaken += any(
                holding.granted_at < later.granted_at < let_go
                for later in sim.grants
                if later.client != holding.client
            )
    assert overtaken >= 5
