"""zklocks elections with ``layout="curator"`` and the real Apache Curator 5.4
``LeaderLatch`` on one path: mixed candidates see one leader, in order of arrival.

Curator runs in JVM workers (``interop/curator``), one session each, against the suite's
ZooKeeper; zklocks candidates campaign on threads of this process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from interop.curator.harness import CuratorWorker
from peers_support import WAIT, wait_for_children

import zklocks

Workers = Callable[..., CuratorWorker]


class Campaign:
    """A zklocks candidate campaigning on a thread of its own until it leads."""

    def __init__(self, election: zklocks.Election) -> None:
        self.election = election
        self.term: list[zklocks.Lease] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.term.append(self.election.campaign(timeout=2 * WAIT))

    def leads(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return bool(self.term)


def test_curator_and_zklocks_candidates_follow_one_another_in_order(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    first, third = curator(), curator()
    first.latch("a", path, "curator-1")
    assert first.leads("a", WAIT)
    wait_for_children(kazoo, path, 1)
    second = Campaign(client.election(path, layout="curator", identifier="zklocks-2"))
    wait_for_children(kazoo, path, 2)
    third.latch("c", path, "curator-3")
    names = wait_for_children(kazoo, path, 3)
    assert [name.split("-latch-")[0].startswith("_c_") for name in names] == [True] * 3
    # one leader, as each client sees it
    assert not second.leads(0.5) and not third.leads("c", 0.5)
    assert first.leader("a") == third.leader("c") == "curator-1"
    # Curator's candidate steps down: the next in line is ours, not the later Curator one
    first.unlatch("a")
    assert second.leads(WAIT)
    assert not third.leads("c", 0.5)
    assert "zklocks-2" in third.leader("c")  # our node's data names us to Curator too
    leader = second.election.leader()
    assert leader is not None and leader.node == second.term[0].node
    # ours resigns: the Curator candidate behind us leads
    second.term[0].release()  # a lease is released from any thread (resign: the leader's)
    assert third.leads("c", WAIT)
    observed = client.election(path, layout="curator").leader()
    assert observed is not None and observed.node.endswith(names[2])


def test_a_crashed_curator_leader_hands_over_to_a_zklocks_candidate(
    client: zklocks.Client, kazoo: Any, zk_server: Any, curator_worker_classes: Any, path: str
) -> None:
    java = CuratorWorker()  # a short session of its own: its crash ends it in 4 s
    java.timeout = 120.0
    try:
        java.connect(zk_server.hosts, session_timeout=4.0)
        java.latch("a", path, "curator-1")
        assert java.leads("a", WAIT)
        wait_for_children(kazoo, path, 1)
        ours = Campaign(client.election(path, layout="curator", identifier="zklocks-2"))
        wait_for_children(kazoo, path, 2)
        assert not ours.leads(0.5)
        java.kill()  # no close: its session ends on the server's clock
        assert ours.leads(WAIT)
        assert len(kazoo.get_children(path)) == 1
        ours.term[0].release()
    finally:
        java.kill()


def test_a_zklocks_layout_candidate_refuses_a_curator_latch_path(
    client: zklocks.Client, curator: Workers, path: str
) -> None:
    java = curator()
    java.latch("a", path, "curator-1")
    assert java.leads("a", WAIT)
    with pytest.raises(zklocks.InvalidArgument, match="Curator's LeaderLatch"):
        client.election(path).campaign(timeout=5)
    assert java.leader("a") == "curator-1"


def test_curator_leader_selector_and_zklocks_candidates_follow_one_another_in_order(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    first, third = curator(), curator()
    first.selector("a", path, "curator-1")
    assert first.selects("a", WAIT)
    wait_for_children(kazoo, path, 1)
    second = Campaign(client.election(path, layout="curator-selector", identifier="zklocks-2"))
    wait_for_children(kazoo, path, 2)
    third.selector("c", path, "curator-3")
    names = wait_for_children(kazoo, path, 3)
    assert all("-lock-" in name for name in names)  # InterProcessMutex nodes, all three
    assert not second.leads(0.5) and not third.selects("c", 0.5)
    assert first.selected("a") == third.selected("c") == "curator-1"
    first.unselect("a")
    assert second.leads(WAIT)
    assert not third.selects("c", 0.5)
    leader = client.election(path, layout="curator-selector").leader()
    assert leader is not None and leader.node == second.term[0].node
    second.term[0].release()
    assert third.selects("c", WAIT)
    third.unselect("c")
