"""The nemesis: faults on a real ensemble, on a schedule drawn from a seed.

Faults (each undone before the next begins, then the ensemble is given time to serve
again under a leader):

    stall-holders-follower  stall every link of the follower a long holder talks to
    pause-holder            SIGSTOP the client process of a holder, then SIGCONT
    kill-leader             SIGKILL the leader, later restart it on its data
    pause-member            SIGSTOP a member, then SIGCONT
    cut-member              reset every link of a member and refuse new ones, then heal
    stall-member            hold every byte on every link of a member, then heal
    pause-client            SIGSTOP a client process, then SIGCONT

Every other fault is the workload's *focus* (``FOCUS``), the rest are drawn with
``WEIGHTS``. The focus of every workload is the follower stall: a holder whose member
is stalled (silent, not reset) keeps getting answers from it for syncLimit x tickTime
while none of its touches reach the leader, which then expires its session; the holder
must say lost before the waiter on the majority is granted. For that the nemesis waits
(up to four session timeouts) for a holder that talks to a follower alone and plans to
hold long enough to see it through, then stalls that follower for about two session
timeouts; when none comes, it draws another fault and tries the focus again next. The
guarded-set workload adds a holder paused past its session timeout: it resumes and
writes with its stale token, which the guarded set's stores must refuse.

The seed draws the kinds, durations, gaps and the choice among candidates (sorted, so
the same candidates give the same choice); which members lead and who holds when the
nemesis looks are the real system's.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nemesis.links import Links
from nemesis.timing import Timing
from zklocks.server import EnsembleMember, ZooKeeperEnsemble

FOCUS = {
    "lock": ("stall-holders-follower",),
    "rwlock": ("stall-holders-follower",),
    "semaphore": ("stall-holders-follower",),
    "guarded-set": ("pause-holder", "stall-holders-follower"),
}
WEIGHTS = {
    "kill-leader": 2,
    "pause-member": 2,
    "cut-member": 2,
    "stall-member": 1,
    "pause-client": 2,
    "pause-holder": 1,
}
KINDS = ("stall-holders-follower", *WEIGHTS)

Record = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Holding:
    client: int
    n: int
    ok: float
    planned: float  # seconds it means to hold from ok


class Live:
    """Who holds right now, from the clients' events as they arrive (for targeting)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._asked: dict[int, tuple[int, float]] = {}  # client -> (n, planned hold)
        self.holders: dict[int, Holding] = {}
        self.homes: dict[int, int | None] = {}
        self.pids: dict[int, int] = {}

    def observe(self, event: dict[str, Any]) -> None:
        c, ev, op = event.get("c"), event.get("ev"), event.get("op")
        if not isinstance(c, int):
            return
        with self._cond:
            n = event.get("n")
            if ev == "client-start":
                self.homes[c] = event.get("home")
                self.pids[c] = int(event["pid"])
            elif op == "acquire" and ev == "invoke" and isinstance(n, int):
                self._asked[c] = (n, float(event.get("hold") or 0.0))
            elif op == "acquire" and ev == "ok" and self._asked.get(c, (None,))[0] == n:
                assert isinstance(n, int)
                self.holders[c] = Holding(c, n, float(event["t"]), self._asked[c][1])
            elif (op == "release" and ev == "invoke") or ev == "lost":
                held = self.holders.get(c)
                if held is not None and held.n == n:
                    del self.holders[c]
            else:
                return
            self._cond.notify_all()

    def poke(self) -> None:
        """Have every ``wait_for`` look again (something it cannot see changed)."""
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pick: Callable[[], Any], timeout: float) -> Any:
        """``pick()`` under the lock, again after every event, until it returns a value."""
        with self._cond:
            return self._cond.wait_for(pick, timeout)


class Nemesis:
    def __init__(
        self,
        ensemble: ZooKeeperEnsemble,
        links: Links,
        live: Live,
        timing: Timing,
        workload: str,
        seed: int,
        record: Record,
    ) -> None:
        self.ensemble = ensemble
        self.links = links
        self.live = live
        self.timing = timing
        self.focus = FOCUS[workload]
        self.rng = random.Random(seed)
        self.record = record
        self._stopping = threading.Event()
        self._until = 0.0
        self._ids = 0

    # -- the schedule -------------------------------------------------------------------

    def run(self, until: float) -> None:
        """Inject faults until ``until`` (monotonic) or ``stop()``; undo each one."""
        self._until = until
        session = self.timing.session_timeout
        if self._wait(0.75 * session):
            return
        focus_turn, focus = True, 0
        while not self._stopping.is_set() and time.monotonic() < until:
            kind = self.focus[focus % len(self.focus)] if focus_turn else self._drawn()
            try:
                applied = self._apply(kind)
                if focus_turn and applied:
                    focus += 1
                    focus_turn = False
                elif not focus_turn:
                    focus_turn = True
                elif not self._stopping.is_set():
                    # no target came for the focus: another fault now, the focus again next
                    self._apply(self._drawn())
            except Exception as exc:  # a fault that could not be applied is noted, not fatal
                self._note(f"{kind} failed: {type(exc).__name__}: {exc}")
            self._recover()
            self._wait(self.rng.uniform(0.25, 1.0) * session)

    def stop(self) -> None:
        self._stopping.set()

    def _drawn(self) -> str:
        kinds = sorted(WEIGHTS)
        return self.rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]

    def _wait(self, seconds: float) -> bool:
        """Wait, but not past the run's end; True if asked to stop meanwhile."""
        left = min(seconds, self._until - time.monotonic())
        return self._stopping.wait(max(left, 0.0))

    def _apply(self, kind: str) -> bool:
        """Apply and undo one fault; False if its target never came (nothing was done)."""
        session = self.timing.session_timeout
        if kind == "stall-holders-follower":
            return self._stall_holders_follower()
        if kind == "pause-holder":
            return self._pause_client(holder=True, seconds=self.rng.uniform(1.5, 2.5) * session)
        if kind == "pause-client":
            return self._pause_client(holder=False, seconds=self.rng.uniform(0.25, 2.5) * session)
        if kind == "kill-leader":
            return self._kill_leader(self.rng.uniform(0.25, 1.5) * session)
        if kind == "pause-member":
            return self._pause_member(self.rng.uniform(0.25, 2.0) * session)
        if kind in ("cut-member", "stall-member"):
            member = self._pick(self._running())
            how = "cut" if kind == "cut-member" else "stall"
            self._isolate(kind, member, how, self.rng.uniform(0.5, 2.0) * session)
            return True
        raise ValueError(f"unknown fault {kind!r}")

    # -- the faults ---------------------------------------------------------------------

    def _stall_holders_follower(self) -> bool:
        session = self.timing.session_timeout
        seconds = self.rng.uniform(1.75, 2.5) * session
        leader = self._leader()
        followers = {m.myid: m for m in self._running() if m is not leader}
        # Long enough to see the stall through: the leader expires the holder's session
        # and the waiter is granted about one session timeout after the stall begins.
        need = 1.4 * session

        def pick() -> tuple[int, int] | None:
            now = time.monotonic()
            for c, held in sorted(self.live.holders.items()):
                home = self.live.homes.get(c)
                if home in followers and held.ok + held.planned - now >= need:
                    return c, home
            return None

        found = self.live.wait_for(pick, timeout=min(4 * session, self._left()))
        if found is None:
            self._note("stall-holders-follower: no long holder on a follower came")
            return False
        client, myid = found
        detail = f"c{client} holds on it"
        self._isolate("stall-holders-follower", followers[myid], "stall", seconds, detail)
        return True

    def _isolate(
        self, kind: str, member: EnsembleMember, how: str, seconds: float, detail: str = ""
    ) -> None:
        leader = self._leader()
        role = "leader" if member is leader else "follower"
        fault = self._begin(kind, f"m{member.myid}", f"{role}; {detail}".rstrip("; "))
        self.links.isolate(member.myid, "cut" if how == "cut" else "stall")
        try:
            self._wait(seconds)
        finally:
            self.links.heal()
            self._end(fault)

    def _pause_client(self, *, holder: bool, seconds: float) -> bool:
        session = self.timing.session_timeout
        if holder:
            candidates = self.live.wait_for(
                lambda: sorted(self.live.holders) or None, timeout=min(2 * session, self._left())
            )
            if not candidates:
                self._note("pause-holder: no holder came")
                return False
        else:
            candidates = sorted(self.live.pids)
        client = self._pick(candidates)
        pid = self.live.pids[client]
        holding = client in self.live.holders
        fault = self._begin(
            "pause-holder" if holder else "pause-client",
            f"c{client}",
            f"{seconds:.1f} s; {'holding' if holding else 'not holding'}",
        )
        os.kill(pid, signal.SIGSTOP)
        try:
            self._wait(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self._end(fault)
        return True

    def _kill_leader(self, seconds: float) -> bool:
        leader = self._leader()
        if leader is None:
            self._note("kill-leader: no leader")
            return False
        fault = self._begin("kill-leader", f"m{leader.myid}", f"down {seconds:.1f} s")
        leader.kill()
        try:
            self._wait(seconds)
        finally:
            try:
                leader.restart()
            finally:
                self._end(fault)
        return True

    def _pause_member(self, seconds: float) -> bool:
        member = self._pick(self._running())
        leader = self._leader()
        role = "leader" if member is leader else "follower"
        fault = self._begin("pause-member", f"m{member.myid}", role)
        member.pause()
        try:
            self._wait(seconds)
        finally:
            member.resume()
            self._end(fault)
        return True

    # -- helpers ------------------------------------------------------------------------

    def _left(self) -> float:
        return max(self._until - time.monotonic(), 0.0)

    def _running(self) -> list[EnsembleMember]:
        return [m for m in self.ensemble.members if m.running and not m.paused]

    def _leader(self) -> EnsembleMember | None:
        try:
            return self.ensemble.leader()
        except LookupError:
            return None

    def _pick(self, candidates: list[Any]) -> Any:
        if not candidates:
            raise LookupError("nothing to choose from")
        return candidates[self.rng.randrange(len(candidates))]

    def _begin(self, kind: str, target: str, detail: str) -> int:
        self._ids += 1
        self.record(
            {
                "c": "nemesis",
                "ev": "fault",
                "t": time.monotonic(),
                "id": self._ids,
                "kind": kind,
                "target": target,
                "detail": detail,
            }
        )
        return self._ids

    def _end(self, fault: int) -> None:
        self.record({"c": "nemesis", "ev": "healed", "t": time.monotonic(), "id": fault})

    def _note(self, text: str) -> None:
        self.record({"c": "nemesis", "ev": "note", "t": time.monotonic(), "text": text})

    def _recover(self) -> None:
        """Every member serving under one leader again (bounded), or a note saying not."""
        try:
            for member in self.ensemble.members:
                if not member.running:
                    member.start()
            self.ensemble.wait_ready(timeout=10 * self.timing.session_timeout)
        except Exception as exc:
            self._note(f"the ensemble did not recover: {type(exc).__name__}: {exc}")

    def restore(self) -> None:
        """Undo whatever is left: heal links, resume members and clients, restart."""
        with contextlib.suppress(Exception):
            self.links.heal()
        for member in self.ensemble.members:
            if member.paused:
                member.resume()
        for pid in self.live.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._recover()
