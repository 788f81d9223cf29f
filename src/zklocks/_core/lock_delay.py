"""Lock-delay: after a holder ahead of us vanished *abnormally*, our grant waits.

Chubby's and Consul's answer to a holder that is paused, or whose clock runs slow: when
a lock is lost abnormally (its session expired, an operator broke it, ``max_hold`` took
it back, a revoke timed out), nobody is granted it for ``lock_delay`` seconds, so the
old holder has time to notice and stop. A clean release hands over at once. No I/O.

How a contender tells the two apart, with no request of its own (docs/locks.md,
"Lock-delay"):

* **The release leaves a mark.** In the zklocks layout a holder's own release (also one
  after its lease was lost, while its session lives) is one ``multi``: delete our node
  *and* ``setData`` on the lock directory (empty data, any version). ZooKeeper applies
  both in one transaction, so the directory's data ``version`` counts the clean
  releases ever made there. Nothing is created: there is no marker node to clean up,
  and no recipe (ours, Curator's, kazoo's) reads the directory's data. Every other
  deletion (the server's at a session's end, ``zklocks break``, a ``max_hold``
  take-back) deletes the node alone, leaving the count as it was.
* **The listing reads it.** A contender with a ``lock_delay`` lists the directory with
  ``getChildren2``, whose reply carries the directory's ``Stat``: the same request it
  sends today, one stat more in the reply. Between two of its listings, it compares the
  nodes ahead of it that have gone with the releases counted meanwhile
  (``LossWatch.listed`` says how), and remembers when it saw a loss.
* **The takeover listing.** A waiter second in line proves its grant after its
  predecessor's deletion with one request; with a ``lock_delay`` that request is the
  listing (it shows our node as ``exists`` would) instead of ``exists``: the same count.

A grant is then reported no earlier than ``lock_delay`` after the loss was seen, and no
later than the call's deadline (past it: ``LockTimeout``). After the wait, our node must
still exist (one ``exists``: only on this rare path).

Limits, said in docs/locks.md: the count cannot tell *whose* release it saw, so a
contender beside us (another reader, another permit) that was granted and released
cleanly between two of our listings can make up for a loss it did not see; a
newcomer whose first listing comes after the loss has no earlier count to compare
with, so it is not delayed; a waiter that did not list between a loss and the next
holder's clean release may wait a delay of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from zklocks._core.nodes import NodeName
from zklocks._core.ops import TIMED_OUT, Op, Wait
from zklocks._core.strategies import Granted, Rules
from zklocks._protocol.errors import (
    ClientClosedError,
    ConnectionLossError,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
)
from zklocks._protocol.records import Delete, Multi, SetData, Stat

log = logging.getLogger("zklocks.lock")

__all__ = ["LockDelayWait", "LossWatch", "release_marked"]

_RETRIES = 2  # as the flow's CLEANUP_RETRIES: drops in a row that mean a broken server


@dataclass(frozen=True, slots=True)
class LockDelayWait(Wait):
    """A ``Wait`` that waits out a lock-delay: drivers treat it as any ``Wait``; the
    acquire probe reads it to name the wait on the metrics (``result="lock_delay"``)."""


def release_marked(node: str) -> Generator[Op, Any, bool | None]:
    """Delete ``node`` and count a clean release on its directory, in one transaction.

    ``True``: deleted; ``False``: it was gone already (the lease was lost to its
    deletion) or the session ended; ``None``: the directory refuses our ``setData``
    (an ACL without WRITE): the caller deletes the node alone.
    """
    parent = node.rsplit("/", 1)[0] or "/"
    multi = Multi((Delete(node), SetData(parent, b"")))
    for _ in range(_RETRIES + 1):
        reply = yield multi
        if isinstance(reply, list):
            return True
        if isinstance(reply, NoAuthError):
            return None
        if isinstance(reply, NoNodeError | SessionExpiredError | ClientClosedError):
            return False
        if not isinstance(reply, ConnectionLossError):
            return None  # anything else: let the plain delete say what it is
    return False


@dataclass(slots=True)
class LossWatch:
    """What a contender with a ``lock_delay`` remembers from one listing to the next."""

    delay: float
    clock: Callable[[], float]
    rules: Rules
    version: int | None = None  # the directory's data version at our last listing
    ahead: tuple[NodeName, ...] = ()  # the line ahead of us then, in order
    lost_at: float | None = None  # when we last saw a holder ahead go abnormally
    lost_node: str = ""

    def listed(
        self, names: Sequence[str], stat: Stat | None, line: Sequence[NodeName], me: NodeName
    ) -> None:
        """A listing: compare it with the last one, then remember it (``stat`` None: a
        listing without the directory's stat, the adoption of a node after a lost reply).

        Of the nodes ahead that have gone since, as many left cleanly as releases were
        counted meanwhile (for an exclusive kind every counted release is one of theirs).
        The others left unmarked: a waiter that gave up, or a loss. A gone node that the
        rules would not grant even on the line still here never held (rules are
        monotone, and the line only shrank ahead of it): its leaving explains one
        unmarked departure. More unmarked departures than such never-holders: a node
        that held, or could have, was lost abnormally. (Counting only the nodes that held
        at our last listing missed a waiter granted and lost in between: seed 19.)
        """
        if stat is not None and self.version is not None:
            present = set(names)
            gone = [node for node in self.ahead if node.name not in present]
            unmarked = len(gone) - ((stat.version - self.version) & 0xFFFFFFFF)  # int32 wraps
            if unmarked > 0:
                could_hold = [node for node in gone if self._could_have_held(node, present)]
                if unmarked > len(gone) - len(could_hold):
                    self.lost_at = self.clock()
                    self.lost_node = could_hold[0].name
        self.version = None if stat is None else stat.version
        self.ahead = tuple(_ahead_of(me, line))

    def _could_have_held(self, node: NodeName, present: set[str]) -> bool:
        rest = [n for n in self.ahead if n.name in present or n.name == node.name]
        return isinstance(self.rules.decide(node, rest), Granted)

    def until(self) -> float | None:
        """When our grant may be reported, if that is later than now."""
        if self.lost_at is None:
            return None
        until = self.lost_at + self.delay
        return until if self.clock() < until else None

    def wait_out(self, path: str, deadline: float | None) -> Generator[Op, Any, bool]:
        """Wait until the delay is over: ``True``; ``False`` if the deadline comes first
        (the caller times out). Watch events meanwhile change nothing: the caller proves
        its grant with a read afterwards, as after any wait."""
        until = self.until()
        if until is None:
            return True
        log.info(
            "%s: waiting out lock-delay after an abnormal loss of %s (%.3f s left)",
            path,
            self.lost_node,
            until - self.clock(),
        )
        end = until if deadline is None else min(until, deadline)
        while (yield LockDelayWait(end)) is not TIMED_OUT:
            pass
        self.lost_at = None
        return deadline is None or until <= deadline


def _ahead_of(me: NodeName, line: Sequence[NodeName]) -> list[NodeName]:
    ahead: list[NodeName] = []
    for node in line:
        if node.name == me.name:
            break
        ahead.append(node)
    return ahead
