"""The words every layer shares about a session, defined once and importing nothing of ours.

The connection emits these, the drivers and leases read them, the simulator fakes them:
a session's state, a fired watch (``WatchEvent``: what happened, to which path), the
callbacks that receive them, and the facts a lease needs to judge whether it still holds.
Keeping them below the wire protocol means no layer translates another's events.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_CLOCK_DRIFT",
    "DEFAULT_SESSION_TIMEOUT",
    "NO_ANSWER",
    "SessionFacts",
    "SessionListener",
    "SessionState",
    "WatchEvent",
    "WatchKind",
    "WatchedEvent",
    "Watcher",
    "tell_each",
]


class SessionState(enum.Enum):
    """Where a client's session stands.

    CONNECTING until the first handshake; CONNECTED; SUSPENDED while cut off with the
    session possibly alive; LOST once the server said it expired (a new session follows);
    CLOSED after ``close()``.
    """

    CONNECTING = "connecting"
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"
    CLOSED = "closed"


class WatchKind(enum.Enum):
    """What a fired watch says, or which session end it was told about.

    A watch fires once, for the first of these to happen to its node. Every watch still
    set is also told ``SESSION_LOST`` when the session expires and ``CLOSED`` when the
    client closes: no waiter is left waiting on a session that can no longer answer.
    """

    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILD = "child"
    SESSION_LOST = "session lost"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """A fired watch: what happened (``kind``, a ``WatchKind``) to which ``path``, as the
    client names it (inside its chroot).

    Public as ``zklocks.WatchedEvent``: what a read's ``watch=`` callable is given. The
    lock flows hear the same events on their own watches.
    """

    kind: WatchKind
    path: str


# The layers' own name for it (the connection, the drivers, the flows and the simulator
# all say ``WatchEvent``): one class, so a user's watch and a flow's hear the same thing.
WatchEvent = WatchedEvent


Watcher = Callable[[WatchEvent], Any]
# Hears the transport's ``SessionState`` (with CONNECTING, which users never see); the
# public ``zklocks.StateListener`` hears ``ConnectionState``, mapped from it by the client.
SessionListener = Callable[[SessionState], Any]


def _never() -> bool:
    return False


NO_ANSWER = ("no answer from ZooKeeper for a whole session timeout", "no_answer")
"""A lease's loss reason (and its metric code) when the session went unheard for a
whole session timeout."""


def _no_answer() -> tuple[str, str]:
    return NO_ANSWER


def _no_bounds() -> tuple[float, float] | None:
    return None


def _no_timing() -> tuple[float, str] | None:
    return None


def _no_problem() -> str | None:
    return None


# A lease takes this share of the session timeout off for clocks that run at different
# rates: our clock and the leader's may differ in rate by 1 %. Read by the transport's
# lease rule and by the option's validation, so it is said once, here.
DEFAULT_CLOCK_DRIFT = 0.01

# The session timeout (seconds) asked for when none is given: by the clients, the
# transport, the simulator and every command. Said once, here, at the bottom.
DEFAULT_SESSION_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What a lease asks of the client's session: pure values and a clock.

    ``last_answered_sent`` is when the client sent the last request the session's timer
    has surely counted; the lease-loss rule counts the session timeout from there.
    ``loss_reason`` says, at the instant that rule ends a lease, why (words, metric
    code): on an ensemble a member may answer while nothing proves the session at the
    leader, and "no answer" would then be false. ``lease_problem`` says why no lease can
    be kept on this session at all, with the fix (None: one can): acquire refuses then.
    """

    clock: Callable[[], float]
    session_timeout: Callable[[], float]
    last_answered_sent: Callable[[], float | None]
    connected: Callable[[], bool]
    # True on an ensemble: the lease's instant can pass while the connection is still
    # up (a member cut off from the leader goes on answering), so it is timed then too.
    lagging: Callable[[], bool] = _never
    loss_reason: Callable[[], tuple[str, str]] = _no_answer
    lease_problem: Callable[[], str | None] = _no_problem
    # the servers' tickTime the lease rule uses, and where it was learnt (None: none
    # needed, on a standalone server, or not known yet)
    timing: Callable[[], tuple[float, str] | None] = _no_timing
    # the servers' session bounds (shortest, longest: seconds), where learnt by handshakes
    session_bounds: Callable[[], tuple[float, float] | None] = _no_bounds


def tell_each(
    listeners: Iterable[Callable[[Any], object]], news: enum.Enum, log: logging.Logger
) -> None:
    """Call every listener with ``news``, in order. A listener that fails is logged, and
    the rest are still told: one user's broken callback must not silence the others, nor
    the state machine that called it. Iterates over a copy (a listener may unsubscribe)."""
    for listener in list(listeners):
        try:
            listener(news)
        except Exception:
            log.exception("listener %r failed on %s", listener, news.name)
