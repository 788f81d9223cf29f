"""Locks on a 3-member ensemble: exclusion across processes, and a member lost under a holder."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import zklocks
from zklocks.server import ZooKeeperEnsemble

sys.path.insert(0, str(Path(__file__).parent.parent / "contract"))
from contract_support import run_worker


def test_processes_never_hold_together_on_an_ensemble(
    zk_ensemble: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    workers = [
        run_worker(zk_ensemble.hosts, "/ensemble/count", "fair", "count", "20", str(counter))
        for _ in range(3)
    ]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    assert int(counter.read_text()) == 60


def test_holder_keeps_its_lease_when_its_member_dies(zk_ensemble: ZooKeeperEnsemble) -> None:
    with zklocks.Client(zk_ensemble.hosts, session_timeout=10.0) as holder_client:
        lock = holder_client.lock("/ensemble/move")
        lease = lock.acquire()
        connected_to = holder_client._session._connection.last_host  # type: ignore[union-attr]
        member = next(m for m in zk_ensemble.members if m.hosts == connected_to)
        member.kill()  # the client moves to another member with its session and watches
        with zklocks.Client(zk_ensemble.hosts) as other_client:
            other = other_client.lock("/ensemble/move")
            assert other.try_acquire() is None  # still held: the session survived
            got = threading.Event()

            def take() -> None:
                with other:
                    got.set()

            waiter = threading.Thread(target=take, daemon=True)
            waiter.start()
            assert not lease.lost
            lock.release()
            assert got.wait(30)
            waiter.join(10)
