"""What both front ends need to run flows on our own ``Connection``.

The connection answers futures, or a carrier's own reply slots, on its loop thread; the
drivers speak in flow replies (values, or ZooKeeper errors as *instances*), which those
slots hold (``_Latch``, ``_Gate``). These few functions bridge the carriers to the
connection, so the sync and asyncio sessions stay thin. Watch events need no bridge:
the connection emits the shared vocabulary's ``WatchEvent`` directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from zklocks._errors import ConnectionFailed
from zklocks._protocol.errors import ConnectionFailedError
from zklocks._transport.connection import Connection
from zklocks._vocabulary import SessionFacts, SessionState, Watcher


def submit_all(
    connection: Connection,
    requests: Sequence[object],
    watcher: Watcher | None,
    tokens: Sequence[Any] | None = None,
) -> list[asyncio.Future[Any]]:
    """Submit back to back (pipelined, one write); call on the loop thread. ``tokens``:
    the carrier's own reply slots, one per request, answered instead of new futures."""
    if len(requests) == 1:
        token = None if tokens is None else tokens[0]
        return [connection.submit(requests[0], watcher=watcher, token=token)]
    return connection.submit_many(requests, watcher=watcher, tokens=tokens)


def facts_of(connection: Connection) -> SessionFacts:
    """The facts a lease reads, straight from the connection.

    The lease counts from ``lease_sent``: the last answer the session's timer has surely
    counted, with every margin taken off (see ``lease_rule.py``).
    """
    return SessionFacts(
        clock=time.monotonic,
        session_timeout=lambda: connection.session_timeout,
        last_answered_sent=lambda: connection.lease_sent,
        lagging=lambda: connection.lease_lagging,
        connected=lambda: connection.state is SessionState.CONNECTED,
        loss_reason=connection.loss_reason,
        lease_problem=lambda: connection.lease_problem,
        timing=lambda: _timing_of(connection),
        session_bounds=lambda: _bounds_of(connection),
    )


def _bounds_of(connection: Connection) -> tuple[float, float] | None:
    bounds = connection.session_bounds
    return None if bounds is None else (bounds.shortest_ms / 1000, bounds.longest_ms / 1000)


def _timing_of(connection: Connection) -> tuple[float, str] | None:
    timing = connection.timing
    return None if timing is None else (timing.tick, timing.source)


def connection_failed(error: ConnectionFailedError) -> ConnectionFailed:
    """``start()``'s error: what went wrong, and what to try when nothing answered."""
    if error.refused:  # a TLS or credentials refusal: the message already says what to fix
        return ConnectionFailed(str(error))
    return ConnectionFailed(
        f"{error}; is ZooKeeper running there? Check hosts=, or start a local one "
        "with `zklocks server`"
    )
