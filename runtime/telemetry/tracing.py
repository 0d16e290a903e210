"""Spans: one per tools/call, admission, task execution and outbound call (OpenTelemetry).

The correlation id is the trace id. A Gateway's W3C `traceparent` continues its trace; each
outbound HTTP and MCP request carries ours. Spans are always made (so every call has a trace
id) and exported only when an OTLP endpoint is configured or an exporter is added (tests).

A run's tasks continue the trace of the call that admitted it while they execute in the same
process (the span context is remembered per run, bounded); a task claimed by another process
starts a trace of its own that names the run (workflow.instance_id).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runtime.telemetry.settings import TelemetrySettings

_PROPAGATOR = TraceContextTextMapPropagator()
_REMEMBERED_RUNS = 10_000
_run_parents: OrderedDict[str, trace.SpanContext] = OrderedDict()


def _provider(settings: TelemetrySettings) -> TracerProvider:
    return TracerProvider(
        sampler=ParentBased(TraceIdRatioBased(settings.trace_sample_ratio)),
        resource=Resource.create({"service.name": settings.service_name}),
    )


_state: dict[str, TracerProvider] = {"provider": _provider(TelemetrySettings())}
_tracers: dict[int, tuple[TracerProvider, trace.Tracer]] = {}


def configure_tracing(settings: TelemetrySettings) -> None:
    """Sampling, resource and (when configured) the OTLP/HTTP exporter of this process."""
    provider = _provider(settings)
    if settings.otlp_traces_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otlp_traces_endpoint)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    _state["provider"].shutdown()
    _state["provider"] = provider


def add_exporter(exporter: SpanExporter) -> SpanProcessor:
    """Export every finished span to exporter synchronously (tests, debugging)."""
    processor = SimpleSpanProcessor(exporter)
    _state["provider"].add_span_processor(processor)
    return processor


def _tracer() -> trace.Tracer:
    # get_tracer builds a new Tracer (and filters warnings) on every call: one per provider.
    provider = _state["provider"]
    cached = _tracers.get(id(provider))
    if cached is None or cached[0] is not provider:
        cached = (provider, provider.get_tracer("workflow"))
        _tracers.clear()
        _tracers[id(provider)] = cached
    return cached[1]


def correlation_id() -> str | None:
    """The current trace id (32 hex digits), or None outside any span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def inject_trace(headers: MutableMapping[str, str]) -> None:
    """Add the W3C traceparent (and tracestate) of the current span to outgoing headers."""
    _PROPAGATOR.inject(headers)


def _failed(span: Span, error: BaseException) -> None:
    # Only the type: messages may quote stored data or output values.
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))


@contextmanager
def server_span(name: str, headers: Mapping[str, str], **attributes: str) -> Iterator[Span]:
    """A SERVER span continuing the caller's traceparent when it sent a valid one."""
    parent = _PROPAGATOR.extract(dict(headers))
    with _tracer().start_as_current_span(
        name, context=parent, kind=SpanKind.SERVER, attributes=attributes,
        record_exception=False, set_status_on_exception=False,
    ) as span:  # fmt: skip
        try:
            yield span
        except BaseException as error:
            _failed(span, error)
            raise


@contextmanager
def child_span(
    name: str, attributes: Mapping[str, str], kind: SpanKind = SpanKind.INTERNAL
) -> Iterator[Span]:
    """A span under the current one (a new trace when there is none)."""
    with _tracer().start_as_current_span(
        name, kind=kind, attributes=attributes,
        record_exception=False, set_status_on_exception=False,
    ) as span:  # fmt: skip
        try:
            yield span
        except BaseException as error:
            _failed(span, error)
            raise


def remember_run(process_id: str) -> None:
    """The current span becomes the parent of the run's task spans in this process."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return
    _run_parents[process_id] = context
    _run_parents.move_to_end(process_id)
    while len(_run_parents) > _REMEMBERED_RUNS:
        _run_parents.popitem(last=False)


@contextmanager
def run_span(name: str, process_id: str, **attributes: str) -> Iterator[Span]:
    """A span of one of a run's tasks: a child of the admitting call's span when known here."""
    remembered = _run_parents.get(process_id)
    parent = None
    if remembered is not None:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remembered))
    with _tracer().start_as_current_span(
        name, context=parent, kind=SpanKind.CONSUMER,
        attributes={"workflow.instance_id": process_id, **attributes},
        record_exception=False, set_status_on_exception=False,
    ) as span:  # fmt: skip
        try:
            yield span
        except BaseException as error:
            _failed(span, error)
            raise
