"""bindingFields: Workflow's own rules on the binding member of a publish request.

The catalog validator has already checked the binding's structure (members, types, formats,
bounds); what stays here is what the contract leaves to Workflow: sync-only mode and its limits,
the write-Tool replay window, contradictory annotations, admission limits that must nest, and
the root type of carried schemas.
"""

from __future__ import annotations

import re

from msgspec import UNSET

from generated.models import AdmissionLimits, ToolAnnotations, ToolBinding
from runtime.binding_reach import Annotations, annotations_of
from runtime.canonical.patterns import PatternError, check_schema_patterns
from runtime.publication.bindings.binding_problems import BindingProblem
from runtime.publication.bindings.rejections import RequestSection

DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")

MAX_SYNC_WAIT_MS = 20_000
MAX_TOTAL_DEADLINE_MS = 30_000
MIN_WRITE_REPLAY_MS = 600_000


def _problem(pointer: str, rule: str, message: str) -> BindingProblem:
    return BindingProblem(pointer, rule, message, section="binding")


def annotation_problems(
    value: ToolAnnotations, where: str, pointer: str, *, section: RequestSection = "binding"
) -> list[BindingProblem]:
    """readOnly together with destructive is contradictory."""
    if value.read_only and value.destructive:
        message = f"{where}: a read-only Tool cannot be destructive"
        return [BindingProblem(pointer, "contradictory-annotations", message, section=section)]
    return []


def _mode_problems(binding: ToolBinding) -> list[BindingProblem]:
    found = []
    if binding.invocation_mode != "sync":
        message = "workflow-backed Tools are sync only: invocationMode must be sync"
        found.append(_problem("/binding/invocationMode", "sync-only", message))
    if binding.execution_class != "interactive":
        message = "a sync binding must use executionClass interactive"
        found.append(_problem("/binding/executionClass", "sync-only", message))
    if binding.sync_wait_ms > MAX_SYNC_WAIT_MS:
        message = f"binding.syncWaitMs must be between 1 and {MAX_SYNC_WAIT_MS}"
        found.append(_problem("/binding/syncWaitMs", "binding-limit", message))
    if binding.total_deadline_ms > MAX_TOTAL_DEADLINE_MS:
        message = f"binding.totalDeadlineMs must be between 1 and {MAX_TOTAL_DEADLINE_MS}"
        found.append(_problem("/binding/totalDeadlineMs", "binding-limit", message))
    if binding.total_deadline_ms < binding.sync_wait_ms:
        message = "binding.totalDeadlineMs must be at least syncWaitMs"
        found.append(_problem("/binding/totalDeadlineMs", "binding-limit", message))
    return found


def _replay_window_problems(binding: ToolBinding, annotations: Annotations) -> list[BindingProblem]:
    if annotations.is_write and binding.idempotency_policy.result_replay_ms < MIN_WRITE_REPLAY_MS:
        message = (
            f"a write Tool needs idempotencyPolicy.resultReplayMs of at least "
            f"{MIN_WRITE_REPLAY_MS}, so a client retry replays instead of writing twice"
        )
        pointer = "/binding/idempotencyPolicy/resultReplayMs"
        return [_problem(pointer, "replay-window", message)]
    return []


def _admission_limit_problems(limits: AdmissionLimits) -> list[BindingProblem]:
    found = []
    if limits.maximum_concurrent_runs_per_user > limits.maximum_concurrent_runs:
        message = "admissionLimits.maximumConcurrentRunsPerUser exceeds maximumConcurrentRuns"
        pointer = "/binding/admissionLimits/maximumConcurrentRunsPerUser"
        found.append(_problem(pointer, "admission-limits", message))
    if limits.starts_per_minute_per_user > limits.starts_per_minute:
        message = "admissionLimits.startsPerMinutePerUser exceeds startsPerMinute"
        pointer = "/binding/admissionLimits/startsPerMinutePerUser"
        found.append(_problem(pointer, "admission-limits", message))
    return found


def _schema_problems(binding: ToolBinding) -> list[BindingProblem]:
    found = []
    for key, schema in (
        ("inputSchema", binding.input_schema),
        ("outputSchema", binding.output_schema),
    ):
        if schema is UNSET:
            continue
        pointer = f"/binding/{key}"
        if schema.get("type") != "object":
            message = f"binding.{key} must be a JSON Schema whose root type is object"
            found.append(_problem(pointer, "schema-root", message))
        try:
            check_schema_patterns(schema)
        except PatternError as exc:
            found.append(_problem(pointer, "schema-pattern", f"binding.{key}: {exc}"))
    return found


def binding_field_problems(binding: ToolBinding) -> list[BindingProblem]:
    """Every bindingFields rule the binding breaks, in field order (section binding)."""
    annotations = annotations_of(binding.tool_annotations)
    return [
        *_mode_problems(binding),
        *annotation_problems(
            binding.tool_annotations, "binding.toolAnnotations", "/binding/toolAnnotations"
        ),
        *_replay_window_problems(binding, annotations),
        *_admission_limit_problems(binding.admission_limits),
        *_schema_problems(binding),
    ]
