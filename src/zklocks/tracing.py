"""OpenTelemetry spans for every acquire and every hold: ``pip install "zklocks[otel]"``.

Nothing to call: when ``opentelemetry-api`` is installed, importing ``zklocks`` installs
the hooks, and spans are made as soon as the application configures a tracer provider
(``opentelemetry.trace.set_tracer_provider``, or the SDK's auto-instrumentation). With no
provider each acquire asks once and makes nothing; without the package, nothing is
imported and each acquire pays one ``is None`` test.

Spans (names and attributes in docs/operations.md, "Traces"):

* ``zklocks.acquire``: one acquire call, in the caller's current context: the lock's
  path, kind and layout, our place in line when our node was made, the seconds waited,
  the outcome (granted, timeout, cancelled, error) and, granted, the fencing token.
* ``zklocks.hold``: from the grant to the hold's end, linked to its acquire span, a
  sibling of it in the caller's context: why it ended (released, revoked: released after
  a revoke request; lost; max_hold), with events ``zklocks.suspended``,
  ``zklocks.resumed`` and ``zklocks.revoke_requested``. An election term is a hold of
  kind ``elect``. ``lease.traceparent`` is its W3C ``traceparent``: ``zklocks run`` and
  ``zklocks elect`` put it in the command's ``TRACEPARENT``, and join the ``TRACEPARENT``
  they were started with (``join_environment``).

No attribute carries a secret: paths, kinds, tokens and node names only.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from zklocks._core import events as _events

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["install", "join_environment", "uninstall"]

# attribute names (no semantic convention covers locks: ours are under "zklocks.")
PATH = "zklocks.lock.path"
KIND = "zklocks.lock.kind"
LAYOUT = "zklocks.lock.layout"
TOKEN = "zklocks.lock.token"
NODE = "zklocks.lock.node"
POSITION = "zklocks.acquire.queue_position"
WAITED = "zklocks.acquire.wait_seconds"
OUTCOME = "zklocks.acquire.outcome"
END = "zklocks.hold.end_reason"
LOST = "zklocks.hold.lost_reason"
ERROR_TYPE = "error.type"  # semantic conventions: the error's class, on a failed acquire


_UNKNOWN = object()


def _version() -> str:
    """The instrumentation's version: the installed package's (read once, at the tracer's
    making; the package itself sits above this module)."""
    try:
        return importlib.metadata.version("zklocks")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def install() -> bool:
    """Install the hooks if ``opentelemetry-api`` is importable (done when ``zklocks`` is
    imported; calling it again changes nothing). True if installed."""
    if _events.tracing is None and _api_installed():
        _events.tracing = _OtelTracing()
    return _events.tracing is not None


def _api_installed() -> bool:
    """Is ``opentelemetry.trace`` there? (Not only an ``opentelemetry`` namespace: an
    uninstalled API can leave its folder behind.) Found without importing it."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError):
        return False


def join_environment(environ: Mapping[str, str] = os.environ) -> bool:
    """Make the W3C ``TRACEPARENT`` (and ``TRACESTATE``) of ``environ`` this thread's
    current trace context, so the spans made from here (a ``zklocks run`` started by a
    traced job) join the trace of whoever started us. True if one was joined; nothing is
    imported unless spans can be made."""
    parent = environ.get("TRACEPARENT")
    if not parent or _events.tracing is None:
        return False
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": parent, "tracestate": environ.get("TRACESTATE", "")}
    joined = TraceContextTextMapPropagator().extract(carrier)
    if not joined:
        return False
    context.attach(joined)
    return True


def uninstall() -> None:
    """No spans from now on (``install()`` puts the hooks back)."""
    _events.tracing = None


class _OtelTracing:
    """``zklocks._core.events.Tracing`` on the OpenTelemetry API."""

    def __init__(self) -> None:
        self._trace: Any = None  # the opentelemetry.trace module, imported at first use
        self._tracer: Tracer | None = None

    def _current(self) -> Tracer | None:
        """The tracer of the configured provider; None while there is none (spans would
        be dropped, so none are made).

        Cheap on purpose, as it runs on every acquire: the API lets a process set its
        provider once, so a tracer found is kept; until then we read the API's global
        (``get_tracer_provider()`` would look up an environment variable each time, a
        few microseconds). A provider named by ``OTEL_PYTHON_TRACER_PROVIDER`` is loaded
        by the API's own call, made once here.
        """
        if self._tracer is not None:
            return self._tracer
        trace: Any = self._trace
        if trace is None:
            try:
                from opentelemetry import trace as api
            except ImportError:  # unusable after all: no spans, and no more looks
                uninstall()
                return None
            self._trace = trace = api
            if "OTEL_PYTHON_TRACER_PROVIDER" in os.environ:
                trace.get_tracer_provider()  # loads and sets the named provider
        provider: Any = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
        if provider is None:
            return None  # none set
        if provider is _UNKNOWN:  # an API that keeps it elsewhere: ask it
            provider = trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None
        tracer: Tracer = provider.get_tracer("zklocks", _version())
        self._tracer = tracer
        return tracer

    def acquire(self, kind: str, path: str, layout: str) -> _AcquireSpan | None:
        tracer = self._current()
        if tracer is None:
            return None
        span = tracer.start_span(
            "zklocks.acquire", attributes={PATH: path, KIND: kind, LAYOUT: layout}
        )
        return _AcquireSpan(self._trace, tracer, span)


class _AcquireSpan:
    def __init__(self, trace: Any, tracer: Tracer, span: Span) -> None:
        self._trace = trace
        self._tracer = tracer
        self._span = span
        self._started = time.monotonic()

    def finished(
        self, outcome: str, position: int | None, token: int | None, error: str | None
    ) -> None:
        span = self._span
        span.set_attribute(OUTCOME, outcome)
        span.set_attribute(WAITED, time.monotonic() - self._started)
        if position is not None:
            span.set_attribute(POSITION, position)
        if token is not None:
            span.set_attribute(TOKEN, token)
        if outcome == "error":
            span.set_attribute(ERROR_TYPE, error or "error")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        span.end()

    def hold(self, kind: str, path: str, token: int, node: str) -> _HoldSpan:
        trace = self._trace
        span = self._tracer.start_span(
            "zklocks.hold",
            attributes={PATH: path, KIND: kind, TOKEN: token, NODE: node},
            links=[trace.Link(self._span.get_span_context())],
        )
        return _HoldSpan(trace, span)


class _HoldSpan:
    def __init__(self, trace: Any, span: Span) -> None:
        self._trace = trace
        self._span = span

    def event(self, name: str) -> None:
        self._span.add_event(name)

    def end(self, reason: str, lost: str | None) -> None:
        self._span.set_attribute(END, reason)
        if lost is not None:
            self._span.set_attribute(LOST, lost)
        self._span.end()

    def traceparent(self) -> str | None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        context = self._trace.set_span_in_context(self._span)
        TraceContextTextMapPropagator().inject(carrier, context=context)
        return carrier.get("traceparent")
