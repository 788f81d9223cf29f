"""Prometheus metrics for zklocks: ``pip install "zklocks[metrics]"``, then ``enable()``.

::

    import prometheus_client, zklocks.metrics

    zklocks.metrics.enable()                # the default registry
    prometheus_client.start_http_server(9100)

Metrics: ``zklocks_acquire_seconds`` (histogram; ``kind``, ``result`` = acquired |
lock_delay (acquired after waiting out a lock-delay) | timeout | cancelled | error),
``zklocks_hold_seconds`` (histogram; ``kind``),
``zklocks_held`` and ``zklocks_waiting`` (gauges; ``kind``), ``zklocks_leases_lost_total``
(``reason`` = node_deleted | session_expired | client_stopped | no_answer | multi_part |
max_hold), ``zklocks_requests_total`` (``op``), ``zklocks_connection_state`` (enum: connected |
suspended | lost | closed, the last change of any client) and
``zklocks_reconnects_total``. ``kind`` is the contender kind: ``lock``, ``read``,
``write``, ``elect`` (an election candidate) or ``lease`` for a semaphore permit: the
kind is called ``permit`` since 0.2, and the label keeps its old name for one release.
docs/operations.md says what each counts.

There is no lock path label unless ``enable(path_label=True)``: one series per path
can be many series. Until ``enable()`` is called, ``prometheus_client`` is not imported
and every hook is one ``is None`` test.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from zklocks._core import events as _events
from zklocks._core.kinds import metric_label

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["disable", "enable"]

_STATES = [state.value for state in _events.ConnectionState]


def enable(registry: CollectorRegistry | None = None, *, path_label: bool = False) -> None:
    """Register the zklocks metrics in ``registry`` (the default one when None) and start
    counting, for every client of this process.

    Calling it again with the same registry changes nothing; with another registry the
    metrics move there. Raises ``ImportError`` with the install hint when
    ``prometheus_client`` is missing.
    """
    try:
        import prometheus_client
    except ImportError as error:
        raise ImportError(
            'zklocks metrics need prometheus_client: pip install "zklocks[metrics]"'
        ) from error
    if registry is None:
        registry = prometheus_client.REGISTRY
    current = _events.sink
    if isinstance(current, _PrometheusSink) and current.registry is registry:
        return
    disable()
    _events.sink = _PrometheusSink(registry, path_label)


def disable() -> None:
    """Stop counting and unregister the metrics (``enable()`` may be called again)."""
    current = _events.sink
    _events.sink = None
    if isinstance(current, _PrometheusSink):
        current.unregister()


_WORD = re.compile(r"(?<!^)(?=[A-Z])")


class _PrometheusSink:
    """Implements ``zklocks._core.events.Sink`` with prometheus_client metrics."""

    def __init__(self, registry: CollectorRegistry, path_label: bool) -> None:
        from prometheus_client import Counter, Enum, Gauge, Histogram

        self.registry = registry
        self._by_path = path_label
        path = ("path",) if path_label else ()
        self.acquire = Histogram(
            "zklocks_acquire_seconds",
            "Time spent in acquire, by outcome",
            ("kind", "result", *path),
            registry=registry,
        )
        self.hold = Histogram(
            "zklocks_hold_seconds",
            "Time from grant to release",
            ("kind", *path),
            registry=registry,
        )
        self.held_now = Gauge("zklocks_held", "Leases held now", ("kind", *path), registry=registry)
        self.waiting_now = Gauge(
            "zklocks_waiting", "Contenders waiting in line now", ("kind", *path), registry=registry
        )
        self.lost_total = Counter(
            "zklocks_leases_lost_total",
            "Leases lost while held, by reason",
            ("reason", *path),
            registry=registry,
        )
        self.requests = Counter(
            "zklocks_requests_total", "ZooKeeper requests sent", ("op",), registry=registry
        )
        self.connection = Enum(
            "zklocks_connection_state",
            "Connection state (the last change of any client)",
            states=_STATES,
            registry=registry,
        )
        self.reconnects = Counter(
            "zklocks_reconnects_total",
            "Connections re-made after the first (same or new session)",
            registry=registry,
        )
        # where the clients stand now; with none yet, there is no connection: closed
        self.connection.state((_events.last_state or _events.ConnectionState.CLOSED).value)
        self._ops: dict[type, Any] = {}
        self._collectors = (
            self.acquire,
            self.hold,
            self.held_now,
            self.waiting_now,
            self.lost_total,
            self.requests,
            self.connection,
            self.reconnects,
        )

    def unregister(self) -> None:
        for collector in self._collectors:
            self.registry.unregister(collector)

    def _labels(self, *values: str, path: str) -> tuple[str, ...]:
        return (*values, path) if self._by_path else values

    # -- the hooks -------------------------------------------------------------------

    def acquired(self, kind: str, path: str, result: str, seconds: float) -> None:
        self.acquire.labels(*self._labels(metric_label(kind), result, path=path)).observe(seconds)

    def waiting(self, kind: str, path: str, delta: int) -> None:
        self.waiting_now.labels(*self._labels(metric_label(kind), path=path)).inc(delta)

    def held(self, kind: str, path: str, delta: int) -> None:
        self.held_now.labels(*self._labels(metric_label(kind), path=path)).inc(delta)

    def released(self, kind: str, path: str, seconds: float) -> None:
        self.hold.labels(*self._labels(metric_label(kind), path=path)).observe(seconds)

    def lost(self, reason: str, path: str) -> None:
        self.lost_total.labels(*self._labels(reason, path=path)).inc()

    def request(self, request: object) -> None:
        counter = self._ops.get(type(request))
        if counter is None:
            name = type(request).__name__
            counter = self.requests.labels(_WORD.sub("_", name).lower())
            self._ops[type(request)] = counter
        counter.inc()

    def state(self, state: _events.ConnectionState) -> None:
        self.connection.state(state.value)

    def reconnected(self) -> None:
        self.reconnects.inc()
