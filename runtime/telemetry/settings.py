"""The `telemetry` section: log format and level, trace export, metric labels."""

from __future__ import annotations

from typing import Literal

import msgspec


class TelemetrySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How this process logs, traces and counts (runtime/telemetry)."""

    # auto: JSON lines unless stderr is a terminal (then one readable line per record).
    log_format: Literal["auto", "json", "text"] = "auto"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # OTLP/HTTP traces endpoint (e.g. http://collector:4318/v1/traces); None: spans are made
    # (the correlation id is the trace id) but never exported.
    otlp_traces_endpoint: str | None = None
    # The service.name resource attribute of exported spans.
    service_name: str = "workflow-mcp"
    # Fraction of root traces recorded and exported (a Gateway's sampled flag is honoured).
    trace_sample_ratio: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.trace_sample_ratio <= 1.0:
            raise ValueError("telemetry: trace_sample_ratio must be within [0, 1]")
