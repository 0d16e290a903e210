"""Refusal texts that teach the fix: run-time reach, and definition problems in one pass."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.binding_reach import EndpointTarget
from runtime.engine import DefinitionError, parse_definition
from runtime.errors import WorkflowError
from runtime.execution.targets import policy_for

DIGEST = "sha256:" + "c" * 64
TARGET = EndpointTarget(
    "accounts", "https://api.example.com/accounts/{id}", ("GET",), ("prod",), DIGEST
)
HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}


def _refusal(policy: Any, method: str, uri: str) -> str:
    with pytest.raises(WorkflowError) as caught:
        policy.check(method, uri)
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"
    return caught.value.message


def test_an_allowlist_refusal_names_the_uri_and_the_setting_to_change() -> None:
    policy = policy_for(None, ["https://api.example.com/allowed"], None)
    message = _refusal(policy, "get", "https://api.example.com/other/7?token=s3cret")
    assert "GET https://api.example.com/other/7" in message
    assert "execution.outbound.http_allowlist" in message
    assert "s3cret" not in message  # the query may carry run data


def test_a_reach_refusal_names_the_uri_and_the_binding_field_to_change() -> None:
    policy = policy_for([TARGET], [], "prod")
    outside = _refusal(policy, "GET", "https://api.example.com/orders/1")
    assert "https://api.example.com/orders/1" in outside and "endpointTargets" in outside
    method = _refusal(policy, "POST", "https://api.example.com/accounts/1")
    assert "POST" in method and "accounts" in method and "allowedMethods" in method


def _problems(document: dict[str, Any]) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document)
    return caught.value


def test_unknown_metadata_fields_come_after_the_blockers() -> None:
    error = _problems(
        {
            "document": {**HEADER, "owner": "claims"},
            "extras": {},
            "do": [{"a": {"set": {"x": 1}, "then": "nowhere"}}, {"b": {"listen": {}}}],
        }
    )
    rules = [problem.rule for problem in error.problems]
    assert rules == ["unsupported-task-kind", "flow", "unknown-field", "unknown-field"]
    assert error.message.startswith("/do/1/b: task kind `listen` is not supported")
    assert "3 more problems" in error.message


def test_one_problem_keeps_its_own_message_and_task() -> None:
    error = _problems({"document": HEADER, "do": [{"a": {"frobnicate": {}}}]})
    assert error.task == "/do/0/a"
    assert [problem.as_json() for problem in error.problems] == [
        {
            "pointer": "/do/0/a",
            "rule": "unsupported-task-kind",
            "message": error.message,
        }
    ]
    assert "frobnicate" in error.message
