"""``zklocks serve`` times a hold from its grant, where it saw the holder wait: a leader
that queued before it was elected must not read as held since it queued (an adopter's
``/locks`` said ``"oldest_hold_s": 58.454`` eight seconds after a takeover)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_serve import Served, eventually, get, get_json, start_app

from zklocks import Client
from zklocks.server import ZooKeeperServer

QUEUED = 1.5  # how long the second candidate waits in line: the age a grant must not count


@pytest.fixture
def served(zk_server: ZooKeeperServer) -> Iterator[Served]:
    root = f"/serve-hold/{uuid.uuid4().hex[:10]}"
    app = start_app(zk_server.hosts, [root])
    try:
        yield Served(app, root)
    finally:
        app.stop()


def test_a_leader_elected_after_queueing_is_timed_from_its_election(
    served: Served, zk_server: ZooKeeperServer
) -> None:
    path = f"{served.root}/elections/scheduler"
    with Client(zk_server.hosts) as first, Client(zk_server.hosts) as second:
        leading = first.election(path, identifier="node-a")
        term = leading.campaign(timeout=10)
        candidate = second.election(path, identifier="node-b")
        elected = threading.Event()

        def campaign() -> None:
            candidate.campaign(timeout=30)
            elected.set()

        thread = threading.Thread(target=campaign)
        thread.start()
        try:
            eventually(
                lambda: (served.lock_entry(path) or {}).get("waiters") == 1,
                5,
                "serve sees node-b waiting",
            )
            time.sleep(QUEUED)  # time passing in line, not a synchronisation
            term.release()
            assert elected.wait(10)
            entry = eventually(
                lambda: (e := served.lock_entry(path)) and e["tokens"] and e["waiters"] == 0 and e,
                5,
                "node-b leading, as serve sees it",
            )
            _, state = get_json(f"{served.url}/locks{path}")
            (holder,) = state["holders"]
            assert holder["identifier"] == "node-b"
            assert holder["age_s"] >= QUEUED  # its node is as old as its wait
            assert holder["held_s"] is not None and holder["held_s"] < QUEUED
            assert entry["oldest_hold_s"] < QUEUED
            _, body = get(served.url + "/metrics")
            held = [
                sample.value
                for family in text_string_to_metric_families(body)
                for sample in family.samples
                if sample.name == "zklocks_lock_oldest_hold_seconds"
                and sample.labels.get("path") == path
            ]
            assert held and held[0] < QUEUED
        finally:
            if not elected.is_set():
                term.release()
            thread.join(30)
            if candidate.is_leader:
                candidate.resign()
