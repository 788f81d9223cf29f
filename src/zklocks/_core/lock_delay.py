"""Lock-delay: after a holder ahead of us vanished *abnormally*, our grant waits.

Chubby's and Consul's answer to a holder that is paused, or whose clock runs slow: when
a lock is lost abnormally (its session expired, an operator broke it, ``max_hold`` took
it back, a revoke timed out), nobody is granted it for ``lock_delay`` seconds, so the
old holder has time to notice and stop. A clean release hands over at once. No I/O.

How a contender tells the two apart, with no request of its own (docs/locks.md,
"Lock-delay"):

* **Every clean departure leaves a mark.** In the zklocks layout a node that leaves of
  its own accord (a holder's release, also one after its lease was lost while its
  session lives; a waiter that gives up: a timeout, a cancellation, an error's cleanup)
  goes in one ``multi``: delete the node *and* ``setData`` on the lock directory (any
  version). Nothing is created, so nothing is left behind, and no recipe (ours,
  Curator's, kazoo's) reads the directory's data. Every other deletion (the server's
  at a session's end, ``zklocks break``, a ``max_hold`` take-back) deletes the node
  alone.
* **The directory counts the others.** Its ``Stat`` has ``cversion`` (creates plus
  deletes of children, as the server reports it), ``numChildren`` and ``version``
  (one ``setData`` per clean departure), so the deletions that left no mark, ever,
  are ``(cversion - numChildren) / 2 - version`` (``unmarked``; 32-bit arithmetic, as
  the server keeps them). The listing a contender sends anyway reads that stat
  (``getChildren2``): the same one request, one stat more in the reply.
* **The data says how many were taken over.** A holder's release writes, as the
  directory's data, the ``unmarked`` count of its latest listing: whoever held after
  those losses has taken the lock over from them. It is written as a decimal number
  padded with zeros *to its own value in length* (3: ``b"003"``; 0: empty), modulo
  ``ACCOUNT_MODULUS``, so that the stat's ``dataLength`` carries it and nobody needs a
  read of the data. A waiter that gives up writes back the length it last saw: it
  takes nothing over. ``unaccounted`` = ``unmarked`` less that count: losses that no
  holder has held after.
* **Newcomer.** At a contender's first listing, ``unaccounted > 0`` means an abnormal
  loss that nobody has taken over: it counts as seen now, whether or not we would be
  granted at once.
* **Later listings.** Between two of its listings a contender knows how many deletions
  left no mark (anywhere in the directory: the count cannot say whose). If some did,
  a node ahead of us that held, or could have, is gone meanwhile, and a loss is still
  unaccounted, a loss ahead is possible: it counts as seen now (the safe side). A
  listing with nothing unaccounted forgets an earlier sighting: a holder has held
  after it.
* **Telling the one behind.** A waiter watches only its predecessor, so it would see
  a loss further ahead only when the predecessor leaves (and a predecessor waiting
  out the delay that gives up would restart it: issue 35's starvation). A contender
  that sees a loss at a later listing writes its node's data again, unchanged
  (``tell_behind``): the one behind, whose watch fires ``CHANGED``, lists too.
* **The takeover listing.** A waiter second in line proves its grant after its
  predecessor's deletion with one request; with a ``lock_delay`` that request is the
  listing (it shows our node as ``exists`` would) instead of ``exists``: the same count.

A grant is then reported no earlier than ``lock_delay`` after the loss was seen, and no
later than the call's deadline (past it: ``LockTimeout``). After the wait, our node must
still exist (one ``exists``: only on this rare path).

Limits, said in docs/locks.md: the first contender after a loss waits its delay however
old the loss (a deletion carries no time); a waiter behind others sees a loss as the
telling reaches it; a newcomer arriving while the first holder after a loss still holds
waits a delay it may not need, and so does one after a waiter's session ended while it
queued; shared holders releasing together may write an older count; an unmarked deletion
behind us in the same interval as a clean release ahead delays us too. Those err toward
a delay nobody needed. These may miss one: a contender granted beside others (a reader,
a permit) after a loss takes it over for all; more than ``ACCOUNT_MODULUS - 1`` losses
nobody took over wrap the count; removing the lock directory (the server reaps an empty
container) forgets everything.
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

__all__ = [
    "ACCOUNT_MODULUS",
    "LockDelayWait",
    "LossWatch",
    "count_data",
    "kept",
    "release_marked",
    "taken_over",
    "unaccounted",
    "unmarked",
]

_RETRIES = 2  # as the flow's CLEANUP_RETRIES: drops in a row that mean a broken server


@dataclass(frozen=True, slots=True)
class LockDelayWait(Wait):
    """A ``Wait`` that waits out a lock-delay: drivers treat it as any ``Wait``; the
    acquire probe reads it to name the wait on the metrics (``result="lock_delay"``)."""


def release_marked(node: str, data: bytes = b"") -> Generator[Op, Any, bool | None]:
    """Delete ``node`` and mark its departure clean on its directory (``setData`` of
    ``data``: ``taken_over`` or ``kept``), in one transaction.

    ``True``: deleted; ``False``: it was gone already (the lease was lost to its
    deletion) or the session ended; ``None``: the directory refuses our ``setData``
    (an ACL without WRITE): the caller deletes the node alone.
    """
    parent = node.rsplit("/", 1)[0] or "/"
    multi = Multi((Delete(node), SetData(parent, data)))
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


ACCOUNT_MODULUS = 1024
"""The taken-over count is kept modulo this (it is the directory's data length): more
unaccounted losses than this in a row, with no holder between, would wrap it."""


def unmarked(stat: Stat) -> int:
    """Deletions of the directory's children, ever, that left no clean mark.

    The server reports ``cversion`` as creates plus deletes (``2 * created -
    numChildren``, a Java ``int``), so ``cversion - numChildren`` is twice the
    deletes, modulo 2**32; ``version`` counts the marks. Modulo 2**31 both ways.
    """
    deletes = ((stat.cversion - stat.num_children) & 0xFFFFFFFF) >> 1
    return (deletes - stat.version) & 0x7FFFFFFF


def unaccounted(stat: Stat) -> int:
    """Unmarked deletions that no holder has held after (the data's count short of
    ``unmarked``), modulo ``ACCOUNT_MODULUS``."""
    return (unmarked(stat) - stat.data_length) % ACCOUNT_MODULUS


def count_data(count: int) -> bytes:
    """The directory's data that says ``count``: the number padded to its own length."""
    count %= ACCOUNT_MODULUS
    return b"%0*d" % (count, count) if count else b""


def taken_over(seen: Stat | None) -> bytes:
    """What a holder's release writes: every unmarked deletion its latest listing
    counted is taken over (it held after them). ``None`` (no listing read the stat:
    never so in the zklocks layout's flows) writes nothing taken over."""
    return b"" if seen is None else count_data(unmarked(seen))


def kept(seen: Stat | None) -> bytes:
    """What a waiter that gives up writes: the count it last saw, as it was."""
    return b"" if seen is None else count_data(seen.data_length)


@dataclass(slots=True)
class LossWatch:
    """What a contender with a ``lock_delay`` remembers from one listing to the next."""

    delay: float
    clock: Callable[[], float]
    rules: Rules
    stat: Stat | None = None  # the directory's stat at our last listing
    ahead: tuple[NodeName, ...] = ()  # the line ahead of us then, in order
    lost_at: float | None = None  # when we last saw a holder ahead go abnormally
    lost_node: str = ""
    fresh: bool = False  # a loss seen at a later listing, not yet told to those behind us
    touches: int = 0  # our node's data version: how often we told them
    touchable: bool = True  # no other write on our node seen (a revoke's request)

    def listed(
        self, names: Sequence[str], stat: Stat | None, line: Sequence[NodeName], me: NodeName
    ) -> None:
        """A listing: compare it with the last one, then remember it (``stat`` None: a
        listing without the directory's stat; the next one then counts as a first).

        First listing: a loss nobody took over (``unaccounted``) is seen now. Later: if
        deletions left no mark since (anywhere: the count cannot say whose), a gone
        node ahead that held or could have (the rules grant it on the line still here:
        rules are monotone, and the line only shrank ahead of it; a waiter granted and
        lost between two listings counts, seed 19) may be one of them, unless every
        loss has been taken over since. Nothing unaccounted: an earlier sighting is
        forgotten, a holder has held after it.
        """
        if stat is not None:
            open_losses = unaccounted(stat)
            if self.stat is None:
                if open_losses:
                    self._seen("an earlier holder (seen gone at our first listing)")
            elif not open_losses:
                self.lost_at = None
            elif (unmarked(stat) - unmarked(self.stat)) & 0x7FFFFFFF:
                present = set(names)
                gone = [node for node in self.ahead if node.name not in present]
                could_hold = [node for node in gone if self._could_have_held(node, present)]
                if could_hold:
                    self._seen(could_hold[0].name)
                    self.fresh = True
        self.stat = stat
        self.ahead = tuple(_ahead_of(me, line))

    def tell_behind(self, node: str, data: bytes) -> Generator[Op, Any, None]:
        """We have just seen a loss ahead that those queued behind us cannot see (each
        watches only its predecessor): write our node's own data again, unchanged, so
        that the watch on it fires and the one behind lists too, and counts the loss
        from about when we saw it (not from when we leave: issue 35's starvation,
        where waiters that give up one after another would each start the delay
        again). Conditional on the version we left it at, so a revoke's request
        written meanwhile is never overwritten (that write woke them already). One
        request, only on a loss; any failure just ends the telling."""
        if not (self.fresh and self.touchable):
            return
        self.fresh = False
        reply = yield Multi((SetData(node, data, self.touches),))
        if isinstance(reply, list):
            self.touches += 1
        else:
            self.touchable = False

    def _seen(self, node: str) -> None:
        self.lost_at = self.clock()
        self.lost_node = node

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
