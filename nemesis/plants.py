"""Planted bugs: each must make the checker find a violation within a 2-minute run.

Plants are applied inside the client processes, never in the runner or the checker.

* ``lag-rule`` and ``trust-ping`` are lease rules, planted by the library itself
  (``zklocks._transport.lease_rule.plant(name)``): ``lag-rule`` is the rule before
  issue 21 (an answer is trusted once another answer came session_timeout / 4 later),
  ``trust-ping`` trusts every answer (lag 0). Both are unsound under the ``sample``
  timing when a holder's follower is stalled: the follower goes on answering for
  syncLimit x tickTime (2 s) while its touches no longer reach the leader, which
  expires the session and lets a waiter in while the holder's lease still says held.
* ``early-grant`` lives in nemesis only: the client reports its grant, and its lease
  held, from the moment it *asked* for the lock. Whoever asks while another holds is
  caught by the exclusion check at once: no fault is needed.
* ``unguarded`` lives in nemesis only: the guarded-set workload's read-modify-writes
  go without guard or fence (``register.py``). A holder paused past its session
  timeout between its read and its write (the nemesis pauses holders) writes back the
  set it read before the next holders added theirs: ``set-lost`` (and ``fencing``, its
  stale write accepted). It shows that the workload can fail, and that the guards are
  what keeps it clean: ``make nemesis`` and tests/nemesis run it on the guarded run's
  seed.
* ``no-lock-delay`` lives in nemesis only (runs with ``--lock-delay``): the clients
  record what the lock-delay rule needs but do not pass ``lock_delay`` to their locks,
  as a library that ignored it would. A successor queued behind a holder whose session
  expired is granted at about the expiry, within the delay of the holder's last "held"
  when the delay is longer than a session timeout: ``lock-delay``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

LEASE_PLANTS = ("lag-rule", "trust-ping")
OWN_PLANTS = ("early-grant", "unguarded", "no-lock-delay")
PLANTS = LEASE_PLANTS + OWN_PLANTS
LEASE_RULE_MODULE = "zklocks._transport.lease_rule"


class PlantUnavailable(RuntimeError):
    """The library does not offer the lease plant asked for (yet)."""


def _missing_plant(name: str) -> None:
    # Stands in for lease_rule.plant until that module lands: a plant asked for and not
    # applied would make a "caught" or "clean" verdict meaningless, so refuse loudly.
    raise PlantUnavailable(
        f"--plant {name} needs {LEASE_RULE_MODULE}.plant(name), which this zklocks does "
        "not have (yet)"
    )


def lease_rule_plant() -> Callable[[str], None]:
    """The library's ``plant(name)``, or a stand-in that raises ``PlantUnavailable``."""
    try:
        module = importlib.import_module(LEASE_RULE_MODULE)
    except ImportError:
        return _missing_plant
    plant = getattr(module, "plant", None)
    return plant if callable(plant) else _missing_plant


def lease_plant_available() -> bool:
    return lease_rule_plant() is not _missing_plant


def apply_in_client(name: str | None) -> None:
    """Apply a plant in a client process, before its ``zklocks.Client`` is made."""
    if name in LEASE_PLANTS:
        lease_rule_plant()(name)
    elif name is not None and name not in OWN_PLANTS:
        raise ValueError(f"unknown plant {name!r}; one of {', '.join(PLANTS)}")
