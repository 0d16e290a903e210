"""Pure binding rules: field validation, reach, digests, effect matrix, carry-over, destinations."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from generated.models import ToolBinding
from runtime.binding_reach import Reach
from runtime.canonical import canonical_digest, load_definition_yaml
from runtime.engine import parse_definition
from runtime.engine.check import WriteTask
from runtime.publication.bindings.destination_policy import DestinationPolicy, check_destination
from runtime.publication.bindings.digests import approval_digest, binding_digest
from runtime.publication.bindings.rejections import BindingRuleViolation
from runtime.publication.bindings.status_rules import (
    ApprovedBasis,
    Candidate,
    carry_over_denied_reason,
)
from runtime.publication.bindings.version_rules import effect_matrix_problems, static_fit_problems
from runtime.publication.store.definition_rows import Owner
from tests.support.binding_builders import (
    binding,
    definition_yaml,
    dependency,
    endpoint_target,
    publish_args,
    write_binding,
)
from tests.support.service_calls import checked_binding, checked_reach, publish_rejection_section

WF = "0198a3c2-0000-7000-8000-000000000001"
TOOL = "0198a3c2-0000-7000-8000-000000000002"
TEXT = definition_yaml()


def _binding(**changes: Any) -> dict[str, Any]:
    return binding(WF, TOOL, TEXT, **changes)


def _typed(value: dict[str, Any]) -> ToolBinding:
    return msgspec.convert(value, ToolBinding, strict=False)


def _section(value: dict[str, Any]) -> str | None:
    return publish_rejection_section(publish_args(value, 0))


@pytest.mark.parametrize(
    "changes",
    [
        {"invocationMode": "async"},
        {"executionClass": "standard"},
        {"totalDeadlineMs": 30001},
        {"syncWaitMs": 20001},
        {"syncWaitMs": 5000, "totalDeadlineMs": 4000},
        {"cancellationPolicy": "BEFORE_EFFECTS_ONLY"},
        {
            "admissionLimits": {
                "maximumConcurrentRuns": 2,
                "maximumConcurrentRunsPerUser": 3,
                "startsPerMinute": 10,
                "startsPerMinutePerUser": 1,
            }
        },
        {
            "admissionLimits": {
                "maximumConcurrentRuns": 0,
                "maximumConcurrentRunsPerUser": 0,
                "startsPerMinute": 10,
                "startsPerMinutePerUser": 1,
            }
        },
        {"callerPolicy": {"requireAnyOf": [{"claim": "group", "value": "x"}]}},
        {"callerPolicy": {"anyRole": []}},
        {
            "callerPolicy": {
                "anyRole": ["x"],
                "requireAnyOf": [{"claim": "role", "value": "x"}],
            }
        },
        {"toolAnnotations": {"readOnly": True, "destructive": True}},
        {"definitionDigest": "sha256:ABC"},
        {"inputSchema": {"type": "array"}},
        {"runtimeBounds": {"maximumTaskAttempts": 1}},
    ],
)
def test_binding_field_rejections_are_classified_as_binding_fields(changes: dict[str, Any]) -> None:
    assert _section(_binding(**changes)) == "binding"


def test_a_write_tool_needs_a_ten_minute_replay_window() -> None:
    value = write_binding(WF, TOOL, TEXT)
    checked_binding(value)
    value["idempotencyPolicy"]["resultReplayMs"] = 599_999
    assert _section(value) == "binding"


@pytest.mark.parametrize(
    ("dependencies", "targets"),
    [
        ([dependency("a"), dependency("a")], []),
        ([{**dependency("a"), "contractDigest": "md5:x"}], []),
        ([], [endpoint_target(), endpoint_target()]),
        ([], [endpoint_target(uri="not a uri")]),
        ([], [endpoint_target(uri="https://user:pw@api.example.com/x")]),
        ([], [{**endpoint_target(), "allowedMethods": ["FETCH"]}]),
        ([dependency(str(i)) for i in range(257)], []),
    ],
)
def test_reach_rejections_are_classified_as_binding_reach(
    dependencies: list[Any], targets: list[Any]
) -> None:
    args = publish_args(_binding(), 0, dependencies=dependencies, endpoint_targets=targets)
    assert publish_rejection_section(args) == "reach"


def test_binding_digest_ignores_source_id_order_case_and_nulls_but_not_names() -> None:
    value = _binding(inputSchema={"type": "object"})
    reach = checked_reach(
        [dependency("b"), dependency("a")], [endpoint_target("z"), endpoint_target("y")]
    )
    reordered = checked_reach(
        [dependency("a"), dependency("b")],
        [
            {
                **endpoint_target("y"),
                "allowedMethods": ["POST", "get"],
                "environments": ["dev", "prod"],
            },
            endpoint_target("z"),
        ],
    )
    other = {
        **copy.deepcopy(value),
        "sourceBindingId": TOOL,
        "inputSchema": {"type": "object", "title": None},
    }
    assert binding_digest(_typed(value), reach) == binding_digest(_typed(other), reordered)
    renamed = _typed({**value, "toolName": "x"})
    assert binding_digest(_typed(value), reach) != binding_digest(renamed, reach)


def test_binding_digest_is_the_canonical_digest_of_the_documented_form() -> None:
    value = _binding()
    reach = checked_reach([], [endpoint_target()])
    fields = {k: v for k, v in value.items() if k != "sourceBindingId"}
    target = {
        **endpoint_target(),
        "allowedMethods": ["GET", "POST"],
        "environments": ["dev", "prod"],
    }
    expected = canonical_digest(
        {"binding": fields, "dependencies": [], "endpointTargets": [target]}
    )
    assert binding_digest(_typed(value), reach) == expected


def test_approval_digest_covers_load_fields_only() -> None:
    value = _binding()
    digest = approval_digest(_typed(value))
    assert digest == approval_digest(
        _typed({**value, "toolName": "renamed", "toolDescription": "d", "workflowVersion": "9.9.9"})
    )
    assert digest != approval_digest(_typed({**value, "totalDeadlineMs": 25000}))
    assert digest != approval_digest(
        _typed({**value, "callerPolicy": {"requireAnyOf": [{"claim": "role", "value": "a"}]}})
    )


def _definition(**options: Any) -> Any:
    return parse_definition(load_definition_yaml(definition_yaml(**options)))


def _matrix_messages(definition: Any, binding: Any, reach: Reach) -> str:
    problems, _ = effect_matrix_problems(definition, binding, reach)
    return " | ".join(problem.message for problem in problems)


def test_the_effect_matrix_refuses_a_read_only_tool_with_a_write_task() -> None:
    messages = _matrix_messages(_definition(write=True), checked_binding(_binding()), Reach((), ()))
    assert "read-only Tool" in messages


def test_the_effect_matrix_admits_a_write_tool_with_evidence() -> None:
    problems, writes = effect_matrix_problems(
        _definition(write=True), checked_binding(write_binding(WF, TOOL, TEXT)), Reach((), ())
    )
    assert problems == []
    assert [(w.qualified_name, w.kind, w.target) for w in writes] == [("save", "http", "POST")]


def test_the_effect_matrix_refuses_reaching_a_stronger_tool() -> None:
    reach = checked_reach(
        [
            {
                **dependency("x.delete", read_only=False),
                "toolAnnotations": {"readOnly": False, "destructive": True},
            }
        ],
        [],
    )
    binding = checked_binding(write_binding(WF, TOOL, TEXT))
    assert "destructive" in _matrix_messages(_definition(mcp_tool="x.delete"), binding, reach)


def test_an_mcp_task_must_call_a_pinned_dependency() -> None:
    messages = _matrix_messages(
        _definition(mcp_tool="x.y"), checked_binding(_binding()), Reach((), ())
    )
    assert "not a pinned dependency" in messages


def test_static_fit_names_the_limit() -> None:
    bounds = checked_binding(_binding()).runtime_bounds
    problems = static_fit_problems(_definition(fork_width=5), bounds, 30000)
    assert any("maximumParallelism" in problem for problem in problems)
    assert static_fit_problems(_definition(fork_width=4), bounds, 30000) == []


def _basis(**changes: Any) -> ApprovedBasis:
    values: dict[str, Any] = {
        "binding_id": TOOL,
        "wf_def_id": WF,
        "owner": Owner("owner-1", "pos-1"),
        "approval_digest": "sha256:" + "a" * 64,
        "dependency_keys": frozenset(),
        "target_keys": frozenset(),
        "write_task_keys": frozenset({("save", "http", "POST")}),
    }
    values.update(changes)
    return ApprovedBasis(**values)


def _candidate(**changes: Any) -> Candidate:
    values: dict[str, Any] = {
        "wf_def_id": WF,
        "approval_digest": "sha256:" + "a" * 64,
        "reach": Reach((), ()),
        "write_tasks": [WriteTask("save", "/do/1/save", "http", "POST", None)],
        "binding_approval": "carryOver",
        "published_by": "owner-1",
    }
    values.update(changes)
    return Candidate(**values)


def test_carry_over_holds_when_nothing_it_covers_changed() -> None:
    assert carry_over_denied_reason(_basis(), _candidate(), Owner("owner-1", "pos-1")) is None


@pytest.mark.parametrize(
    ("basis", "candidate", "owner", "reason"),
    [
        (None, {}, ("owner-1", "pos-1"), "no active revision"),
        ({"wf_def_id": TOOL}, {}, ("owner-1", "pos-1"), "another workflow definition"),
        ({}, {}, ("owner-2", "pos-1"), "owner changed"),
        ({}, {"approval_digest": "sha256:" + "b" * 64}, ("owner-1", "pos-1"), "approvalDigest"),
        (
            {},
            {"reach": checked_reach([dependency("n")], [])},
            ("owner-1", "pos-1"),
            "dependency n",
        ),
        (
            {},
            {"reach": checked_reach([], [endpoint_target()])},
            ("owner-1", "pos-1"),
            "endpoint target",
        ),
        (
            {},
            {"write_tasks": [WriteTask("save", "p", "http", "PUT", None)]},
            ("owner-1", "pos-1"),
            "write task save",
        ),
        ({}, {"binding_approval": "reapprove"}, ("owner-1", "pos-1"), "reapprove"),
    ],
)
def test_carry_over_is_denied_with_a_precise_reason(
    basis: dict[str, Any] | None, candidate: dict[str, Any], owner: tuple[str, str], reason: str
) -> None:
    denied = carry_over_denied_reason(
        None if basis is None else _basis(**basis), _candidate(**candidate), Owner(*owner)
    )
    assert denied is not None and reason in denied


def test_the_destination_policy_refuses_unlisted_schemes_hosts_and_ports() -> None:
    policy = DestinationPolicy(
        allowed_hosts=frozenset({"*.example.com"}), allowed_ports=frozenset({443})
    )
    check_destination(checked_reach([], [endpoint_target()]).endpoint_targets[0], policy)
    for uri, setting in (
        ("http://api.example.com/x", "publication.destinations.allowed_schemes"),
        ("https://api.other.com/x", "publication.destinations.allowed_hosts"),
        ("https://api.example.com:8443/x", "publication.destinations.allowed_ports"),
    ):
        with pytest.raises(BindingRuleViolation) as caught:
            check_destination(
                checked_reach([], [endpoint_target(uri=uri)]).endpoint_targets[0], policy
            )
        assert caught.value.code == "WORKFLOW_POLICY_DENIED"
        # The refusal teaches: it names the setting an operator changes to allow the target.
        assert setting in str(caught.value)
