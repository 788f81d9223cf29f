"""One seed and one fault plan replay one run exactly; failures say how to replay them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zklocks._core.strategies import Refused
from zklocks.sim import (
    DelayWatch,
    DropRequest,
    ExpireSession,
    Interrupt,
    Options,
    Pause,
    ReorderWatch,
    SimulationFailure,
    SweepContainers,
    explore,
    format_plan,
    parse_plan,
    plan_for,
    replay,
    run,
)
from zklocks.sim.faults import random_plan


def test_same_seed_and_plan_give_the_same_trace() -> None:
    for seed in range(40):
        plan = plan_for(seed)
        first = replay(seed, plan, trace=True)
        second = replay(seed, plan, trace=True)
        assert first.trace == second.trace
        assert first.trace  # something happened
        assert [o.result for o in first.outcomes] == [o.result for o in second.outcomes]


def test_different_seeds_give_different_schedules() -> None:
    traces = {tuple(replay(seed, (), trace=True).trace or ()) for seed in range(20)}
    assert len(traces) == 20


def test_a_plan_changes_the_run_and_its_faults_fire() -> None:
    seed = 7
    calm = replay(seed, (), trace=True)
    stormy = replay(seed, (DropRequest(0, 0, applied=True, outage=0.05),), trace=True)
    assert stormy.fault_kinds["DropRequest"] == 1
    assert calm.trace != stormy.trace
    assert any("reply lost" in line for line in stormy.trace or [])


def test_replay_is_exact_across_processes_and_hash_seeds() -> None:
    """Nothing may depend on set order of strings (PYTHONHASHSEED) or on the wall clock."""
    outputs = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run(
            [sys.executable, "-m", "zklocks.sim", "--seed", "31", "--trace"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].count("\n") > 20


def test_plans_round_trip_through_text() -> None:
    plan = (
        DropRequest(1, 4, applied=True, outage=0.30000000000000004),
        ExpireSession(0, 2.5),
        DelayWatch(2, 1, 0.4),
        ReorderWatch(2, 3),
        Pause(1, 1.0, 12.0),
        Interrupt(0, 5, sent=False),
        SweepContainers(0.75),
    )
    text = format_plan(plan)
    assert parse_plan(text) == plan
    assert parse_plan("") == ()
    assert text.startswith("drop:client=1,request=4,applied=1,outage=0.30000000000000004; ")
    with pytest.raises(ValueError, match="unknown fault kind"):
        parse_plan("meteor:client=1")
    with pytest.raises(ValueError, match="no field"):
        parse_plan("drop:client=1,colour=2")


def test_random_plans_are_drawn_from_their_seed() -> None:
    import random

    one = random_plan(random.Random(5), clients=3, session_timeout=1.0, horizon=2.0)
    two = random_plan(random.Random(5), clients=3, session_timeout=1.0, horizon=2.0)
    assert one == two
    assert plan_for(123) == plan_for(123)
    kinds = {type(f) for seed in range(300) for f in plan_for(seed)}
    assert len(kinds) == 8  # every kind of fault, DeleteNode included


def test_a_failure_names_seed_plan_and_replay_command() -> None:
    """A failing schedule (here: a planted kazoo #649 reader) prints how to replay it."""
    from test_planted_bugs import read_watches_later_writer

    with pytest.raises(SimulationFailure) as caught:
        explore(range(1000), decide=read_watches_later_writer)
    failure = caught.value
    seed, text = failure.seed, str(failure)
    plan = format_plan(failure.plan)
    assert text.startswith(f"invariant violated in seed {seed}: ")
    assert f"fault plan: {plan or '(none)'}" in text
    assert f"python -m zklocks.sim --seed {seed} --plan '{plan}'" in text
    assert "last " in text and "steps:" in text
    assert len(failure.trace) > 10
    # the command line replays it (with the same bug planted) and exits 1, same violation
    plant = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        "import zklocks._core.flow as flow; "
        "from test_planted_bugs import read_watches_later_writer as bug; flow.decide = bug; "
        "from zklocks.sim.__main__ import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", plant, "--seed", str(seed), "--plan", plan],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert failure.violation in done.stderr


def test_options_are_part_of_the_replay() -> None:
    narrow = Options(families=("semaphore",))
    result = run(3, options=narrow)
    assert result.family == "semaphore"
    with pytest.raises(SimulationFailure) as caught:
        run(4, options=Options(families=("rw",)), decide=lambda me, queue: Refused("planted"))
    assert "raised InvalidArgument" in caught.value.violation
    assert "--families rw" in str(caught.value)
