"""A black-box checker and a nemesis runner for zklocks on real ZooKeeper ensembles.

    python -m nemesis run --minutes 2 --members 3 --workload lock --out /tmp/nemesis
    python -m nemesis check /tmp/nemesis          # judge a recorded history again

Theory of operation, in the manner of Jepsen's lock tests:

* **Clients** (``client.py``) are separate OS processes, each with one ``zklocks.Client``
  on a member of its own (one client takes every member). Each records every invoke,
  ok and fail of acquire and release, and, while it holds, when its lease *says held*
  (an observation of ``lease.lost`` that read False), when it first says lost, and when
  the lost-callback ran: every time from ``time.monotonic()``, one clock for every
  process of the machine. The records go to the runner as JSON lines (``history.py``).
* **The nemesis** (``faults.py``) kills and restarts the leader, SIGSTOPs members and
  clients, and cuts or stalls every link of a member (``links.py``), on a schedule
  drawn from ``--seed``. Every other fault is the workload's focus: a follower whose
  holder keeps holding is stalled (silent, not reset), the case a lease rule must get
  right; in the guarded-set workload also a holder paused past its session.
* **The checker** (``checker.py``) reads only the history, and only what the history
  proves (see its docstring for the bound each check uses): the holders' leases never
  say held beyond what the lock model allows (a linearizability check against a mutex,
  an N-permit semaphore or a readers-writer lock whose holders leave at release or
  when their lease may have ended), fencing tokens only grow, and the guarded set
  (one set in ZooKeeper, PostgreSQL and Redis, each added to by read-modify-writes
  under the lock, guarded by the lease's transaction or the store's fence) lost no
  element, duplicated none and took none from a stale holder. With ``--lock-delay D``
  every lock has ``lock_delay=D`` and the checker also judges the lock-delay rule: a
  contender queued (its first listing back) before a holder's session expired is not
  granted within D of that holder's last "held" (mutex workloads; the client records
  ``queued`` from the library's log and ``session-lost`` from its state listener).
* **The report** (``report.py``): ``report.md``, ``timeline.png`` (holders per lock and
  the faults), the smallest failing window (``window.png``) and ``summary.json``.

Planted bugs (``plants.py``) show the checker catches what it claims to.
"""
