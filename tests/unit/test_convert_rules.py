"""Each light-workflow conversion rule, and that converting twice changes nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runtime.composition.check import FileReport, check_loaded
from runtime.engine import parse_definition
from runtime.engine.convert import NESTED_ASK_REASON, convert_definition
from runtime.engine.convert.expressions import convert_expression, convert_string
from runtime.engine.convert.scope import Scope
from runtime.engine.convert.uris import UriNotConvertible, convert_uri
from runtime.publication.definition_checks import checked_for_publication

pytestmark = pytest.mark.requirement("issue-23:convert")

SCOPE = Scope(
    exported=frozenset({"risk"}),
    maybe=frozenset({"approval", "note"}),
    inputs=frozenset({"applicantId", "customerId", "channel", "note", "approvalMode"}),
)


def definition(*tasks: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A light-workflow definition over an input with applicantId and customerId."""
    properties = {"applicantId": {"type": "string"}, "customerId": {"type": "string"}}
    return {
        "document": {"dsl": "1.0.3", "namespace": "t", "name": "t", "version": "1.0.0"},
        "input": {"schema": {"format": "json", "document": {"type": "object",
                                                            "properties": properties}}},
        "do": list(tasks),
        **top,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "cel"),
    [
        (".applicantId", "workflow.input.applicantId"),  # never exported: the workflow input
        (".risk.riskScore", "context.risk.riskScore"),  # exported on every path
        (".approval.value", "(has(context.approval) ? context.approval.value : null)"),
        (".note", "(has(context.note) ? context.note : workflow.input.note)"),
        ("applicantId", "workflow.input.applicantId"),  # CEL over the context's keys
    ],
)
def test_a_path_reads_the_input_an_exported_key_or_an_explicit_has_choice(
    text: str, cel: str
) -> None:
    assert convert_expression(text, SCOPE) == cel


@pytest.mark.parametrize(
    ("text", "cel"),
    [
        (".risk.riskScore <= 30", "context.risk.riskScore <= 30"),
        (".applicantId == premium", 'workflow.input.applicantId == "premium"'),
        ("approvalMode == auto-reject", 'workflow.input.approvalMode == "auto-reject"'),
        (".risk.ok == TRUE", "context.risk.ok == true"),
        (".risk.level != 'high'", "context.risk.level != 'high'"),
    ],
)
def test_a_bare_word_in_a_comparison_is_quoted_as_the_string_light_workflow_reads(
    text: str, cel: str
) -> None:
    assert convert_expression(text, SCOPE) == cel


def test_dollar_braces_inside_text_become_one_cel_concatenation() -> None:
    text = "offer:${ .customerId }:${ .risk.id }"
    assert convert_string(text, SCOPE) == (
        '${ "offer:" + string(workflow.input.customerId) + ":" + string(context.risk.id) }'
    )
    assert convert_string("${{ .risk }}", SCOPE) == "${ context.risk }"
    assert convert_string("APPROVED", SCOPE) == "APPROVED"


def test_uri_values_go_to_path_placeholders_and_query_entries_with_the_host_literal() -> None:
    uri = "http://api:8085/customers/${ .customerId }/prefs?channel=${ .channel }&kind=a"
    converted = convert_uri(uri, SCOPE)
    assert converted.template == "http://api:8085/customers/{customerId}/prefs"
    assert converted.placeholders == {"customerId": "${ workflow.input.customerId }"}
    assert converted.query == {"channel": "${ string(workflow.input.channel) }", "kind": "a"}
    with pytest.raises(UriNotConvertible):
        convert_uri("http://${ .host }/x", SCOPE)


def test_a_task_export_switch_and_end_are_rewritten_and_the_result_publishes() -> None:
    load = {
        "call": "http",
        "with": {
            "method": "GET",
            "endpoint": {"uri": "http://api:8085/customers/${ .customerId }"},
        },
        "export": {"as": {"profile": ".output"}},
    }
    cases = [
        {"gold": {"when": ".profile.segment == premium", "then": "gold"}},
        {"other": {"then": "plain"}},
    ]
    gold = {"set": {"who": "${ .applicantId }", "tier": "${ .profile.segment }"}, "end": True}
    source = definition(
        {"load": load},
        {"route": {"switch": cases}},
        {"gold": gold},
        {"plain": {"set": {"who": "${ .applicantId }"}}},
    )
    conversion = convert_definition(source)
    tasks = conversion.document["do"]
    assert tasks[0]["load"]["input"] == {"from": {"customerId": "${ workflow.input.customerId }"}}
    assert tasks[0]["load"]["export"] == {"as": {"profile": "${ output }"}}
    assert tasks[1]["route"]["switch"][0]["gold"]["when"] == (
        'context.profile.segment == "premium"'
    )
    assert tasks[2]["gold"]["then"] == "end" and "end" not in tasks[2]["gold"]
    assert not conversion.blockers
    assert check_loaded(FileReport("t"), conversion.document).problems == []
    # What workflow_definition_publish runs on the document: it publishes, warning only that
    # the source's input schema leaves the fields it reads optional.
    warnings = checked_for_publication(copy.deepcopy(conversion.document)).warnings
    assert {(w.code, w.pointer) for w in warnings} == {
        ("data.field-maybe-absent", "/do/0/load"),
        ("data.field-maybe-absent", "/do/2/gold"),
        ("data.field-maybe-absent", "/do/3/plain"),
    }
    pointers = {change.pointer for change in conversion.changes}
    assert "/do/2/gold/end" in pointers and "/do/0/load/with/endpoint" in pointers


def test_mcp_sessions_become_the_official_mcp_call_form() -> None:
    sessions = {"gateway": {"server": {"endpoint": {"uri": "https://gw:8443/mcp"}}}}
    task = {"call": "mcp", "with": {"session": "gateway", "tool": "getProfile",
                                    "arguments": {"id": "${ .customerId }"}}}  # fmt: skip
    conversion = convert_definition(definition({"load": task}, use={"mcpSessions": sessions}))
    assert "use" not in conversion.document
    assert conversion.document["do"][0]["load"]["with"] == {
        "method": "tools/call",
        "parameters": {"name": "getProfile", "arguments": {"id": "${ workflow.input.customerId }"}},
        "transport": {"http": {"endpoint": "https://gw:8443/mcp"}},
    }


def test_output_schemas_and_metadata_move_under_document_metadata_and_version_is_kept() -> None:
    source = definition({"a": {"set": {"x": 1}}}, outputSchemas={"s": {"type": "object"}},
                        metadata={"owner": "me"})  # fmt: skip
    conversion = convert_definition(source)
    header = conversion.document["document"]
    assert header["metadata"] == {"outputSchemas": {"s": {"type": "object"}}, "owner": "me"}
    assert "outputSchemas" not in conversion.document and "metadata" not in conversion.document
    assert header["version"] == "1.0.0"
    assert convert_definition(source, version="2.0.0").document["document"]["version"] == "2.0.0"


def test_agent_and_run_are_named_as_not_convertible_with_the_reason() -> None:
    source = definition(
        {"think": {"call": "agent", "with": {"agent": "a"}}},
        {"shell": {"run": {"shell": {"command": "ls"}}}},
    )
    blockers = {(b.pointer, b.construct): b.reason for b in convert_definition(source).blockers}
    assert "call: agent" in blockers[("/do/0/think", "call: agent")]
    assert "run" in blockers[("/do/1/shell", "run")]


def test_a_top_level_ask_is_kept_with_its_prompt_read_from_the_context() -> None:
    ask = {
        "prompt": "Approve ${ .applicantId }?",
        "mode": "confirm",
        "assignment": {"roleId": "admin"},
        "options": [{"label": "Ok", "value": "OK"}],
    }
    conversion = convert_definition(definition({"approve": {"ask": ask}}))
    assert conversion.blockers == ()
    [item] = conversion.document["do"]
    converted = item["approve"]["ask"]
    assert converted["prompt"] == '${ "Approve " + string(workflow.input.applicantId) + "?" }'
    assert converted["mode"] == "approval"  # a confirmation is an approval of its one option


def test_a_nested_ask_is_kept_and_only_one_in_a_fork_branch_is_named_with_the_reason() -> None:
    nested = {"prompt": "ok?", "assignment": {"roleId": "admin"}}
    branches = [{"left": {"ask": nested}}, {"right": {"set": {"a": 1}}}]
    source = definition(
        {"outer": {"do": [{"inner": {"ask": nested}}]}},
        {"both": {"fork": {"branches": branches}}},
    )
    blockers = {(b.pointer, b.construct): b.reason for b in convert_definition(source).blockers}
    assert blockers == {("/do/1/both/fork/branches/0/left", "ask"): NESTED_ASK_REASON}
    assert "fork" in NESTED_ASK_REASON


def test_a_computed_assignee_is_converted_to_read_the_context() -> None:
    computed = {"prompt": "ok?", "assignment": {"userId": "${ .applicantId }", "roleId": "x"}}
    conversion = convert_definition(definition({"mine": {"ask": computed}}))
    assert conversion.blockers == ()
    [item] = conversion.document["do"]
    assignment = item["mine"]["ask"]["assignment"]
    assert assignment == {"userId": "${ workflow.input.applicantId }", "roleId": "x"}
    parse_definition(conversion.document)  # an ask with a computed assignee parses


def test_converting_a_converted_definition_changes_nothing() -> None:
    source = definition(
        {"load": {"call": "http", "with": {"method": "GET", "endpoint": {
            "uri": "http://api:8085/c/${ .customerId }?s=${ .applicantId }"}},
            "export": {"as": {"profile": ".output.body"}}}},
        {"mark": {"set": {"key": "k-${ .profile.id }"}, "if": ".profile.ok == true"}},
    )  # fmt: skip
    once = convert_definition(source)
    twice = convert_definition(once.document)
    assert twice.document == once.document
    assert twice.changes == ()


def _retry_loop(*, with_ask: bool) -> dict[str, Any]:
    """call -> check -> (back to call | on): light-workflow's loop written as a backward then."""
    review = {"ask": {"prompt": "ok?", "mode": "approval", "assignment": {"roleId": "admin"},
                      "options": [{"label": "Again", "value": "AGAIN"}]}}  # fmt: skip
    first = review if with_ask else {"set": {"tried": True}}
    cases = [
        {"again": {"when": ".tried == true", "then": "first"}},
        {"default": {"then": "done"}},
    ]
    return definition(
        {"first": {**first, "export": {"as": {"tried": ".output"}}}},
        {"check": {"switch": cases}},
        {"done": {"set": {"ok": True}}},
    )


@pytest.mark.parametrize("with_ask", [False, True])
def test_a_backward_then_is_named_as_a_loop_with_what_to_write_instead(with_ask: bool) -> None:
    conversion = convert_definition(_retry_loop(with_ask=with_ask))
    [blocker] = conversion.blockers
    assert blocker.pointer == "/do/1/check/switch/0/again/then"
    assert blocker.construct == "then (backward jump)"
    assert "jumps back to /do/0/first" in blocker.reason
    assert "`try` with `catch.retry`" in blocker.reason and "start a new run" in blocker.reason
    assert ("cannot hold an `ask`" in blocker.reason) == with_ask
    # The converted text is left as it was: no bound is invented.
    cases = conversion.document["do"][1]["check"]["switch"]
    assert cases[0]["again"]["then"] == "first"


def test_a_backward_jump_in_a_nested_list_and_a_self_jump_are_named_too() -> None:
    inner = [{"a": {"set": {"x": 1}}}, {"b": {"set": {"y": 2}, "then": "a"}}]
    source = definition({"outer": {"do": inner}}, {"again": {"set": {"z": 3}, "then": "again"}})
    pointers = [b.pointer for b in convert_definition(source).blockers]
    assert pointers == ["/do/0/outer/do/1/b/then", "/do/1/again/then"]


def test_an_ask_mode_without_an_equivalent_is_named_once_with_the_modes_there_are() -> None:
    ask = {"prompt": "details?", "mode": "form", "assignment": {"roleId": "clerk"}}
    conversion = convert_definition(definition({"collect": {"ask": ask}}))
    [blocker] = conversion.blockers
    assert (blocker.pointer, blocker.construct) == ("/do/0/collect/ask/mode", "ask.mode")
    assert "`form`" in blocker.reason and "`approval`" in blocker.reason
    assert "`input`" in blocker.reason
    report = check_loaded(FileReport("t"), conversion.document)
    # publication refuses the same construct at the task; the convert report names it once
    [refusal] = report.problems
    assert refusal["pointer"] == "/do/0/collect" and "ask.mode" in refusal["message"]
