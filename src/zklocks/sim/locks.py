"""The simulated clients' lock objects: they let a simulated client take and give back
its locks through ``zklocks._frontend.operations``, the code both real clients run.

A simulated client is one process with one session, and it is the one owner of what it
holds. For each cycle of its script it makes a ``SimLock`` per lock path, as
``Client.lock`` would, and its program drives ``operations.acquire`` and ``release``
(or ``acquire_all`` and ``release_held`` for a multi-lock) with the simulator's driver.
The rules, the bookkeeping and the cleanup on every way out are therefore the clients'
own, and a change to them is explored here too.

What stays the simulator's is named in this module:
  * an attempt's spec is drawn from the seed (its token and data replay exactly);
  * a grant and a release are reported to the invariants as they happen;
  * what a real client runs apart from its caller (a look at our node for a revoke
    request, taking our node back past ``max_hold``) runs in one step, against the model.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

from zklocks._core.flow import Acquired, AcquireSpec
from zklocks._core.lease import Lease, Scheduler
from zklocks._frontend.holdings import HoldingTable, LockConfig, LockCore
from zklocks._frontend.multi import MultiLockCore
from zklocks._vocabulary import SessionFacts


class SimClient(Protocol):
    """What a lock needs of its simulated client (``zklocks.sim.client.SimClient``),
    named here so that the client may import its locks and not the other way round.
    The client is also the session an operation picks (``Use``): its ``facts`` give the
    virtual clock that deadlines are made on."""

    facts: SessionFacts

    def schedule(self, delay: float, fn: Callable[[], None]) -> Callable[[], None]: ...

    def run_apart(self, operation: Generator[Any, Any, None]) -> None: ...

    def granted(self, acquired: Acquired) -> Lease: ...

    def releasing(self, lease: Lease) -> None: ...


SpecFn = Callable[[float | None, bool], AcquireSpec]
"""Draws the spec of one attempt, given its deadline (on the virtual clock) and whether
it blocks."""


@dataclass(frozen=True, slots=True)
class SimConfig(LockConfig):
    """A lock of one cycle: its spec is drawn from the seed (``World.spec_for``), not
    from this host and process, so one seed replays one run exactly."""

    draw: SpecFn = field(kw_only=True)

    def spec(
        self,
        owner_name: str,
        deadline: float | None,
        blocking: bool,
        clock: Callable[[], float] | None = None,
    ) -> AcquireSpec:
        return self.draw(deadline, blocking)


@dataclass(slots=True)
class SimHoldings(HoldingTable[Lease]):
    """The holding table, telling its client of the last release of a lease before the
    node is deleted (the invariants look at the holder then, as a real release begins)."""

    releasing: Callable[[Lease], None] = field(kw_only=True)

    def leave(self, owner: object) -> Lease | None:
        lease = HoldingTable.leave(self, owner)
        if lease is not None:
            self.releasing(lease)
        return lease


class SimHost:
    """What a lock needs of its client (``holdings.Host``): the simulated client is its
    own session, and a grant becomes a lease its keeper watches and the invariants see."""

    def __init__(self, client: SimClient) -> None:
        self._sim_client = client

    def _session_or_raise(self) -> SimClient:
        return self._sim_client

    def _session_or_none(self) -> SimClient:
        return self._sim_client

    def _watch_lease(self, acquired: Acquired) -> Lease:
        return self._sim_client.granted(acquired)


class SimFront:
    """How the simulator runs things apart from the caller (``holdings.Front``): the
    lease keeper's timers on the virtual clock, an operation in one step."""

    @staticmethod
    def timer(session: SimClient) -> Scheduler:
        return session.schedule

    @staticmethod
    def spawn(session: SimClient, operation: Generator[Any, Any, None]) -> None:
        session.run_apart(operation)


class SimLock(LockCore[Lease]):
    """One lock of a simulated client (made afresh for each cycle)."""

    def __init__(self, client: SimClient, config: SimConfig) -> None:
        super().__init__(config, SimHost(client), SimFront())
        self._holdings = SimHoldings(config, releasing=client.releasing)

    def _adopt(self, lease: Lease) -> None:
        """Nothing: a simulated program releases through its lock, never ``lease.release()``."""


class SimMultiLock(MultiLockCore[SimLock, Lease]):
    """Several ``SimLock``s of one cycle, taken as ``MultiLock`` takes them."""

    def __init__(self, locks: list[SimLock]) -> None:
        super().__init__(locks, SimLock)


__all__ = ["SimConfig", "SimFront", "SimHoldings", "SimHost", "SimLock", "SimMultiLock"]
