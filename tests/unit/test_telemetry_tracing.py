"""Spans while nothing exports: the SDK's ids, flags and propagation without a recorded span."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runtime.telemetry import TelemetrySettings, configure_tracing, correlation_id, inject_trace
from runtime.telemetry.tracing import (
    add_span_processor,
    child_span,
    remember_run,
    run_span,
    server_span,
)

GATEWAY_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SAMPLED_PARENT = {"traceparent": f"00-{GATEWAY_TRACE}-00f067aa0ba902b7-01"}
UNSAMPLED_PARENT = {"traceparent": f"00-{GATEWAY_TRACE}-00f067aa0ba902b7-00"}


@pytest.fixture(autouse=True)
def fresh_tracing() -> Iterator[None]:
    """A provider with no exporter before and after each test."""
    configure_tracing(TelemetrySettings())
    yield
    configure_tracing(TelemetrySettings())


def _parent_of_outbound() -> tuple[str, str, str]:
    headers: dict[str, str] = {}
    inject_trace(headers)
    _, trace_id, span_id, flags = headers["traceparent"].split("-")
    return trace_id, span_id, flags


def test_without_an_exporter_a_call_span_records_nothing_but_continues_the_callers_trace() -> None:
    with server_span("tools/call", SAMPLED_PARENT, **{"mcp.tool.name": "t"}) as span:
        assert not span.is_recording()
        assert correlation_id() == GATEWAY_TRACE
        trace_id, span_id, flags = _parent_of_outbound()
        assert (trace_id, flags) == (GATEWAY_TRACE, "01")
        assert span_id not in ("00f067aa0ba902b7", "0" * 16)
        with child_span("workflow.admission", {}) as child:
            assert not child.is_recording()
            assert correlation_id() == GATEWAY_TRACE
            assert child.get_span_context().span_id != span.get_span_context().span_id
    assert correlation_id() is None


def test_without_an_exporter_the_callers_unsampled_flag_is_kept() -> None:
    with server_span("tools/call", UNSAMPLED_PARENT):
        assert _parent_of_outbound()[0::2] == (GATEWAY_TRACE, "00")


def test_without_an_exporter_a_call_without_traceparent_starts_its_own_sampled_trace() -> None:
    with server_span("tools/call", {}) as outer, server_span("tools/call", {}) as inner:
        own = correlation_id()
        assert own is not None and len(own) == 32 and own != GATEWAY_TRACE
        # A server span never continues the current span: each call is a trace of its own.
        assert inner.get_span_context().trace_id != outer.get_span_context().trace_id
        # Sampled, and (W3C level 2, as the SDK sets it) a random trace id.
        assert _parent_of_outbound()[2] == "03"


def test_without_an_exporter_the_sample_ratio_still_decides_the_flag() -> None:
    configure_tracing(TelemetrySettings(trace_sample_ratio=0.0))
    with server_span("tools/call", {}):
        assert correlation_id() is not None
        assert _parent_of_outbound()[2] == "02"


def test_without_an_exporter_a_runs_tasks_continue_the_admitting_calls_trace() -> None:
    with server_span("tools/call", SAMPLED_PARENT):
        remember_run("run-1")
    with run_span("workflow.task", "run-1") as task:
        assert not task.is_recording()
        assert correlation_id() == GATEWAY_TRACE
    with run_span("workflow.task", "run-unknown-here"):
        assert correlation_id() not in (None, GATEWAY_TRACE)


def test_a_failure_inside_an_unexported_span_propagates_and_restores_the_context() -> None:
    with pytest.raises(KeyError), server_span("tools/call", SAMPLED_PARENT):
        raise KeyError("x")
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_with_an_exporter_spans_are_recorded_with_parents_attributes_and_failure_status() -> None:
    exporter = InMemorySpanExporter()
    add_span_processor(SimpleSpanProcessor(exporter))
    with pytest.raises(ValueError), server_span("tools/call", SAMPLED_PARENT, tool="t") as span:
        assert span.is_recording()
        with child_span("workflow.admission", {"workflow.operation": "invoke"}):
            pass
        raise ValueError("no message in the status")
    child, call = exporter.get_finished_spans()
    assert call.context.trace_id == int(GATEWAY_TRACE, 16)
    assert child.parent is not None and child.parent.span_id == call.context.span_id
    assert dict(child.attributes or {}) == {"workflow.operation": "invoke"}
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == "ValueError"
