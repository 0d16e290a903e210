"""Invocation rules, idempotency, lifecycle, waiting and results (admission: runtime.admission)."""

from __future__ import annotations

from runtime.invocation.disclosure import ceiling as disclosure_ceiling
from runtime.invocation.lifecycle import cancel, get_result, get_status, wait_result
from runtime.invocation.requests import InvokeRequest, StartRequest, given
from runtime.invocation.rules import (
    SchemaCheck,
    canonical_input,
    check_request_bytes,
    schema_check,
)
from runtime.invocation.waiting import MAX_WAIT_MS

__all__ = [
    "MAX_WAIT_MS",
    "InvokeRequest",
    "SchemaCheck",
    "StartRequest",
    "cancel",
    "canonical_input",
    "check_request_bytes",
    "disclosure_ceiling",
    "get_result",
    "get_status",
    "given",
    "schema_check",
    "wait_result",
]
