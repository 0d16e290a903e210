"""Spans: one per tools/call, admission, task execution and outbound call (OpenTelemetry).

The correlation id is the trace id. A Gateway's W3C `traceparent` continues its trace; each
outbound HTTP and MCP request carries ours. Spans are always made (so every call has a trace
id) and exported only when an OTLP endpoint is configured or an exporter is added (tests).
While nothing exports, a span is a non-recording one with the ids, sampled flag and trace
state the SDK would have given it (same sampler, same id generator): it propagates the
context and names the trace exactly as a recorded span would, without the SDK's span object,
attribute checks and span-processor calls on every task and call.

A run's tasks continue the trace of the call that admitted it while they execute in the same
process (the span context is remembered per run, bounded); a task claimed by another process
starts a trace of its own that names the run (workflow.instance_id).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, MutableMapping
from types import TracebackType

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, Span, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from runtime.telemetry.settings import TelemetrySettings

_PROPAGATOR = TraceContextTextMapPropagator()
_REMEMBERED_RUNS = 10_000
_run_parents: OrderedDict[str, trace.SpanContext] = OrderedDict()
# Headers a W3C trace context is read from (lower case, as ASGI gives them).
_TRACE_HEADERS = ("traceparent", "tracestate")


def _provider(settings: TelemetrySettings) -> TracerProvider:
    return TracerProvider(
        sampler=ParentBased(TraceIdRatioBased(settings.trace_sample_ratio)),
        resource=Resource.create({"service.name": settings.service_name}),
    )


class _Tracing:
    """This process's provider, its one Tracer, and whether any span processor receives spans."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        # get_tracer builds a new Tracer (and filters warnings) on every call: one per provider.
        tracer = provider.get_tracer("workflow")
        assert isinstance(tracer, Tracer)
        self.tracer = tracer
        self.exporting = False


_state = {"tracing": _Tracing(_provider(TelemetrySettings()))}


def configure_tracing(settings: TelemetrySettings) -> None:
    """Sampling, resource and (when configured) the OTLP/HTTP exporter of this process."""
    previous = _state["tracing"]
    _state["tracing"] = _Tracing(_provider(settings))
    previous.provider.shutdown()
    if settings.otlp_traces_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otlp_traces_endpoint)
        add_span_processor(BatchSpanProcessor(exporter))


def add_span_processor(processor: SpanProcessor) -> None:
    """Send every finished span to processor from now on (the OTLP exporter, or a test's)."""
    tracing = _state["tracing"]
    tracing.provider.add_span_processor(processor)
    tracing.exporting = True


def _unexported_span(tracer: Tracer, name: str, parent: Context | None, kind: SpanKind) -> Span:
    # Tracer.start_span's ids, flags and trace state, minus the recording span nobody reads.
    parent_context = trace.get_current_span(parent).get_span_context()
    if parent_context.is_valid:
        trace_id = parent_context.trace_id
        random_trace_id = parent_context.trace_flags.random_trace_id
    else:
        trace_id = tracer.id_generator.generate_trace_id()
        random_trace_id = tracer.id_generator.is_trace_id_random()
    sampling = tracer.sampler.should_sample(parent, trace_id, name, kind)
    sampled = sampling.decision.is_sampled()  # type: ignore[no-untyped-call]
    flags = TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT
    if random_trace_id:
        flags |= TraceFlags.RANDOM_TRACE_ID
    return NonRecordingSpan(
        trace.SpanContext(
            trace_id,
            tracer.id_generator.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=sampling.trace_state,
        )
    )


class _Current:
    """A span made current for a block, ended after it; a failure sets its status (type only)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = context_api.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(
        self,
        error_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if error is not None:
                _failed(self._span, error)
            context_api.detach(self._token)  # type: ignore[arg-type]
        finally:
            self._span.end()


def _span(
    name: str,
    parent: Context | None,
    kind: SpanKind,
    attributes: Mapping[str, str],
) -> _Current:
    tracing = _state["tracing"]
    if not tracing.exporting:
        return _Current(_unexported_span(tracing.tracer, name, parent, kind))
    span = tracing.tracer.start_span(
        name, context=parent, kind=kind, attributes=attributes,
        record_exception=False, set_status_on_exception=False,
    )  # fmt: skip
    return _Current(span)


def correlation_id() -> str | None:
    """The current trace id (32 hex digits), or None outside any span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def inject_trace(headers: MutableMapping[str, str]) -> None:
    """Add the W3C traceparent (and tracestate) of the current span to outgoing headers."""
    _PROPAGATOR.inject(headers)


def _failed(span: Span, error: BaseException) -> None:
    # Only the type: messages may quote stored data or output values.
    if span.is_recording():
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))


def server_span(name: str, headers: Mapping[str, str], **attributes: str) -> _Current:
    """A SERVER span continuing the caller's traceparent when it sent a valid one."""
    # Never the current span: a call without a valid traceparent starts a trace of its own.
    carrier = {key: headers[key] for key in _TRACE_HEADERS if key in headers}
    parent = _PROPAGATOR.extract(carrier) if carrier else Context()
    return _span(name, parent, SpanKind.SERVER, attributes)


def child_span(
    name: str, attributes: Mapping[str, str], kind: SpanKind = SpanKind.INTERNAL
) -> _Current:
    """A span under the current one (a new trace when there is none)."""
    return _span(name, None, kind, attributes)


def remember_run(process_id: str) -> None:
    """The current span becomes the parent of the run's task spans in this process."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return
    _run_parents[process_id] = context
    _run_parents.move_to_end(process_id)
    while len(_run_parents) > _REMEMBERED_RUNS:
        _run_parents.popitem(last=False)


def run_span(name: str, process_id: str, **attributes: str) -> _Current:
    """A span of one of a run's tasks: a child of the admitting call's span when known here."""
    remembered = _run_parents.get(process_id)
    parent = None
    if remembered is not None:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remembered))
    return _span(
        name, parent, SpanKind.CONSUMER, {"workflow.instance_id": process_id, **attributes}
    )
