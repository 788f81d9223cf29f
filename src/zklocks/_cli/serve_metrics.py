"""``GET /metrics`` of ``zklocks serve``: the Board as Prometheus gauges, made at scrape time.

Built with ``prometheus_client`` (the ``metrics`` extra, as ``zklocks.metrics``): a
collector reads the Board when Prometheus scrapes, so a scrape sends no ZooKeeper request
and the hold ages are as of the scrape. Label values are lock paths, foreign text:
passed through ``sanitise.clean`` as ``status`` does (the exposition format itself
only escapes ``\\``, ``"`` and newlines).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from zklocks._cli.sanitise import clean
from zklocks._cli.serve_state import Board

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

#: Every metric family ``serve`` exports, with its help text (docs/operations.md).
GAUGES = {
    "zklocks_lock_holders": "Contenders holding the lock now",
    "zklocks_lock_waiters": "Contenders waiting in line for the lock now",
    "zklocks_lock_oldest_hold_seconds": (
        "Seconds since the oldest holder's node was created (0 with no holder)"
    ),
    "zklocks_lock_fencing_token": "The highest holder's fencing token (absent with no holder)",
    "zklocks_lock_kind": "1 for the lock's kind (lock, read/write, semaphore, election)",
    "zklocks_serve_connected": "1 while zklocks serve has a live ZooKeeper session, else 0",
    "zklocks_server_info": (
        "1 per ZooKeeper member that answered srvr: its version and the ZOOKEEPER ids of "
        "its known transaction-loss bugs (known_issues, comma-separated; empty if none)"
    ),
}

#: ``(member, version, known_issues)`` of each member that answered, as of the scrape
ServerInfo = tuple[str, str, str]

INSTALL_HINT = 'zklocks serve needs prometheus_client: pip install "zklocks[metrics]"'


class BoardCollector:
    """A ``prometheus_client`` custom collector over the Board the feed keeps."""

    def __init__(
        self,
        board: Callable[[], Board],
        connected: Callable[[], bool],
        servers: Callable[[], list[ServerInfo]] = list,
    ) -> None:
        self._board = board
        self._connected = connected
        self._servers = servers

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        board = self._board()
        now = dt.datetime.now(tz=dt.UTC)
        families = {
            name: GaugeMetricFamily(name, text, labels=["path"])
            for name, text in GAUGES.items()
            if name not in ("zklocks_lock_kind", "zklocks_serve_connected", "zklocks_server_info")
        }
        kinds = GaugeMetricFamily(
            "zklocks_lock_kind", GAUGES["zklocks_lock_kind"], labels=["path", "kind"]
        )
        for path, view in board.locks.items():
            label = [clean(path, limit=None)]
            families["zklocks_lock_holders"].add_metric(label, len(view.holders))
            families["zklocks_lock_waiters"].add_metric(label, len(view.waiters))
            families["zklocks_lock_oldest_hold_seconds"].add_metric(label, view.oldest_hold(now))
            if view.token is not None:
                families["zklocks_lock_fencing_token"].add_metric(label, view.token)
            kinds.add_metric([*label, clean(view.kind)], 1)
        yield from families.values()
        yield kinds
        yield GaugeMetricFamily(
            "zklocks_serve_connected",
            GAUGES["zklocks_serve_connected"],
            value=1 if self._connected() else 0,
        )
        info = GaugeMetricFamily(
            "zklocks_server_info",
            GAUGES["zklocks_server_info"],
            labels=["member", "version", "known_issues"],
        )
        for member, version, issues in self._servers():
            info.add_metric([clean(member), clean(version), clean(issues)], 1)
        yield info


def registry_for(collector: BoardCollector) -> CollectorRegistry:
    """A registry of our own holding only ``collector`` (no process or GC metrics of the
    default registry: a sidecar's scrape is about the locks)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The scrape's body and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(registry), CONTENT_TYPE_LATEST
