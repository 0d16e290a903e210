"""Log lines: JSON outside a terminal, readable on one, with the bound identifiers."""

from __future__ import annotations

import io
import json
import logging

from runtime.telemetry import TelemetrySettings, bound, configure_logging


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _emit(stream: io.StringIO, settings: TelemetrySettings) -> str:
    root = logging.getLogger()
    level = root.level
    configure_logging(settings, stream)
    try:
        with bound(host_id="h-1", tool="workflow_invoke", workflow_instance_id="r-1"):
            logging.getLogger("workflow.test").warning(
                "task failed", extra={"error_code": "WORKFLOW_TASK_FAILED", "incident": "i-1"}
            )
    finally:
        for handler in [h for h in root.handlers if getattr(h, "workflow_handler", False)]:
            root.removeHandler(handler)
        root.setLevel(level)
    return stream.getvalue()


def test_outside_a_terminal_each_record_is_one_json_line_with_its_fields() -> None:
    line = _emit(io.StringIO(), TelemetrySettings())
    record = json.loads(line)
    assert record["message"] == "task failed" and record["level"] == "WARNING"
    assert record["logger"] == "workflow.test"
    assert record["host_id"] == "h-1" and record["tool"] == "workflow_invoke"
    assert record["workflow_instance_id"] == "r-1"
    assert record["error_code"] == "WORKFLOW_TASK_FAILED" and record["incident"] == "i-1"


def test_on_a_terminal_a_record_is_a_readable_line_and_json_can_be_forced() -> None:
    text = _emit(_Terminal(), TelemetrySettings())
    assert text.count("\n") == 1 and "task failed" in text and "host_id=h-1" in text
    forced = _emit(_Terminal(), TelemetrySettings(log_format="json"))
    assert json.loads(forced)["incident"] == "i-1"
