"""parse_definition: normalization, publication rejections and the static analysis helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.engine import DefinitionError, parse_definition
from runtime.engine.check.static_requirements import (
    declared_nested_calls,
    fork_widths,
    interactive_violations,
    retry_envelope,
    static_requirements,
    write_tasks,
)
from tests.support.shared import set_assert_definitions

FIXTURES = Path(__file__).parent / "fixtures" / "definitions"
HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}


def definition(do: list[Any], **extra: Any) -> dict[str, Any]:
    return {"document": dict(HEADER), **extra, "do": do}


def rejection(document: Any) -> DefinitionError:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document)
    return caught.value


@pytest.mark.parametrize("source", set_assert_definitions())
def test_reference_definition_parses_and_rewrites_bare_leaves_with_warnings(source: Path) -> None:
    parsed = parse_definition(yaml.safe_load(source.read_text()))
    assert [t.kind for t in parsed.tasks.tasks] == ["set", "assert", "set"]
    [first] = parsed.normalized_document()["do"][0].values()
    export = first["export"]["as"]
    assert export == {"decision": "${ .output }"}
    assert len(parsed.warnings) == 2


def test_every_task_kind_parses() -> None:
    for name in ("s01", "s02", "s06", "s08", "s09", "s10", "s11", "s12", "s13", "s14b", "s15"):
        parse_definition(yaml.safe_load((FIXTURES / f"{name}.yaml").read_text()))


@pytest.mark.parametrize(
    ("evaluate", "fragment"),
    [
        ({"language": "jq"}, "jq"),
        ({"language": "javascript"}, "javascript"),
        ({"mode": "loose"}, "loose"),
    ],
)
def test_other_languages_and_loose_mode_are_rejected(evaluate: Any, fragment: str) -> None:
    error = rejection(definition([{"a": {"set": {"x": 1}}}], evaluate=evaluate))
    assert fragment in error.message


@pytest.mark.parametrize(
    ("task", "fragment"),
    [
        ({"listen": {"to": {}}}, "listen"),
        ({"emit": {"event": {}}}, "emit"),
        ({"run": {"shell": {"command": "ls"}}}, "run"),
        ({"call": "a2a", "with": {}}, "a2a"),
        ({"call": "grpc", "with": {}}, "grpc"),
        ({"call": "myFunction"}, "custom"),
        ({"frobnicate": {}}, "unknown task kind"),
    ],
)
def test_unsupported_task_kinds_are_rejected(task: Any, fragment: str) -> None:
    assert fragment in rejection(definition([{"a": task}])).message


def test_unknown_fields_are_rejected() -> None:
    assert "unknown fields" in rejection(definition([{"a": {"set": {}, "bogus": 1}}])).message
    assert "unknown top-level" in rejection({**definition([{"a": {"set": {}}}]), "x": 1}).message


def test_missing_then_target_is_rejected() -> None:
    error = rejection(definition([{"a": {"set": {}, "then": "nowhere"}}]))
    assert error.task == "/do/0/a"


def test_backward_jump_is_rejected_as_an_unbounded_loop() -> None:
    error = rejection(definition([{"a": {"set": {}}}, {"b": {"set": {}, "then": "a"}}]))
    assert "backward" in error.message


def test_then_target_at_another_depth_is_rejected() -> None:
    error = rejection(
        definition([{"outer": {"do": [{"a": {"set": {}, "then": "b"}}]}}, {"b": {"set": {}}}])
    )
    assert error.task == "/do/0/outer/do/0/a"


def test_undeclared_identifier_names_task_and_expression() -> None:
    document = definition(
        [{"a": {"set": {"v": "${ nobody.here }"}}}],
        input={
            "schema": {"format": "json", "document": {"type": "object", "properties": {"id": {}}}}
        },
    )
    error = rejection(document)
    assert (error.task, error.expression) == ("/do/0/a", "nobody.here")


def test_invalid_cel_is_rejected_at_publication() -> None:
    error = rejection(definition([{"a": {"set": {"v": "${ 1 + }"}}}]))
    assert error.expression == "1 +"


@pytest.mark.parametrize(
    "document",
    [
        "not a mapping",
        {"do": []},
        {"document": {**HEADER, "dsl": "2.0.0"}, "do": [{"a": {"set": {}}}]},
        {"document": {**HEADER, "name": "-bad-"}, "do": [{"a": {"set": {}}}]},
    ],
)
def test_invalid_documents_are_rejected(document: Any) -> None:
    rejection(document)


def test_duplicate_and_reserved_task_names_are_rejected() -> None:
    assert "duplicate" in rejection(definition([{"a": {"set": {}}}, {"a": {"set": {}}}])).message
    assert "named" in rejection(definition([{"end": {"set": {}}}])).message


def test_fork_rules_reject_export_in_branches_and_nested_forks() -> None:
    export = {"x": {"set": {}, "export": {"as": {"k": 1}}}}
    assert "export" in rejection(definition([{"f": {"fork": {"branches": [export]}}}])).message
    nested = {"inner": {"fork": {"branches": [{"y": {"set": {}}}]}}}
    assert "fork" in rejection(definition([{"f": {"fork": {"branches": [nested]}}}])).message


def test_external_schema_inline_credentials_stdio_and_extensions_are_rejected() -> None:
    resource = {"schema": {"format": "json", "resource": {"endpoint": "http://x"}}}
    assert "resource" in rejection(definition([{"a": {"set": {}}}], input=resource)).message
    auth = {
        "call": "http",
        "with": {
            "method": "get",
            "endpoint": {"uri": "http://h/p", "authentication": {"basic": {"username": "u"}}},
        },
    }
    assert "inline credentials" in rejection(definition([{"a": auth}])).message
    stdio = {
        "call": "mcp",
        "with": {
            "method": "tools/call",
            "parameters": {"name": "x"},
            "transport": {"stdio": {"command": "sh"}},
        },
    }
    assert "stdio" in rejection(definition([{"a": stdio}])).message
    assert (
        "extensions" in rejection(definition([{"a": {"set": {}}}], use={"extensions": []})).message
    )


def test_endpoint_expressions_and_host_templates_are_rejected() -> None:
    for uri in ("${ input.url }", "http://{host}/p", "ftp://h/p"):
        call = {"call": "http", "with": {"method": "get", "endpoint": uri}}
        rejection(definition([{"a": call}]))


def test_switch_default_must_be_last() -> None:
    switch = [{"d": {"then": "end"}}, {"x": {"when": "true", "then": "end"}}]
    assert "last" in rejection(definition([{"s": {"switch": switch}}])).message


def test_wait_and_timeout_durations_must_be_literal() -> None:
    rejection(definition([{"w": {"wait": "${ input.d }"}}]))
    rejection(definition([{"w": {"wait": "PT1S", "timeout": {"after": "soon"}}}]))


def _writes() -> Any:
    return parse_definition(
        definition(
            [
                {"read": {"call": "http", "with": {"method": "get", "endpoint": "http://h/a"}}},
                {
                    "post": {
                        "call": "http",
                        "with": {"method": "post", "endpoint": "http://h/b"},
                        "metadata": {"approvalEvidenceDigest": "sha256:ab"},
                    }
                },
                {"lookup": {"call": "mcp", "with": {"tool": "lookup"}}},
                {"pay": {"call": "mcp", "with": {"tool": "pay"}}},
            ]
        )
    )


def test_write_tasks_are_non_get_http_calls_and_non_read_only_mcp_tools() -> None:
    found = write_tasks(_writes(), read_only_tools={"lookup"})
    assert [(w.qualified_name, w.kind, w.target, w.approval_evidence_digest) for w in found] == [
        ("post", "http", "POST", "sha256:ab"),
        ("pay", "mcp", "pay", None),
    ]


def test_static_requirements_count_fork_width_calls_and_retry_envelope() -> None:
    s09 = parse_definition(yaml.safe_load((FIXTURES / "s09.yaml").read_text()))
    envelope = retry_envelope(s09)["/do/0/resilient"]
    assert (envelope.attempts, envelope.worst_delay_ms) == (4, 20 + 40 + 80)
    s11 = parse_definition(yaml.safe_load((FIXTURES / "s11.yaml").read_text()))
    assert fork_widths(s11) == {"/do/0/both": 2}
    loop = definition(
        [{"l": {"for": {"in": ".xs"}, "do": [{"c": {"call": "mcp", "with": {"tool": "t"}}}]}}],
        input={
            "schema": {
                "format": "json",
                "document": {
                    "type": "object",
                    "properties": {"xs": {"type": "array", "maxItems": 3}},
                },
            }
        },
    )
    assert declared_nested_calls(parse_definition(loop)) == 3
    summary = static_requirements(s09)
    assert (summary.max_task_attempts, summary.nested_calls) == (4, 0)


def test_interactive_violations_report_schedules_unbounded_retries_and_long_waits() -> None:
    retry = {"t": {"try": [{"a": {"set": {}}}], "catch": {"retry": {"delay": "PT1S"}}}}
    parsed = parse_definition(
        definition([retry, {"w": {"wait": "PT40S"}}], schedule={"every": "PT1M"})
    )
    violations = interactive_violations(parsed, total_deadline_ms=30_000)
    assert len(violations) == 3


@pytest.mark.parametrize("call", [["http"], {}, {"http": 1}, 7, None])
def test_a_call_that_is_not_a_function_name_is_a_definition_error(call: Any) -> None:
    error = rejection(definition([{"fetch": {"call": call}}]))
    assert "call" in error.message


def test_any_parser_failure_on_a_definition_is_input_invalid_at_publication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runtime.errors import WorkflowError
    from runtime.publication import definition_checks

    def broken(document: Any) -> None:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(definition_checks, "parse_definition", broken)
    with pytest.raises(WorkflowError) as caught:
        definition_checks.validate_definition(definition([]))
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"
    assert "unhashable" not in caught.value.message
