"""OpenTelemetry's SDK for the spans' tests: one tracer provider for the process (the
API lets a process set it once), its spans kept in memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from zklocks import tracing

_exporter: InMemorySpanExporter | None = None


def exporter() -> InMemorySpanExporter:
    """The process' provider, set on first use, and its in-memory exporter."""
    global _exporter
    if _exporter is None:
        _exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
    return _exporter


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans the test makes; zklocks' hooks installed for it alone, so the other
    tests of the process make none."""
    found = exporter()
    found.clear()
    assert tracing.install()
    yield found
    tracing.uninstall()
    found.clear()


def named(exported: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exported.get_finished_spans() if span.name == name]


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})
