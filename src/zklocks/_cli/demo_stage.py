"""The demo's stage: what every scenario of ``zklocks demo`` plays on.

A scenario tells a story with real worker processes (``demo_crew``) and checks it
against what ZooKeeper holds. The stage is the part every scenario shares: the demo's
own client for reading the queue, the screen it narrates to, and the one way to wait,
``watch_until``, which redraws the queue on every ZooKeeper change until a condition
holds, so the story is ordered by watches and never by sleeping. Kept apart from the
scenarios so that each of those reads as its story, and apart from the command so that
the command only sets the stage up and tears it down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zklocks import Client
from zklocks._cli.common import Place, arm_change_watch, line_up
from zklocks._cli.demo_crew import Crew, Event, ScenarioFailed
from zklocks._cli.demo_screen import Row, Screen
from zklocks._cli.sanitise import clean

WAIT = 30.0  # the longest any single step may take before the scenario fails
TICK = 0.1  # how often the live status line is redrawn while waiting


@dataclass
class Stage:
    """One demo run's shared state; ``crew`` is the current scenario's workers."""

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
        places = line_up(self.client.contenders(path))
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
