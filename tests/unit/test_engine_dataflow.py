"""The schema-aware data-flow checker: shapes along every path, the bugs they prove."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.canonical import load_definition_yaml
from runtime.engine import parse_definition
from runtime.engine.check import DataFlowReport, check_data_flow
from tests.support.engine import FIXTURES
from tests.support.shared import REFERENCE_DEFINITION, requires_shared, shared_path

pytestmark = pytest.mark.requirement("001:CEL Runtime Contract")

SCHEMA = {
    "type": "object",
    "properties": {
        "applicantId": {"type": "string"},
        "score": {"type": "integer"},
        "nickname": {"type": "string"},
    },
    "required": ["applicantId", "score"],
}


def check(tasks: list[Any], schema: Any = SCHEMA, **top: Any) -> DataFlowReport:
    document: dict[str, Any] = {
        "document": {"dsl": "1.0.3", "namespace": "t", "name": "t", "version": "1.0.0"},
        "do": tasks,
        **top,
    }
    if schema is not None:
        document["input"] = {"schema": {"format": "json", "document": schema}}
    return check_data_flow(parse_definition(document))


def messages(findings: Any) -> list[str]:
    return [finding.message for finding in findings]


def test_a_read_after_a_set_that_drops_the_field_is_an_error_with_the_workflow_input_hint() -> None:
    report = check(
        [
            {"decide": {"set": {"status": "APPROVED"}}},
            {"finish": {"set": {"applicantId": "${ .applicantId }"}}},
        ]
    )
    [error] = report.errors
    assert error.pointer == "/do/1/finish"
    assert error.code == "data.field-absent"
    assert "'applicantId'" in error.message
    assert "available: status (data)" in error.message
    assert "workflow.input.applicantId" in error.message
    # Written for light-workflow (one shared context), such a read is what convert rewrites.
    assert "`workflow-mcp convert` rewrites it" in error.message


def test_the_same_read_from_the_workflow_input_root_is_clean() -> None:
    report = check(
        [
            {"decide": {"set": {"status": "APPROVED"}}},
            {"finish": {"set": {"applicantId": "${ workflow.input.applicantId }"}}},
        ]
    )
    assert report == DataFlowReport((), ())


def test_a_member_read_on_a_closed_task_output_is_an_error() -> None:
    report = check(
        [
            {"decide": {"set": {"status": "APPROVED"}}},
            {"finish": {"set": {"s": "${ input.statsu }"}}},
        ]
    )
    assert messages(report.errors) == [
        "expression 'input.statsu' at /do/1/finish: reads field 'statsu' of input, which "
        "cannot exist here on any path; available: status; hint: for a workflow input field, "
        "read workflow.input.statsu"
    ]


def test_a_field_only_one_switch_target_sets_is_a_warning_and_has_guards_it() -> None:
    tasks = [
        {
            "route": {
                "switch": [
                    {"low": {"when": ".score < 10", "then": "tagged"}},
                    {"other": {"then": "plain"}},
                ]
            }
        },
        {"tagged": {"set": {"status": "LOW", "tag": "x"}, "then": "finish"}},
        {"plain": {"set": {"status": "OTHER"}}},
        {"finish": {"set": {"status": "${ .status }", "tag": "${ input.tag }"}}},
    ]
    report = check(tasks)
    assert report.errors == ()
    [warning] = report.warnings
    assert (warning.pointer, warning.code) == ("/do/3/finish", "data.field-maybe-absent")
    assert "'input.tag'" in warning.message
    tasks[3] = {"finish": {"set": {"tag": "${ has(input.tag) ? input.tag : 'none' }"}}}
    assert check(tasks) == DataFlowReport((), ())


def test_an_optional_schema_field_read_without_has_is_a_warning() -> None:
    report = check([{"greet": {"set": {"nick": "${ .nickname }"}}}])
    assert report.errors == ()
    assert [w.code for w in report.warnings] == ["data.field-maybe-absent"]


def test_comparing_a_string_with_a_number_is_an_error() -> None:
    report = check([{"gate": {"if": "${ .applicantId > 3 }", "set": {"ok": True}}}])
    assert messages(report.errors) == [
        "expression '.applicantId > 3' at /do/0/gate: compares a string with a number"
    ]


def test_arithmetic_on_a_map_is_an_error() -> None:
    report = check(
        [
            {"make": {"set": {"money": {"amount": 1}}}},
            {"add": {"set": {"total": "${ .money + 1 }"}}},
        ]
    )
    assert messages(report.errors) == ["expression '.money + 1' at /do/1/add: applies '+' to a map"]


def test_an_unknown_shape_never_proves_anything() -> None:
    call = {
        "call": "http",
        "with": {"method": "get", "endpoint": "https://api.example.com/x"},
    }
    report = check(
        [
            {"fetch": call},
            {"use": {"set": {"a": "${ .whatever.deep + 1 }", "b": "${ input.x < 'y' }"}}},
        ],
        schema=None,
    )
    assert report == DataFlowReport((), ())


def test_a_skipped_task_passes_its_input_on_so_fields_of_both_paths_may_exist() -> None:
    report = check(
        [
            {"decide": {"set": {"status": "APPROVED"}}},
            {"maybe": {"if": ".status == 'X'", "set": {"other": 1}}},
            {"finish": {"set": {"s": "${ .status }"}}},
        ]
    )
    assert report.errors == ()
    assert [w.pointer for w in report.warnings] == ["/do/2/finish"]


def test_an_export_is_read_back_from_the_context_and_a_missing_context_key_is_an_error() -> None:
    tasks: list[Any] = [
        {"decide": {"set": {"status": "APPROVED"}, "export": {"as": {"decision": "${ output }"}}}},
        {"other": {"set": {"x": 1}}},
        {"finish": {"set": {"s": "${ .decision.status }", "r": "${ context.risk }"}}},
    ]
    report = check(tasks)
    assert [e.message.split(": ", 1)[1] for e in report.errors] == [
        "reads field 'risk' of context, which cannot exist here on any path; available: decision"
    ]


def test_a_loop_body_sees_the_output_of_the_previous_iteration() -> None:
    loop = {
        "for": {"each": "c", "in": ".colors"},
        "do": [{"add": {"set": {"picked": "${ has(input.picked) ? input.picked + [c] : [c] }"}}}],
    }
    schema = {"type": "object", "properties": {"colors": {"type": "array", "maxItems": 3}}}
    assert check([{"loop": loop}], schema=schema).errors == ()


def test_a_catch_body_starts_from_the_try_input() -> None:
    guarded = {
        "try": [{"get": {"call": "http", "with": {"method": "get", "endpoint": "https://a.b/c"}}}],
        "catch": {"as": "err", "do": [{"record": {"set": {"who": "${ .applicantId }"}}}]},
    }
    assert check([{"guarded": guarded}]) == DataFlowReport((), ())


def _fixture_documents() -> list[Path]:
    return sorted(FIXTURES.glob("*.yaml"))


@pytest.mark.parametrize("path", _fixture_documents(), ids=lambda p: p.stem)
def test_no_conformance_scenario_has_a_provable_data_bug(path: Path) -> None:
    document = load_definition_yaml(path.read_text(encoding="utf-8"))
    assert check_data_flow(parse_definition(document)).errors == ()


@requires_shared(REFERENCE_DEFINITION)
def test_the_reference_sample_has_no_data_bug_and_no_warning() -> None:
    document = yaml.safe_load(shared_path(REFERENCE_DEFINITION).read_text(encoding="utf-8"))
    assert check_data_flow(parse_definition(document)) == DataFlowReport((), ())


def test_a_catch_sees_what_the_try_body_exported_before_it_failed() -> None:
    failing = {"raise": {"error": {"type": "https://e.example/x", "status": 500}}}
    guarded = {
        "try": [
            {"mark": {"set": {"step": 1}, "export": {"as": {"progress": "${ output }"}}}},
            {"fail": failing},
        ],
        "catch": {"do": [{"recover": {"set": {"at": "${ context.progress.step }"}}}]},
    }
    report = check([{"guarded": guarded}])
    assert report.errors == ()
    assert [w.pointer for w in report.warnings] == ["/do/0/guarded/catch/do/0/recover"]


def test_a_has_guard_on_the_input_field_covers_the_leading_dot_read() -> None:
    report = check([{"greet": {"set": {"nick": "${ has(input.nickname) ? .nickname : '' }"}}}])
    assert report == DataFlowReport((), ())


def test_past_its_visit_budget_the_checker_proves_nothing_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runtime.engine.check import data_flow

    monkeypatch.setattr(data_flow, "MAX_TASK_VISITS", 1)
    report = check(
        [
            {"decide": {"set": {"status": "APPROVED"}}},
            {"finish": {"set": {"applicantId": "${ .applicantId }"}}},
        ]
    )
    assert report.errors == ()
    assert [w.code for w in report.warnings] == ["data.check-skipped"]
