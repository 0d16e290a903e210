"""Logs, traces and metrics of the service (seed 001 "Observability And Audit").

Low in the layer order (beside store and security): every domain may call it, it calls none.
"""

from __future__ import annotations

from runtime.telemetry import metrics
from runtime.telemetry.calls import (
    ObservedCall,
    admission,
    caller,
    outbound,
    run_admitted,
    task,
    tool_call,
)
from runtime.telemetry.context import bind, bound
from runtime.telemetry.logs import configure_logging
from runtime.telemetry.settings import TelemetrySettings
from runtime.telemetry.tracing import configure_tracing, correlation_id, inject_trace


def configure(settings: TelemetrySettings) -> None:
    """Set up this process's logging and tracing from the `telemetry` section."""
    configure_logging(settings)
    configure_tracing(settings)


__all__ = [
    "ObservedCall",
    "TelemetrySettings",
    "admission",
    "bind",
    "bound",
    "caller",
    "configure",
    "configure_logging",
    "configure_tracing",
    "correlation_id",
    "inject_trace",
    "metrics",
    "outbound",
    "run_admitted",
    "task",
    "tool_call",
]
