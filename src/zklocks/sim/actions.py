"""What a simulated client's program yields to the scheduler (*actions*), and the
records the two keep of it: a grant while held (``Grant``), how an acquire call ended
(``Outcome``), a watch notification on its way (``Delivery``), a lease keeper's timer on
the virtual clock (``Timer``). Plain data, apart from the client that makes them and the
scheduler that answers them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from zklocks._core.lease import Lease
from zklocks._core.ops import Request
from zklocks._vocabulary import Watcher, WatchEvent
from zklocks.sim.model import Notification

# -- actions a client's program yields ------------------------------------------------


@dataclass(slots=True)
class Send:
    """Send one request now (the reply is the outcome)."""

    request: Request
    watcher: Watcher | None
    epoch: int  # the connection it is sent on; a drop since then loses it


@dataclass(slots=True)
class AwaitConnection:
    """Wait to reconnect: outcome CONNECTED, EXPIRED (new session) or TIMED_OUT."""

    deadline: float | None


@dataclass(slots=True)
class AwaitWake:
    """Wait until a watcher fired into ``fired`` (True) or the deadline passed (False)."""

    fired: list[WatchEvent]
    deadline: float | None


@dataclass(slots=True)
class Sleep:
    until: float


Action: TypeAlias = Send | AwaitConnection | AwaitWake | Sleep
CONNECTED = "connected"
EXPIRED = "expired"


@dataclass(slots=True)
class Grant:
    """A grant while (and after) its holder holds it."""

    client: int
    kind: str
    node: str
    token: int
    session_id: int
    lease: Lease
    granted_at: float


@dataclass(slots=True)
class Outcome:
    """How one acquire call ended: granted | missed | timed out | interrupted."""

    client: int
    kind: str
    result: str
    at: float


@dataclass(slots=True)
class Delivery:
    """A watch notification on its way to a client (``deliver_at`` on the virtual clock)."""

    deliver_at: float
    order: float
    notification: Notification
    held: bool = False  # a reordered one, waiting to be overtaken


@dataclass(slots=True)
class Timer:
    """A ``LeaseKeeper`` timer on the virtual clock (frozen while its client is paused)."""

    due: float
    order: int
    fn: Callable[[], None]
    cancelled: bool = False


__all__ = [
    "CONNECTED",
    "EXPIRED",
    "Action",
    "AwaitConnection",
    "AwaitWake",
    "Delivery",
    "Grant",
    "Outcome",
    "Send",
    "Sleep",
    "Timer",
]
