"""The observation of each unit of work: span, metrics and the access record, in one place.

Other domains call these with one line each (a context manager, or a wrapped awaitable), so
their modules stay about their own work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from opentelemetry.trace import SpanKind

from runtime.telemetry import metrics
from runtime.telemetry.context import bind, bound
from runtime.telemetry.tracing import (
    child_span,
    correlation_id,
    remember_run,
    run_span,
    server_span,
)

T = TypeVar("T")
access_log = logging.getLogger("workflow.access")


@dataclass
class ObservedCall:
    """One tools/call in flight: its correlation id and, once known, its outcome code."""

    tool: str
    correlation_id: str | None
    code: str = "ok"
    started: float = field(default_factory=time.perf_counter)


@contextmanager
def tool_call(tool: str, headers: Mapping[str, str]) -> Iterator[ObservedCall]:
    """Span, metrics and one access record for a tools/call (tool: a served name or "unknown")."""
    with server_span("tools/call", headers, **{"mcp.tool.name": tool}) as span, bound(tool=tool):
        observed = ObservedCall(tool, correlation_id())
        try:
            yield observed
        except BaseException as error:
            if observed.code == "ok":  # the caller sets the code of what it expected
                observed.code = type(error).__name__
            raise
        finally:
            seconds = time.perf_counter() - observed.started
            span.set_attribute("workflow.outcome", observed.code)
            metrics.labelled(metrics.TOOL_CALLS, tool, observed.code).inc()
            metrics.labelled(metrics.TOOL_CALL_SECONDS, tool).observe(seconds)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "tools/call %s %s",
                    tool,
                    observed.code,
                    extra={
                        "outcome": observed.code,
                        "duration_ms": round(seconds * 1000, 3),
                        "error_code": None if observed.code == "ok" else observed.code,
                    },
                )


def caller(host_id: str) -> None:
    """The verified host of the current call, for its log records and span."""
    bind(host_id=host_id)


async def admission(operation: str, work: Awaitable[T]) -> T:
    """Run an admission (workflow_invoke's transaction, workflow_start) under its span, timed."""
    began = time.perf_counter()
    with child_span("workflow.admission", {"workflow.operation": operation}):
        try:
            return await work
        finally:
            seconds = time.perf_counter() - began
            metrics.labelled(metrics.ADMISSION_SECONDS, operation).observe(seconds)


def run_admitted(process_id: str) -> None:
    """A run was written: its tasks continue the current trace when executed in this process."""
    remember_run(process_id)
    bind(workflow_instance_id=process_id)


async def task(
    process_id: str, host_id: str, kind: str, execution_class: str, work: Awaitable[T]
) -> T:
    """Run one task execution under its span and log context."""
    with (
        bound(host_id=host_id, workflow_instance_id=process_id, task=kind),
        run_span(
            "workflow.task", process_id, **{"workflow.task.kind": kind,
                                            "workflow.execution_class": execution_class}
        ),
    ):  # fmt: skip
        try:
            return await work
        except BaseException as error:
            code = getattr(getattr(error, "code", None), "value", None)
            if isinstance(code, str):
                metrics.record_task_error(execution_class, code)
            raise


async def outbound(kind: str, endpoint: str, work: Awaitable[T]) -> T:
    """Run one outbound HTTP or MCP call under a CLIENT span, timed by endpoint reference."""
    began = time.perf_counter()
    with child_span(f"outbound.{kind}", {"workflow.endpoint_ref": endpoint}, SpanKind.CLIENT):
        try:
            return await work
        except BaseException:
            metrics.labelled(metrics.OUTBOUND_FAILURES, kind, endpoint).inc()
            raise
        finally:
            seconds = time.perf_counter() - began
            metrics.labelled(metrics.OUTBOUND_SECONDS, kind, endpoint).observe(seconds)
