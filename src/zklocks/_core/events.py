"""What a client tells the world: connection states, lock events in logs, metric hooks.

Three audiences, one module, so the lock and client classes each add one call:

* **Listeners** (``ConnectionState``, ``StateListeners``): the user's callbacks on the
  connection state, called on the thread (sync ``Client``) or the event loop
  (``AsyncClient``) that runs the connection.
* **Logs**: ``zklocks.lock`` records each acquire (queued, granted, gave up), release and
  loss. The library never configures logging; ``zklocks/__init__`` adds a
  ``NullHandler`` so nothing is printed unless the application asks.
* **Metrics**: ``sink`` is ``None`` until ``zklocks.metrics.enable()`` installs one, so an
  application without metrics pays one ``is None`` test per event and never imports
  ``prometheus_client``.
* **Traces**: ``tracing`` is ``None`` unless OpenTelemetry is installed (``zklocks.tracing``
  installs it when the package is imported); it then answers ``None`` for every acquire
  until a tracer provider is configured. The acquire span starts and ends at the same
  single points as the acquire metric (``AcquireProbe``); the hold span at the lease's
  grant, loss and release (``zklocks._core.lease``), where the held gauge is counted.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import weakref
from collections.abc import Callable, Generator
from typing import Any, Protocol

from zklocks._core import dialects as _dialects
from zklocks._core.lock_delay import LockDelayWait
from zklocks._core.ops import Op, Pipeline
from zklocks._errors import InvalidArgument, LockTimeout
from zklocks._protocol.records import Children, Created
from zklocks._vocabulary import SessionState, tell_each

log = logging.getLogger("zklocks.lock")
_state_log = logging.getLogger("zklocks.connection")


class ConnectionState(enum.Enum):
    """Where a client's connection to ZooKeeper stands, as its listeners hear it.

    ``CONNECTED``: a session is live on a connection. ``SUSPENDED``: the connection
    dropped; the session (and every lock held through it) may still be alive, and the
    client is reconnecting. ``LOST``: the session expired (or none was made yet); locks
    held through it are lost, and the client is making a new session. ``CLOSED``: the
    client was stopped. (kazoo's ``KazooState`` and Curator's ``ConnectionState`` name
    the same moments.)
    """

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"
    CLOSED = "closed"


StateListener = Callable[[ConnectionState], object]


class Sink(Protocol):
    """What the metrics module implements (see ``zklocks.metrics``)."""

    def acquired(self, kind: str, path: str, result: str, seconds: float) -> None: ...
    def waiting(self, kind: str, path: str, delta: int) -> None: ...
    def held(self, kind: str, path: str, delta: int) -> None: ...
    def released(self, kind: str, path: str, seconds: float) -> None: ...
    def lost(self, reason: str, path: str) -> None: ...
    def request(self, request: object) -> None: ...
    def state(self, state: ConnectionState) -> None: ...
    def reconnected(self) -> None: ...


class HoldTrace(Protocol):
    """One hold's span (``zklocks.hold``), from grant to end."""

    def event(self, name: str) -> None: ...
    def end(self, reason: str, lost: str | None) -> None: ...
    def traceparent(self) -> str | None: ...


class AcquireTrace(Protocol):
    """One acquire call's span (``zklocks.acquire``)."""

    def finished(
        self, outcome: str, position: int | None, token: int | None, error: str | None
    ) -> None: ...
    def hold(self, kind: str, path: str, token: int, node: str) -> HoldTrace: ...


class Tracing(Protocol):
    """What ``zklocks.tracing`` implements: a span per acquire, or None (no provider)."""

    def acquire(self, kind: str, path: str, layout: str) -> AcquireTrace | None: ...


sink: Sink | None = None  # set by zklocks.metrics.enable()
tracing: Tracing | None = None  # set by zklocks.tracing.install() (OpenTelemetry installed)
last_state: ConnectionState | None = None  # the last change of any client, for enable()


# -- connection state -------------------------------------------------------------------


class StateListeners:
    """A client's ``state`` and its listeners, fed with the session's transitions."""

    def __init__(self) -> None:
        self.state = ConnectionState.LOST  # no session yet
        self._listeners: list[StateListener] = []
        self._connected_before = False

    def add(self, fn: StateListener) -> None:
        if not callable(fn):
            raise InvalidArgument(f"a listener must be callable, not {fn!r}")
        self._listeners.append(fn)

    def remove(self, fn: StateListener) -> None:
        """Forget ``fn`` (every registration of it); no error if it was not added."""
        self._listeners[:] = [listener for listener in self._listeners if listener != fn]

    def on_session_state(self, session_state: SessionState) -> None:
        if session_state.value == "connecting":
            return
        state = ConnectionState(session_state.value)
        if state is self.state:
            return
        global last_state
        self.state = last_state = state
        metrics = sink
        if metrics is not None:
            metrics.state(state)
            if state is ConnectionState.CONNECTED and self._connected_before:
                metrics.reconnected()
        if state is ConnectionState.CONNECTED:
            self._connected_before = True
        tell_each(self._listeners, state, _state_log)


def weak_method(method: Callable[[Any], object]) -> Callable[[Any], None]:
    """``method`` held weakly: what a session keeps of its client, so that a client
    nobody refers to any more can be collected (and warn that it was never stopped)."""
    ref = weakref.WeakMethod(method)

    def call(value: Any) -> None:
        bound = ref()
        if bound is not None:
            bound(value)

    return call


# -- lock events ------------------------------------------------------------------------


class AcquireProbe:
    """Times one acquire call and reports it: queued, granted or gave up, and why.

    ``watch(flow)`` wraps the acquire flow only when someone listens (metrics enabled,
    or ``zklocks.lock`` logging at INFO); it reads the operations going by, never
    changes them.
    """

    __slots__ = ("error", "kind", "layout", "path", "position", "started", "token", "trace")

    def __init__(self, kind: str, path: str, layout: str = "zklocks") -> None:
        self.kind = kind
        self.path = path
        self.layout = layout
        self.started = time.monotonic()
        self.trace: AcquireTrace | None = None
        self.position: int | None = None  # our place in line when our node was made
        self.token: int | None = None
        self.error: str | None = None

    def watch(self, flow: Generator[Op, Any, Any]) -> Generator[Op, Any, Any]:
        tracer = tracing
        if tracer is not None:
            self.trace = tracer.acquire(self.kind, self.path, self.layout)
        if sink is None and self.trace is None and not log.isEnabledFor(logging.INFO):
            return flow
        return self._watched(flow)

    def _watched(self, flow: Generator[Op, Any, Any]) -> Generator[Op, Any, Any]:
        result = "error"
        queued = delayed = False
        mine: tuple[str, list[str]] | None = None  # our node and the listing it came with
        try:
            op = next(flow)
            while True:
                if isinstance(op, Pipeline) and op.watch and not queued:  # it waits
                    queued = True
                    self._queued(mine)
                    mine = None
                delayed = delayed or isinstance(op, LockDelayWait)
                try:
                    reply = yield op
                except GeneratorExit:
                    flow.close()
                    raise
                except BaseException as exc:
                    op = flow.throw(exc)
                    continue
                if isinstance(op, Pipeline) and isinstance(reply, tuple) and len(reply) == 2:
                    created, children = reply
                    if isinstance(children, Children):  # read with a lock-delay
                        children = children.names
                    if isinstance(created, Created) and isinstance(children, list):
                        mine = (created.path, children)
                        if self.trace is not None and self.position is None:
                            self.position = _position(mine)
                op = flow.send(reply)
        except StopIteration as stop:
            # a non-blocking miss is a timeout of zero (the metric's four results)
            result = "acquired" if stop.value is not None else "busy"
            if delayed and stop.value is not None:
                result = "lock_delay"  # acquired, after waiting out a lock-delay
            self.token = getattr(stop.value, "token", None)
            return stop.value
        except LockTimeout:
            result = "timeout"
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            result = "cancelled"
            raise
        except BaseException as error:
            self.error = type(error).__name__  # the span's error.type
            raise
        finally:
            self._finished(result, queued)

    def _queued(self, mine: tuple[str, list[str]] | None) -> None:
        metrics = sink
        if metrics is not None:
            metrics.waiting(self.kind, self.path, 1)
        if not log.isEnabledFor(logging.INFO):
            return
        position = _position(mine)
        if position is None:
            log.info("%s: %s is held by another contender; waiting", self.path, self.kind)
        else:
            log.info("%s: %s queued at position %d", self.path, self.kind, position)

    def _finished(self, result: str, queued: bool) -> None:
        seconds = time.monotonic() - self.started
        if self.trace is not None:
            outcome = _OUTCOMES.get(result, result)
            self.trace.finished(outcome, self.position, self.token, self.error)
        metrics = sink
        if metrics is not None:
            if queued:
                metrics.waiting(self.kind, self.path, -1)
            label = "timeout" if result == "busy" else result
            metrics.acquired(self.kind, self.path, label, seconds)
        if result == "acquired":
            log.info("%s: %s granted after %.3f s", self.path, self.kind, seconds)
        elif result == "lock_delay":
            log.info(
                "%s: %s granted after %.3f s (a lock-delay included)", self.path, self.kind, seconds
            )
        elif result == "busy":
            log.info(
                "%s: %s not acquired: held by another contender (no wait)", self.path, self.kind
            )
        else:
            log.info("%s: %s not acquired after %.3f s (%s)", self.path, self.kind, seconds, result)


# the span's words for the results
_OUTCOMES = {"acquired": "granted", "lock_delay": "granted", "busy": "timeout"}


def _position(mine: tuple[str, list[str]] | None) -> int | None:
    """Our place in the line (1: the head), from our node and the listing it came with."""
    if mine is None:
        return None
    node, children = mine
    me = _dialects.read_any(node.rsplit("/", 1)[1])  # in whichever layout it was made
    line = None if me is None else _dialects.DIALECTS[me.dialect].line_up_to(me, children)
    if me is None or line is None:
        return None
    for index, contender in enumerate(line):
        if contender.name == me.name:
            return index + 1
    return None


def lease_held(kind: str, path: str) -> bool:
    """A grant became a lease: count it as held. True if counted (a sink is installed)."""
    metrics = sink
    if metrics is None:
        return False
    metrics.held(kind, path, 1)
    return True


def lease_released(kind: str, path: str, held_for: float, counted: bool) -> None:
    """Its holder released a lease (``counted``: it was still in the held gauge)."""
    metrics = sink
    if metrics is not None:
        if counted:
            metrics.held(kind, path, -1)
        metrics.released(kind, path, held_for)
    log.info("%s: %s released after %.3f s held", path, kind, held_for)


def lease_revoke_requested(kind: str, path: str, token: int) -> None:
    """Someone asked this holder to let go (a revoke request reached its lease)."""
    log.info("%s: %s holder (token %d) was asked to let go (revoke)", path, kind, token)


def lease_lost(
    kind: str, path: str, held_for: float, token: int, why: tuple[str, str], counted: bool
) -> None:
    """A lease was lost while held: always worth a WARNING. ``why``: (reason, metric code)."""
    reason, code = why
    metrics = sink
    if metrics is not None:
        if counted:
            metrics.held(kind, path, -1)
        metrics.lost(code, path)
    log.warning("%s: %s lost after %.3f s held (token %d): %s", path, kind, held_for, token, reason)
