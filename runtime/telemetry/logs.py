"""Structured logs: one record shape, JSON lines for machines and a readable line on a terminal.

Every record carries the correlation id (the trace id) and the identifiers bound in the
current context (host, tool, run, task); callers add `error_code` and `incident` as `extra`.
Nothing here formats a token, an input value or an output value: only identifiers and codes
are ever bound, and messages are written by this service, never copied from requests.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

from runtime.telemetry.context import LOG_FIELDS, current_fields
from runtime.telemetry.settings import TelemetrySettings
from runtime.telemetry.tracing import correlation_id

NAMESPACE = "workflow"
RECORD_FIELDS = (
    "correlation_id", *LOG_FIELDS, "error_code", "incident", "outcome", "duration_ms",
    "claim_round",  # the executor's claim round that claimed work (DEBUG)
)  # fmt: skip
# Loggers named after their modules (runtime.*) share the handler of the service namespace.
_NAMESPACES = (NAMESPACE, "runtime")


class ContextFilter(logging.Filter):
    """Attach the correlation id and the bound identifiers to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always passes the record, with the context's fields added where it has none."""
        if getattr(record, "correlation_id", None) is None:
            record.correlation_id = correlation_id()
        for name, value in current_fields().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a record carries (absent ones left out)."""
    fields = {}
    for name in RECORD_FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            fields[name] = value
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, then the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON line (an exception contributes its type only)."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """A readable line for a terminal: time, level, message, then key=value fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line."""
        ts = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S.%f")[:-3]
        extra = " ".join(f"{name}={value}" for name, value in fields_of(record).items())
        text = f"{ts} {record.levelname:<7} {record.name}: {record.getMessage()}"
        return f"{text}  {extra}" if extra else text


def formatter_for(settings: TelemetrySettings, stream: IO[str]) -> logging.Formatter:
    """JSON outside a terminal (or when asked), text on one."""
    if settings.log_format == "json":
        return JsonFormatter()
    if settings.log_format == "text":
        return TextFormatter()
    isatty = getattr(stream, "isatty", None)
    return TextFormatter() if isatty is not None and isatty() else JsonFormatter()


def configure_logging(settings: TelemetrySettings, stream: IO[str] | None = None) -> None:
    """Route the service's loggers to one handler on stream (stderr) in the chosen format."""
    target = sys.stderr if stream is None else stream
    handler = logging.StreamHandler(target)
    handler.setFormatter(formatter_for(settings, target))
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "workflow_handler", False):
            root.removeHandler(existing)
    handler.workflow_handler = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in _NAMESPACES:
        logging.getLogger(name).setLevel(settings.log_level)
