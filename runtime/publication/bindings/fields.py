"""validate_binding: every explicit field, bound, policy, digest-format, role, annotation and
schema-type rule of the binding member (rejections are bindingFields evidence)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from runtime.binding_reach import UNANNOTATED as UNANNOTATED
from runtime.binding_reach import Annotations as Annotations
from runtime.publication.bindings.errors import InvalidBindingRequest

UUID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
VERSION_PATTERN = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]*$")
CLAIM_VALUE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:/-]*$")

MAX_SYNC_WAIT_MS = 20_000
MAX_TOTAL_DEADLINE_MS = 30_000
MIN_WRITE_REPLAY_MS = 600_000
MAX_REPLAY_MS = 2_592_000_000
MAX_SAFE_INTEGER = 9_007_199_254_740_991
CANCELLATION_POLICIES = frozenset({"before-effects-only", "cooperative", "disabled"})
RESULT_TEXT_MODES = frozenset({"compact-json", "summary"})
IDEMPOTENCY_KINDS = frozenset({"derived", "explicit", "business"})
CLAIM_KINDS = frozenset({"role", "position"})

REQUIRED_FIELDS = (
    "sourceBindingId",
    "toolId",
    "toolName",
    "wfDefId",
    "workflowVersion",
    "definitionDigest",
    "schemaDigest",
    "invocationMode",
    "syncWaitMs",
    "totalDeadlineMs",
    "executionClass",
    "resultTextMode",
    "cancellationPolicy",
    "idempotencyPolicy",
    "delegationPolicy",
    "runtimeBounds",
    "admissionLimits",
    "callerPolicy",
    "toolAnnotations",
)
OPTIONAL_FIELDS = (
    "toolDescription",
    "policyDigest",
    "responsePolicyDigest",
    "inputSchema",
    "outputSchema",
)
# Bounds that must be at least 1; maximumNestedCalls and maximumDelegationDepth may be 0.
POSITIVE_BOUNDS = (
    "maximumTaskAttempts",
    "maximumParallelism",
    "maximumRequestBytes",
    "maximumIntermediateBytes",
    "maximumResultBytes",
    "maximumCostUnits",
)
ADMISSION_LIMITS = (
    "maximumConcurrentRuns",
    "maximumConcurrentRunsPerUser",
    "startsPerMinute",
    "startsPerMinutePerUser",
)


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


def _integer(value: Any, where: str, *, minimum: int, maximum: int = MAX_SAFE_INTEGER) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        _reject(f"{where} must be an integer")
    if not minimum <= value <= maximum:
        _reject(f"{where} must be between {minimum} and {maximum}")
    return value


def _object(value: Any, where: str, allowed: set[str], required: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _reject(f"{where} must be an object")
    unknown = set(value) - allowed
    if unknown:
        _reject(f"{where} has unknown members: {', '.join(sorted(map(str, unknown)))}")
    missing = required - set(value)
    if missing:
        _reject(f"{where} is missing {', '.join(sorted(missing))}")
    return value


def _pattern(value: Any, where: str, pattern: re.Pattern[str], max_length: int) -> str:
    if not isinstance(value, str) or len(value) > max_length or not pattern.match(value):
        _reject(f"{where} is not a valid value")
    return value


def _digest(value: Any, where: str) -> str:
    if not isinstance(value, str) or not DIGEST_PATTERN.match(value):
        _reject(f"{where} must match sha256:<64 lower-case hex digits>")
    return value


def parse_annotations(value: Any, where: str, *, section: str = "binding") -> Annotations:
    """Validate toolAnnotations; readOnly together with destructive is contradictory."""
    try:
        members = _object(
            value,
            where,
            {"readOnly", "destructive", "humanApprovalRequired", "idempotent"},
            {"readOnly", "destructive"},
        )
        for key, flag in members.items():
            if not isinstance(flag, bool):
                _reject(f"{where}.{key} must be a boolean")
        if members["readOnly"] and members["destructive"]:
            _reject(f"{where}: a read-only Tool cannot be destructive")
    except InvalidBindingRequest as error:
        if section == "binding":
            raise
        raise InvalidBindingRequest("reach", error.message) from None
    return Annotations(
        read_only=members["readOnly"],
        destructive=members["destructive"],
        human_approval_required=bool(members.get("humanApprovalRequired", False)),
    )


def _check_identity(doc: Mapping[str, Any]) -> None:
    for key in ("sourceBindingId", "toolId", "wfDefId"):
        _pattern(doc[key], f"binding.{key}", UUID_PATTERN, 36)
    _pattern(doc["toolName"], "binding.toolName", TOOL_NAME_PATTERN, 128)
    description = doc.get("toolDescription")
    if description is not None and (
        not isinstance(description, str) or not 1 <= len(description) <= 4096
    ):
        _reject("binding.toolDescription must be a string of 1-4096 characters")
    _pattern(doc["workflowVersion"], "binding.workflowVersion", VERSION_PATTERN, 64)
    for key in ("definitionDigest", "schemaDigest"):
        _digest(doc[key], f"binding.{key}")
    for key in ("policyDigest", "responsePolicyDigest"):
        if doc.get(key) is not None:
            _digest(doc[key], f"binding.{key}")


def _check_mode(doc: Mapping[str, Any]) -> tuple[int, int]:
    if doc["invocationMode"] != "sync":
        _reject("workflow-backed Tools are sync only: invocationMode must be sync")
    if doc["executionClass"] != "interactive":
        _reject("a sync binding must use executionClass interactive")
    wait = _integer(doc["syncWaitMs"], "binding.syncWaitMs", minimum=1, maximum=MAX_SYNC_WAIT_MS)
    deadline = _integer(
        doc["totalDeadlineMs"], "binding.totalDeadlineMs", minimum=1, maximum=MAX_TOTAL_DEADLINE_MS
    )
    if deadline < wait:
        _reject("binding.totalDeadlineMs must be at least syncWaitMs")
    if doc["resultTextMode"] not in RESULT_TEXT_MODES:
        _reject("binding.resultTextMode must be compact-json or summary")
    if doc["cancellationPolicy"] not in CANCELLATION_POLICIES:
        _reject("binding.cancellationPolicy must be before-effects-only, cooperative or disabled")
    return wait, deadline


def _check_idempotency(value: Any, annotations: Annotations) -> int:
    policy = _object(value, "binding.idempotencyPolicy", {"kind", "resultReplayMs"}, {"kind"})
    if policy["kind"] not in IDEMPOTENCY_KINDS:
        _reject("binding.idempotencyPolicy.kind must be derived, explicit or business")
    if "resultReplayMs" not in policy:
        _reject("binding.idempotencyPolicy is missing resultReplayMs")
    replay = _integer(
        policy["resultReplayMs"],
        "binding.idempotencyPolicy.resultReplayMs",
        minimum=0,
        maximum=MAX_REPLAY_MS,
    )
    if annotations.is_write and replay < MIN_WRITE_REPLAY_MS:
        _reject(
            f"a write Tool needs idempotencyPolicy.resultReplayMs of at least "
            f"{MIN_WRITE_REPLAY_MS}, so a client retry replays instead of writing twice"
        )
    return replay


def _check_runtime_bounds(value: Any) -> dict[str, int]:
    required = {*POSITIVE_BOUNDS, "maximumNestedCalls"}
    bounds = _object(
        value, "binding.runtimeBounds", required | {"maximumDelegationDepth"}, required
    )
    checked = {
        key: _integer(bounds[key], f"binding.runtimeBounds.{key}", minimum=1)
        for key in POSITIVE_BOUNDS
    }
    checked["maximumNestedCalls"] = _integer(
        bounds["maximumNestedCalls"], "binding.runtimeBounds.maximumNestedCalls", minimum=0
    )
    if "maximumDelegationDepth" in bounds:
        checked["maximumDelegationDepth"] = _integer(
            bounds["maximumDelegationDepth"],
            "binding.runtimeBounds.maximumDelegationDepth",
            minimum=0,
            maximum=16,
        )
    return checked


def _check_admission_limits(value: Any) -> None:
    limits = _object(value, "binding.admissionLimits", set(ADMISSION_LIMITS), set(ADMISSION_LIMITS))
    numbers = {
        key: _integer(limits[key], f"binding.admissionLimits.{key}", minimum=1)
        for key in ADMISSION_LIMITS
    }
    if numbers["maximumConcurrentRunsPerUser"] > numbers["maximumConcurrentRuns"]:
        _reject("admissionLimits.maximumConcurrentRunsPerUser exceeds maximumConcurrentRuns")
    if numbers["startsPerMinutePerUser"] > numbers["startsPerMinute"]:
        _reject("admissionLimits.startsPerMinutePerUser exceeds startsPerMinute")


def _check_caller_policy(value: Any) -> None:
    policy = _object(value, "binding.callerPolicy", {"requireAnyOf"}, set())
    if "requireAnyOf" not in policy:
        return
    clauses = policy["requireAnyOf"]
    if not isinstance(clauses, list) or not 1 <= len(clauses) <= 64:
        _reject("binding.callerPolicy.requireAnyOf must list 1-64 clauses")
    seen: set[tuple[str, str]] = set()
    for index, clause in enumerate(clauses):
        where = f"binding.callerPolicy.requireAnyOf[{index}]"
        members = _object(clause, where, {"claim", "value"}, {"claim", "value"})
        if members["claim"] not in CLAIM_KINDS:
            _reject(f"{where}.claim must be role or position")
        claim_value = _pattern(members["value"], f"{where}.value", CLAIM_VALUE_PATTERN, 128)
        key = (members["claim"], claim_value)
        if key in seen:
            _reject(f"{where} repeats an earlier clause")
        seen.add(key)


def _check_delegation(value: Any) -> None:
    policy = _object(
        value, "binding.delegationPolicy", {"maximumDelegationDepth"}, {"maximumDelegationDepth"}
    )
    _integer(
        policy["maximumDelegationDepth"],
        "binding.delegationPolicy.maximumDelegationDepth",
        minimum=0,
        maximum=16,
    )


def _check_schemas(doc: Mapping[str, Any]) -> None:
    for key in ("inputSchema", "outputSchema"):
        schema = doc.get(key)
        if schema is None:
            continue
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            _reject(f"binding.{key} must be a JSON Schema whose root type is object")


def validate_binding(value: Any) -> Binding:
    """Validate the binding member; raises InvalidBindingRequest(section binding)."""
    doc = _object(value, "binding", {*REQUIRED_FIELDS, *OPTIONAL_FIELDS}, set(REQUIRED_FIELDS))
    _check_identity(doc)
    wait, deadline = _check_mode(doc)
    annotations = parse_annotations(doc["toolAnnotations"], "binding.toolAnnotations")
    replay = _check_idempotency(doc["idempotencyPolicy"], annotations)
    _check_delegation(doc["delegationPolicy"])
    bounds = _check_runtime_bounds(doc["runtimeBounds"])
    _check_admission_limits(doc["admissionLimits"])
    _check_caller_policy(doc["callerPolicy"])
    _check_schemas(doc)
    return Binding(
        document=dict(doc),
        tool_id=doc["toolId"],
        tool_name=doc["toolName"],
        wf_def_id=doc["wfDefId"],
        workflow_version=doc["workflowVersion"],
        definition_digest=doc["definitionDigest"],
        schema_digest=doc["schemaDigest"],
        sync_wait_ms=wait,
        total_deadline_ms=deadline,
        result_replay_ms=replay,
        runtime_bounds=bounds,
        annotations=annotations,
    )
