"""validate_binding: Workflow's own rules on the binding member (rejections are bindingFields
evidence).

The catalog validator has already checked the binding's structure (members, types, formats,
bounds); what stays here is what the contract leaves to Workflow: sync-only mode and its limits,
the write-Tool replay window, contradictory annotations, admission limits that must nest, and
the root type of carried schemas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import msgspec
from msgspec import UNSET

from generated.models import AdmissionLimits, ToolAnnotations, ToolBinding
from runtime.binding_reach import UNANNOTATED as UNANNOTATED
from runtime.binding_reach import Annotations as Annotations
from runtime.canonical.patterns import PatternError, check_schema_patterns
from runtime.publication.bindings.errors import InvalidBindingRequest, RequestSection

DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")

MAX_SYNC_WAIT_MS = 20_000
MAX_TOTAL_DEADLINE_MS = 30_000
MIN_WRITE_REPLAY_MS = 600_000


@dataclass(frozen=True, slots=True)
class Binding:
    """A validated binding: the document as published plus the fields the rules read."""

    document: dict[str, Any]
    tool_id: str
    tool_name: str
    wf_def_id: str
    workflow_version: str
    definition_digest: str
    schema_digest: str
    sync_wait_ms: int
    total_deadline_ms: int
    result_replay_ms: int
    runtime_bounds: dict[str, int]
    annotations: Annotations


def _reject(message: str) -> NoReturn:
    raise InvalidBindingRequest("binding", message)


def annotations_of(
    value: ToolAnnotations, where: str, *, section: RequestSection = "binding"
) -> Annotations:
    """The effect flags of toolAnnotations; readOnly together with destructive is contradictory."""
    if value.read_only and value.destructive:
        raise InvalidBindingRequest(section, f"{where}: a read-only Tool cannot be destructive")
    required = value.human_approval_required
    return Annotations(
        read_only=value.read_only,
        destructive=value.destructive,
        human_approval_required=False if required is UNSET else required,
    )


def stored_annotations(document: Mapping[str, Any]) -> Annotations:
    """The effect flags of toolAnnotations Workflow stored after validating them."""
    return Annotations(
        read_only=bool(document["readOnly"]),
        destructive=bool(document["destructive"]),
        human_approval_required=bool(document.get("humanApprovalRequired", False)),
    )


def _check_mode(binding: ToolBinding) -> None:
    if binding.invocation_mode != "sync":
        _reject("workflow-backed Tools are sync only: invocationMode must be sync")
    if binding.execution_class != "interactive":
        _reject("a sync binding must use executionClass interactive")
    if binding.sync_wait_ms > MAX_SYNC_WAIT_MS:
        _reject(f"binding.syncWaitMs must be between 1 and {MAX_SYNC_WAIT_MS}")
    if binding.total_deadline_ms > MAX_TOTAL_DEADLINE_MS:
        _reject(f"binding.totalDeadlineMs must be between 1 and {MAX_TOTAL_DEADLINE_MS}")
    if binding.total_deadline_ms < binding.sync_wait_ms:
        _reject("binding.totalDeadlineMs must be at least syncWaitMs")


def _check_replay_window(binding: ToolBinding, annotations: Annotations) -> int:
    replay = binding.idempotency_policy.result_replay_ms
    if annotations.is_write and replay < MIN_WRITE_REPLAY_MS:
        _reject(
            f"a write Tool needs idempotencyPolicy.resultReplayMs of at least "
            f"{MIN_WRITE_REPLAY_MS}, so a client retry replays instead of writing twice"
        )
    return replay


def _check_admission_limits(limits: AdmissionLimits) -> None:
    if limits.maximum_concurrent_runs_per_user > limits.maximum_concurrent_runs:
        _reject("admissionLimits.maximumConcurrentRunsPerUser exceeds maximumConcurrentRuns")
    if limits.starts_per_minute_per_user > limits.starts_per_minute:
        _reject("admissionLimits.startsPerMinutePerUser exceeds startsPerMinute")


def _check_schemas(binding: ToolBinding) -> None:
    for key, schema in (
        ("inputSchema", binding.input_schema),
        ("outputSchema", binding.output_schema),
    ):
        if schema is not UNSET and schema.get("type") != "object":
            _reject(f"binding.{key} must be a JSON Schema whose root type is object")
        if schema is not UNSET:
            try:
                check_schema_patterns(schema)
            except PatternError as exc:
                _reject(f"binding.{key}: {exc}")


def _runtime_bounds(binding: ToolBinding) -> dict[str, int]:
    bounds: dict[str, int] = msgspec.to_builtins(binding.runtime_bounds)
    return bounds


def validate_binding(binding: ToolBinding) -> Binding:
    """Workflow's rules on a schema-valid binding; raises InvalidBindingRequest(section binding)."""
    _check_mode(binding)
    annotations = annotations_of(binding.tool_annotations, "binding.toolAnnotations")
    replay = _check_replay_window(binding, annotations)
    _check_admission_limits(binding.admission_limits)
    _check_schemas(binding)
    return Binding(
        document=msgspec.to_builtins(binding),
        tool_id=binding.tool_id,
        tool_name=binding.tool_name,
        wf_def_id=binding.wf_def_id,
        workflow_version=binding.workflow_version,
        definition_digest=binding.definition_digest,
        schema_digest=binding.schema_digest,
        sync_wait_ms=binding.sync_wait_ms,
        total_deadline_ms=binding.total_deadline_ms,
        result_replay_ms=replay,
        runtime_bounds=_runtime_bounds(binding),
        annotations=annotations,
    )


def stored_binding(document: Mapping[str, Any]) -> ToolBinding:
    """A binding document Workflow stored (it passed the catalog validator when published)."""
    return msgspec.convert(document, ToolBinding, strict=False)
