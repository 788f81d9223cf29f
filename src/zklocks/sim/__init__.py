"""zklocks.sim: an in-memory ZooKeeper, a seeded scheduler, faults as data, invariants.

Run the lock flows of many simulated clients against a deterministic model of ZooKeeper,
one operation at a time, under a plan of faults; check the lock invariants after every
step; print a failing seed with its plan so it replays exactly. See docs/simulation.md.
"""

from zklocks._frontend.options import ClientOptions
from zklocks.sim.async_session import AsyncSimSession, async_session_factory
from zklocks.sim.faults import (
    DelayWatch,
    DeleteNode,
    DropRequest,
    ExpireSession,
    Fault,
    FaultPlan,
    Interrupt,
    Pause,
    ReorderWatch,
    SweepContainers,
    format_plan,
    parse_plan,
)
from zklocks.sim.invariants import Violation
from zklocks.sim.model import ClientWatches, Model, Notification
from zklocks.sim.runner import (
    DEFAULT,
    KNOWN_ISSUES,
    ExploreStats,
    KnownIssue,
    Options,
    RunResult,
    SimulationFailure,
    explore,
    plan_for,
    replay,
    run,
    shrink,
)
from zklocks.sim.scenario import FAMILIES, Scenario, scenario_for
from zklocks.sim.scheduler import Simulation
from zklocks.sim.session import Inspector, NodeInfo, SimServer, SimSession, session_factory

__all__ = [
    "DEFAULT",
    "FAMILIES",
    "KNOWN_ISSUES",
    "AsyncSimSession",
    "ClientOptions",
    "ClientWatches",
    "DelayWatch",
    "DeleteNode",
    "DropRequest",
    "ExpireSession",
    "ExploreStats",
    "Fault",
    "FaultPlan",
    "Inspector",
    "Interrupt",
    "KnownIssue",
    "Model",
    "NodeInfo",
    "Notification",
    "Options",
    "Pause",
    "ReorderWatch",
    "RunResult",
    "Scenario",
    "SimServer",
    "SimSession",
    "Simulation",
    "SimulationFailure",
    "SweepContainers",
    "Violation",
    "async_session_factory",
    "explore",
    "format_plan",
    "parse_plan",
    "plan_for",
    "replay",
    "run",
    "scenario_for",
    "session_factory",
    "shrink",
]
