"""Pure admission rules: caller policy, input checks, idempotency scope, budgets and limits."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import jsonschema
from msgspec import UNSET

from generated.models import AdmissionLimits, CallerPolicy, RuntimeBounds
from runtime.canonical import (
    INPUT_PROFILE,
    PROFILE,
    CanonicalError,
    canonical_bytes,
    canonical_digest,
    input_schema_of,
    narrowest_profile,
    sha256_digest,
)
from runtime.canonical.patterns import PatternError, re2_validator
from runtime.errors import WorkflowError, input_invalid, policy_denied
from runtime.execution import SpecLimits
from runtime.invocation.store import AdmissionCounts
from runtime.scheduler import BudgetAmounts
from runtime.security import InvocationContext

SCOPE_VERSION = 1
SCOPE_VERSION_PROFILED = 2
MAX_KEY_LENGTH = 256
MINUTE_MS = 60_000


def check_caller_policy(ctx: InvocationContext, policy: CallerPolicy) -> None:
    """Refuse unless the verified user holds one anyRole role or meets one requireAnyOf clause.

    {} accepts every caller the Tool ACL let through (seed 000 Authorization, layer 3).
    """
    roles = policy.any_role
    clauses = policy.require_any_of
    if (roles is UNSET or not roles) and (clauses is UNSET or not clauses):
        return
    if roles is not UNSET and any(role in ctx.roles for role in roles):
        return
    for clause in clauses if clauses is not UNSET else ():
        held = ctx.roles if clause.claim == "role" else ctx.positions
        if clause.value in held:
            return
    raise policy_denied("the caller does not satisfy the Tool's caller policy")


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    # Patterns run on RE2 (linear time): caller input never meets a backtracking engine.
    return re2_validator(json.loads(schema_json))


@dataclass(frozen=True)
class SchemaCheck:
    """One input schema made ready once (per binding revision), then applied to each call."""

    what: str
    validator: jsonschema.protocols.Validator | None = None
    # The schema itself cannot be used: every call refuses the same way (never retryable).
    unusable: tuple[str, dict[str, Any] | None] | None = None

    def check(self, value: Any) -> None:
        """Refuse a value the schema does not accept (WORKFLOW_INPUT_INVALID)."""
        if self.unusable is not None:
            raise input_invalid(*self.unusable)
        if self.validator is None or self.validator.is_valid(value):
            return
        _refuse(self.validator, value, self.what)


def schema_check(schema: Any, what: str) -> SchemaCheck:
    """Compile schema for repeated checks ({} or no schema accepts everything)."""
    if not isinstance(schema, dict) or not schema:
        return SchemaCheck(what)
    try:
        return SchemaCheck(what, _validator(json.dumps(schema, sort_keys=True)))
    except PatternError as exc:
        # Permanent: the same schema refuses every call, so a Gateway must not retry.
        details = {"validation": {"path": exc.where, "rule": "pattern"}}
        return SchemaCheck(what, unusable=(f"the {what} input schema: {exc}", details))
    except jsonschema.SchemaError:
        return SchemaCheck(what, unusable=(f"the {what} input schema cannot be used", None))


def _check_against(schema: Any, value: Any, what: str) -> None:
    schema_check(schema, what).check(value)


def _refuse(validator: jsonschema.protocols.Validator, value: Any, what: str) -> None:
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        # Path and rule only: messages would echo (possibly sensitive) input values.
        details = {"validation": {"path": error.json_path, "rule": str(error.validator)}}
        missing = _missing_required(error)
        if missing:
            # Field names come from the schema, never from the input, so naming them is safe.
            fields = ", ".join(f"{_child_path(error.json_path, name)}" for name in missing)
            verb = "is" if len(missing) == 1 else "are"
            raise input_invalid(f"{fields} {verb} required by the {what} input schema", details)
        raise input_invalid(
            f"the input does not match the {what} input schema at {error.json_path} "
            f"(rule {error.validator})",
            details,
        )


def _missing_required(error: jsonschema.ValidationError) -> list[str]:
    if error.validator != "required" or not isinstance(error.instance, dict):
        return []
    required = error.validator_value if isinstance(error.validator_value, list) else []
    return [str(name) for name in required if name not in error.instance]


def _child_path(parent: str, name: str) -> str:
    return f"{parent}.{name}" if name.isidentifier() else f"{parent}[{json.dumps(name)}]"


def canonical_input(value: Any) -> bytes:
    """The input's canonical bytes under the input profile; none is WORKFLOW_INPUT_INVALID."""
    try:
        return canonical_bytes(value, profile=INPUT_PROFILE)
    except CanonicalError as exc:
        raise input_invalid(f"the input is not canonical JSON: {exc}") from None


def check_input(
    value: Any,
    binding_schema: Any,
    document: Mapping[str, Any] | None,
    *,
    canonical: bytes | None = None,
) -> str:
    """Validate the input against the Tool's and the definition's schemas; its digest.

    canonical: the input's canonical_input bytes when the caller has them already.
    """
    digest = sha256_digest(canonical_input(value) if canonical is None else canonical)
    _check_against(binding_schema, value, "Tool")
    if document is not None:
        _check_against(input_schema_of(dict(document)), value, "workflow")
    return digest


def check_prepared_input(value: Any, checks: tuple[SchemaCheck, ...], canonical: bytes) -> str:
    """check_input with the schemas compiled ahead (the Tool's, then the workflow's)."""
    digest = sha256_digest(canonical)
    for check in checks:
        check.check(value)
    return digest


def check_request_bytes(value: Any, limit: int, *, canonical: bytes | None = None) -> None:
    """Refuse an input whose canonical JSON exceeds limit, runtimeBounds.maximumRequestBytes.

    The Gateway's pre-check is only an early rejection; Workflow enforces the full budget
    (seed 000), before any reservation, so an oversized call changes nothing. The input
    profile, as check_input: a decimal v2 admits must not fail here under v1.
    """
    size = len(canonical_input(value) if canonical is None else canonical)
    if size > limit:
        raise input_invalid(
            f"the input is {size} bytes, over the Tool's maximumRequestBytes {limit}",
            {"limit": "maximumRequestBytes", "maximum": limit, "size": size},
        )


def check_evidence(missing_task: str | None) -> None:
    """Refuse admission when a write task of the pinned version has no approval evidence row."""
    if missing_task is not None:
        raise WorkflowError(
            "WORKFLOW_START_REJECTED",
            f"write task {missing_task} has no approval evidence for this binding revision",
        )


def action_limit_from(bounds: RuntimeBounds) -> int:
    """The action limit of a run's authority: the nested calls its runtimeBounds allow."""
    return bounds.maximum_nested_calls


def idempotency_key(kind: str, supplied: str | None, input_digest: str) -> str:
    """The key within the scope: the input digest (kind derived) or the caller's key.

    Seed 000 makes idempotencyKey "optional; required when the revision's key kind is explicit
    or business", and for kind derived "key is the normalized input digest and Workflow computes
    it": a key sent to a derived-key Tool is accepted and plays no part in the scope.
    """
    if kind == "derived":
        return input_digest
    if supplied is None or not 1 <= len(supplied) <= MAX_KEY_LENGTH:
        raise input_invalid(f"this Tool needs an idempotencyKey of 1-{MAX_KEY_LENGTH} characters")
    return supplied


def input_profile(value: Any) -> str:
    """The canonical profile a derived key of this (already checked) input is scoped under."""
    return narrowest_profile(value)


def scope_digest(
    kind: str, host_id: str, target_id: str, subject: str, key: str, *, profile: str = PROFILE
) -> str:
    """canonical_sha256({v, kind, hostId, toolId, endUserSubject, key}), v2 with its profile.

    A derived key is the digest of the input's canonical bytes, so its scope names the profile
    that made them. Scope version 1 means rfc8785-safe-json-v1 (every stored reservation made
    before v2, and every input v1 can express, whose bytes v2 leaves unchanged, so a retry after
    the upgrade still replays); an input only v2 accepts gets version 2 with its profile named.
    An explicit or business key is the caller's text, not canonical bytes: its scope stays put,
    so reusing it with another input is still a conflict whatever numbers that input holds.
    """
    scope: dict[str, Any] = {
        "v": SCOPE_VERSION,
        "kind": kind,
        "hostId": host_id,
        "toolId": target_id,
        "endUserSubject": subject,
        "key": key,
    }
    if kind == "derived" and profile != PROFILE:
        scope.update(v=SCOPE_VERSION_PROFILED, profile=profile)
    return canonical_digest(scope)


def principal_of(ctx: InvocationContext) -> str:
    """The client principal stored beside a key: the client the user came through."""
    return ctx.user_client_id or ctx.client_id


def budget_from(bounds: RuntimeBounds) -> BudgetAmounts:
    """The run's budget ledger ceilings from the revision's runtimeBounds."""
    return BudgetAmounts(
        attempts=bounds.maximum_task_attempts,
        nested_calls=bounds.maximum_nested_calls,
        request_bytes=bounds.maximum_request_bytes,
        intermediate_bytes=bounds.maximum_intermediate_bytes,
        result_bytes=bounds.maximum_result_bytes,
        cost_units=bounds.maximum_cost_units,
    )


def run_limits_from(bounds: RuntimeBounds) -> SpecLimits:
    """The interpreter limits of the run spec from runtimeBounds."""
    return SpecLimits(
        maximum_task_attempts=bounds.maximum_task_attempts,
        maximum_parallelism=bounds.maximum_parallelism,
        maximum_cost_units=bounds.maximum_cost_units,
    )


def _ms_until(later: datetime | None, now: datetime) -> int:
    if later is None:
        return 1000
    return max(1, int((later - now).total_seconds() * 1000))


def check_admission_limits(limits: AdmissionLimits, counts: AdmissionCounts) -> None:
    """WORKFLOW_CAPACITY_EXHAUSTED with retryAfterMs when any admission limit is reached."""
    now = counts.counted_at
    retry_after: int | None = None
    reason = ""
    if counts.live >= limits.maximum_concurrent_runs:
        reason, retry_after = "concurrent runs", _ms_until(counts.next_live_deadline, now)
    elif counts.live_for_user >= limits.maximum_concurrent_runs_per_user:
        reason, retry_after = "concurrent runs per user", _ms_until(counts.next_live_deadline, now)
    elif counts.recent >= limits.starts_per_minute:
        reason, retry_after = "starts per minute", _window_left(counts.oldest_recent, now)
    elif counts.recent_for_user >= limits.starts_per_minute_per_user:
        reason = "starts per minute per user"
        retry_after = _window_left(counts.oldest_recent_for_user, now)
    if retry_after is not None:
        raise WorkflowError(
            "WORKFLOW_CAPACITY_EXHAUSTED",
            f"the Tool's admission limit ({reason}) is reached",
            retry_after_ms=retry_after,
        )


def _window_left(oldest: datetime | None, now: datetime) -> int:
    if oldest is None:
        return MINUTE_MS
    return max(1, MINUTE_MS - int((now - oldest).total_seconds() * 1000))
