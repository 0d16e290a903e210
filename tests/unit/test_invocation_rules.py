"""Pure admission rules: caller policy, idempotency keys and scopes, admission limits."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from generated.models import AdmissionLimits, CallerPolicy, RuntimeBounds
from runtime.errors import WorkflowError
from runtime.invocation.rules import (
    budget_from,
    check_admission_limits,
    check_caller_policy,
    check_input,
    idempotency_key,
    scope_digest,
)
from runtime.invocation.store import AdmissionCounts
from tests.support.publication_builders import context

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LIMITS = AdmissionLimits(
    maximum_concurrent_runs=2,
    maximum_concurrent_runs_per_user=1,
    starts_per_minute=3,
    starts_per_minute_per_user=2,
)


def counts(**values: object) -> AdmissionCounts:
    base = AdmissionCounts(0, 0, 0, 0, None, None, None, NOW)
    return msgspec.structs.replace(base, **values)


def test_an_empty_caller_policy_accepts_the_tool_acl() -> None:
    check_caller_policy(context(), CallerPolicy())


def test_a_caller_policy_admits_a_matching_role_or_position_and_refuses_others() -> None:
    policy = msgspec.convert(
        {"requireAnyOf": [{"claim": "position", "value": "desk"}]}, CallerPolicy
    )
    with pytest.raises(WorkflowError) as refused:
        check_caller_policy(context(), policy)
    assert refused.value.code == "WORKFLOW_POLICY_DENIED"
    check_caller_policy(replace(context(), positions=frozenset({"desk"})), policy)
    roles = msgspec.convert(
        {"requireAnyOf": [{"claim": "role", "value": "workflow-admin"}]}, CallerPolicy
    )
    check_caller_policy(context(), roles)


def test_an_any_role_caller_policy_admits_a_holder_of_one_role_and_refuses_others() -> None:
    # Seed 000 Authorization: {"anyRole": ["claims-agent", "genai-admin"]}.
    policy = msgspec.convert({"anyRole": ["claims-agent", "genai-admin"]}, CallerPolicy)
    with pytest.raises(WorkflowError) as refused:
        check_caller_policy(context(), policy)
    assert refused.value.code == "WORKFLOW_POLICY_DENIED"
    check_caller_policy(replace(context(), roles=frozenset({"genai-admin"})), policy)


def test_the_derived_key_is_the_input_digest_and_explicit_keys_are_required() -> None:
    assert idempotency_key("derived", None, "sha256:x") == "sha256:x"
    assert idempotency_key("business", "order-1", "sha256:x") == "order-1"
    for supplied in (None, "", "k" * 257):
        with pytest.raises(WorkflowError):
            idempotency_key("explicit", supplied, "sha256:x")


def test_the_scope_digest_changes_with_every_member_and_never_with_order() -> None:
    base = scope_digest("derived", "h", "t", "alice", "k")
    assert base.startswith("sha256:")
    assert base == scope_digest("derived", "h", "t", "alice", "k")
    others = {
        scope_digest("explicit", "h", "t", "alice", "k"),
        scope_digest("derived", "h2", "t", "alice", "k"),
        scope_digest("derived", "h", "t2", "alice", "k"),
        scope_digest("derived", "h", "t", "bob", "k"),
        scope_digest("derived", "h", "t", "alice", "k2"),
    }
    assert base not in others and len(others) == 5


def test_equal_inputs_in_any_key_order_have_one_digest() -> None:
    assert check_input({"a": 1, "b": [1, 2]}, None, None) == check_input(
        {"b": [1, 2], "a": 1}, None, None
    )


def test_an_unsafe_integer_input_is_refused_as_invalid() -> None:
    with pytest.raises(WorkflowError) as refused:
        check_input({"id": 2**60}, None, None)
    assert refused.value.code == "WORKFLOW_INPUT_INVALID"


def test_limits_below_their_caps_admit() -> None:
    check_admission_limits(LIMITS, counts(live=1, recent=2, recent_for_user=1))


@pytest.mark.parametrize(
    "values",
    [
        {"live": 2, "next_live_deadline": NOW + timedelta(seconds=5)},
        {"live_for_user": 1},
        {"recent": 3, "oldest_recent": NOW - timedelta(seconds=50)},
        {"recent_for_user": 2, "oldest_recent_for_user": NOW - timedelta(seconds=10)},
    ],
)
def test_each_reached_limit_is_capacity_exhausted_with_a_retry_delay(
    values: dict[str, object],
) -> None:
    with pytest.raises(WorkflowError) as refused:
        check_admission_limits(LIMITS, counts(**values))
    assert refused.value.code == "WORKFLOW_CAPACITY_EXHAUSTED"
    assert refused.value.retryable is True
    assert refused.value.retry_after_ms is not None and 0 < refused.value.retry_after_ms <= 60000


def test_the_minute_window_retry_delay_is_what_remains_of_the_oldest_start() -> None:
    with pytest.raises(WorkflowError) as refused:
        check_admission_limits(LIMITS, counts(recent=3, oldest_recent=NOW - timedelta(seconds=50)))
    assert refused.value.retry_after_ms == 10000


def test_runtime_bounds_become_the_budget_ceilings() -> None:
    budget = budget_from(
        RuntimeBounds(
            maximum_task_attempts=8,
            maximum_nested_calls=4,
            maximum_parallelism=4,
            maximum_request_bytes=100,
            maximum_intermediate_bytes=200,
            maximum_result_bytes=300,
            maximum_cost_units=50,
        )
    )
    assert (budget.attempts, budget.nested_calls, budget.cost_units) == (8, 4, 50)
    assert (budget.request_bytes, budget.intermediate_bytes, budget.result_bytes) == (100, 200, 300)


def test_an_idempotency_key_sent_to_a_derived_key_tool_is_accepted_and_ignored() -> None:
    # Seed 000: idempotencyKey is optional; for kind derived the key is the input digest.
    assert idempotency_key("derived", "order-1", "sha256:x") == "sha256:x"
    assert idempotency_key("derived", None, "sha256:x") == "sha256:x"
