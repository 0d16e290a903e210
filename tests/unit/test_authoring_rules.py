"""The Phase 3 rules, the semantic digest, the authoring settings and what the context withholds
(issue 38), without a database or a model."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import msgspec
import pytest

from generated.models import CallerPolicy, ToolAnnotations
from runtime.authoring import AuthoringSettings
from runtime.authoring.answer import categorized, parse_answer
from runtime.authoring.fixtures import stub_value
from runtime.canonical import definition_digest, document_canonical_bytes, sha256_digest
from runtime.composition.environment import apply_environment
from runtime.engine.check.authoring_rules import authoring_problems
from runtime.errors import WorkflowError
from runtime.invocation.rules import check_caller_policy
from runtime.publication.authoring.catalog import caller_may_call, context_tool
from runtime.publication.authoring.credential_text import credential_kinds
from runtime.publication.store.authoring_rows import AuthoringTool
from runtime.settings import Settings
from tests.support.authoring_model import LOOKUP, SCORE, good_definition, good_draft, mcp_call
from tests.support.publication_builders import context

SELECTED = frozenset({LOOKUP, SCORE})


def _rules(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(p.rule, p.pointer) for p in authoring_problems(document, SELECTED)}


def _with_task(task: dict[str, Any], **top: Any) -> dict[str, Any]:
    document = good_definition() | top
    document["do"].append(task)
    return document


def test_a_draft_that_calls_only_the_selected_tools_through_the_gateway_passes() -> None:
    document = good_definition()
    document["do"].append({"pick": {"set": {"v": "${ input.a == 'x|y' || input.b }"}}})
    document["do"].append({"gate": {"if": "size(input.items) > 0 || input.force", "set": {}}})
    assert authoring_problems(document, SELECTED) == []


@pytest.mark.requirement("001:Phase 3 AI-Assisted Authoring")
@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            _with_task({"purge": mcp_call("admin.purge", {})}),
            ("unselected-tool", "/do/2/purge/with/parameters/name"),
        ),
        (
            _with_task(
                {"x": {"call": "http", "with": {"method": "get", "endpoint": "https://a.b/c"}}}
            ),
            ("non-mcp-call", "/do/2/x/call"),
        ),
        (
            _with_task({"x": mcp_call(LOOKUP, {}, endpoint="https://evil.example/mcp")}),
            ("invented-endpoint", "/do/2/x/with/transport/http/endpoint"),
        ),
        (_with_task({"nap": {"wait": "PT1S"}}), ("unsupported-task", "/do/2/nap")),
        (
            _with_task({"sh": {"run": {"shell": {"command": "ls"}}}}),
            ("unsupported-task", "/do/2/sh"),
        ),
        (
            _with_task(
                {"f": {"fork": {"branches": [{"g": {"fork": {"branches": [{"h": {"set": {}}}]}}}]}}}
            ),
            ("nested-fork", "/do/2/f/fork/branches/0/g"),
        ),
        (
            _with_task(
                {
                    "each": {
                        "for": {"in": "${ input.items }"},
                        "do": [{"f": {"fork": {"branches": [{"a": {"set": {}}}]}}}],
                    }
                }
            ),
            ("unbounded-fork", "/do/2/each/do/0/f"),
        ),
        (
            _with_task({"f": {"fork": {"branches": [{f"b{i}": {"set": {}}} for i in range(9)]}}}),
            ("unbounded-fork", "/do/2/f/fork/branches"),
        ),
        (_with_task({"m": {"set": {"v": "${ .items | map(.id) }"}}}), ("jq", "/do/2/m/set/v")),
        (_with_task({"m": {"if": ".items | length > 0", "set": {}}}), ("jq", "/do/2/m/if")),
        (_with_task({"m": {"set": {}}}, evaluate={"language": "jq"}), ("jq", "/evaluate/language")),
        (
            _with_task({"m": {"set": {"v": "${ input.items.map(i => i.id) }"}}}),
            ("javascript", "/do/2/m/set/v"),
        ),
        (
            _with_task({"m": {"set": {}}}, evaluate={"language": "python"}),
            ("non-cel-profile", "/evaluate/language"),
        ),
        (
            _with_task({"m": {"set": {}}}, use={"secrets": ["partnerKey"]}),
            ("generated-credential", "/use/secrets"),
        ),
    ],
)
def test_each_phase3_rule_is_a_typed_finding_with_its_pointer(
    document: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert expected in _rules(document)


def test_the_semantic_digest_leaves_out_only_the_provenance() -> None:
    manual = good_definition()
    # A definition without provenance digests exactly as definition-digest-v1 always did.
    assert definition_digest(manual) == sha256_digest(document_canonical_bytes(manual))
    generated = copy.deepcopy(manual)
    generated["document"]["metadata"] = {"aiAuthoring": {"model": "m", "reviewerUserId": "u"}}
    assert definition_digest(generated) == definition_digest(manual)
    tagged = copy.deepcopy(generated)
    tagged["document"]["metadata"]["team"] = "claims"
    assert definition_digest(tagged) != definition_digest(manual)
    del tagged["document"]["metadata"]["aiAuthoring"]
    assert definition_digest(tagged) == sha256_digest(document_canonical_bytes(tagged))


@pytest.mark.requirement("001:Phase 3 AI-Assisted Authoring")
def test_the_authoring_settings_come_from_the_seeds_variables_and_never_print_the_token() -> None:
    environ = {
        "WORKFLOW_AUTHORING_LLM_URL": "https://llm.example.com/v1",
        "WORKFLOW_AUTHORING_LLM_MODEL": "qwen2.5-coder",
        "WORKFLOW_AUTHORING_LLM_BEARER_TOKEN": "12345678",
        "WORKFLOW_AUTHORING_LLM_TIMEOUT_SECONDS": "45",
    }
    settings = msgspec.convert(apply_environment({}, Settings, environ), Settings).authoring
    assert settings.configured
    assert settings.completions_url == "https://llm.example.com/v1/chat/completions"
    assert (settings.llm_bearer_token, settings.llm_timeout_seconds) == ("12345678", 45)
    assert "12345678" not in repr(settings)
    assert not AuthoringSettings().configured  # the token is optional, the URL and model not
    for timeout in (0.5, 61):
        with pytest.raises(ValueError, match="between 1 and 60"):
            AuthoringSettings(llm_timeout_seconds=timeout)
    with pytest.raises(ValueError, match="user info"):
        AuthoringSettings(llm_url="https://user:pw@llm.example.com/v1")


def test_credential_text_is_found_and_digests_and_ids_are_not() -> None:
    assert "jwt" in credential_kinds("token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    assert "bearer-token" in credential_kinds("send Authorization: Bearer abcdefgh12345")
    assert "assigned-secret" in credential_kinds("password=hunter2hunter2")
    assert "opaque-key" in credential_kinds("key Q9xK2mPw7LrT4vNz8YbC3hJd6FsA1eGu")
    assert credential_kinds("sha256:" + "ab12" * 16) == []
    assert credential_kinds("tool 0196a1b2-0000-7000-8000-0000000000aa returns a score") == []


def test_the_context_withholds_samples_extensions_and_secret_bearing_fields() -> None:
    tool = AuthoringTool(
        tool_id="0196a1b2-0000-7000-8000-0000000000aa",
        tool_name=LOOKUP,
        tool_description="Looks claims up (Authorization: Bearer abcdefgh12345678).",
        input_schema={
            "type": "object",
            "required": ["id", "password"],
            "properties": {
                "id": {"type": "string", "examples": ["C-1"]},
                "password": {"type": "string"},
                "pin": {"type": "string", "writeOnly": True},
            },
            "x-backend": "https://internal.example",
        },
        output_schema=None,
        tool_annotations=ToolAnnotations(read_only=True, destructive=False),
        caller_policy=CallerPolicy(),
        version_status="active",
    )
    sent = context_tool(tool)
    assert sent.metadata["inputSchema"] == {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "string"}},
    }
    assert "abcdefgh12345678" not in str(sent.metadata)
    assert set(sent.stripped) == {
        "/description",
        "/inputSchema/properties/id/examples",
        "/inputSchema/properties/password",
        "/inputSchema/properties/pin",
        "/inputSchema/x-backend",
    }


@pytest.mark.parametrize(
    "policy",
    [
        {},
        {"anyRole": ["claims-agent"]},
        {"anyRole": ["nobody"]},
        {"requireAnyOf": [{"claim": "position", "value": "pos-1"}]},
        {"requireAnyOf": [{"claim": "role", "value": "nobody"}]},
    ],
)
def test_the_catalog_filters_by_the_caller_policy_exactly_as_invocation_admits(
    policy: dict[str, Any],
) -> None:
    ctx = replace(context(), roles=frozenset({"claims-agent"}), positions=frozenset({"pos-1"}))
    typed = msgspec.convert(policy, CallerPolicy)
    try:
        check_caller_policy(ctx, typed)
        admitted = True
    except WorkflowError:
        admitted = False
    assert caller_may_call(ctx, typed) is admitted


def test_a_stub_tool_answers_the_smallest_value_its_output_schema_accepts() -> None:
    schema = {
        "type": "object",
        "required": ["status", "count", "tags"],
        "properties": {
            "status": {"type": "string", "enum": ["open", "closed"]},
            "count": {"type": "integer", "minimum": 2},
            "tags": {"type": "array", "minItems": 1, "items": {"type": "boolean"}},
            "note": {"type": "string"},
        },
    }
    assert stub_value(schema) == {"status": "open", "count": 2, "tags": [False]}


def _answer_with(**changes: Any) -> str:
    answer = good_draft() | changes
    return json.dumps(answer)


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        "null",
        "{}",
        '{"definition": {}, "definition": {}}',
        '{"x": NaN}',
        "```json\n{}\n```",
        _answer_with(definition=[]),
        _answer_with(assumptions=["nul \u0000 inside"]),
        json.dumps(good_draft()).replace("claims.lookup", "claims\\ud800lookup", 1),
        _answer_with(assumptions=["x" * 1025]),
        _answer_with(assumptions=[""]),
        _answer_with(extra=True),
        json.dumps(
            good_draft()
            | {
                "fixtures": good_draft()["fixtures"]
                | {"contract": [good_draft()["fixtures"]["edge"][0]] * 9}
            }
        ),
        json.dumps(
            good_draft()
            | {
                "fixtures": good_draft()["fixtures"]
                | {"edge": [{"name": "bad name", "input": {}, "expect": {"output": 1}}]}
            }
        ),
        json.dumps(
            good_draft()
            | {
                "fixtures": good_draft()["fixtures"]
                | {"edge": [{"name": "n", "input": {}, "expect": {"fault": {"status": 999}}}]}
            }
        ),
        json.dumps(
            good_draft()
            | {
                "fixtures": good_draft()["fixtures"]
                | {"edge": [{"name": "n", "input": {}, "expect": {}}]}
            }
        ),
    ],
)
def test_an_answer_that_is_not_the_strict_draft_json_is_a_typed_malformed_failure(
    content: str,
) -> None:
    with pytest.raises(WorkflowError) as refused:
        parse_answer(content)
    assert refused.value.code.value == "WORKFLOW_AUTHORING_MODEL_FAILED"
    assert refused.value.details == {"reason": "malformed"}


def test_the_strict_draft_json_parses_into_its_fixtures_by_category() -> None:
    answer = parse_answer(json.dumps(good_draft()))
    assert [category for category, _ in categorized(answer)] == [
        "contract",
        "mapping",
        "edge",
        "failure",
    ]
