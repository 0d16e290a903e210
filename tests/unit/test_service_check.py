"""`workflow-mcp check`: every definition the suite uses, the reference sample, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.engine.check import MAX_WARNINGS
from tests.support.binding_builders import (
    binding,
    definition_yaml,
    dependency,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.checker import decision_yaml, many_optional_reads_yaml, optional_read_yaml
from tests.support.compensation import order_tasks
from tests.support.engine import FIXTURES
from tests.support.human_tasks import approval_yaml
from tests.support.publication import SIMPLE_DEFINITION, definition_text
from tests.support.published_workflow import two_calls_yaml
from tests.support.shared import REFERENCE_DEFINITION, requires_shared, shared_path
from workflow_mcp.cli import main

# Data-flow warnings each conformance scenario is expected to carry (none has a problem);
# the parser's own notes (bare-leaf rewrites, reads of outside data) come as definition.warning.
EXPECTED_DATA_WARNINGS = {"s13": {"data.field-maybe-absent"}}  # colors is not required


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["check", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_conformance_fixture_has_no_problem_and_only_its_expected_data_warnings(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, body = run(capsys, str(path))
    [report] = body["files"]
    assert (code, report["problems"]) == (0, [])
    codes = {w["code"] for w in report["warnings"]} - {"definition.warning"}
    assert codes == EXPECTED_DATA_WARNINGS.get(path.stem, set())
    assert report["definitionDigest"].startswith("sha256:")
    assert report["schemaDigest"].startswith("sha256:")


def _builder_definitions() -> dict[str, str]:
    return {
        "simple": SIMPLE_DEFINITION,
        "marker": definition_text(3),
        "two-calls": two_calls_yaml(),
        "plain": definition_yaml(),
        "write": definition_yaml(write=True),
        "write-no-evidence": definition_yaml(write=True, evidence=False),
        "fork": definition_yaml(fork_width=3),
        "mcp": definition_yaml(mcp_tool="accounts.lookup"),
        "decision-fixed": decision_yaml("workflow.input.applicantId"),
        "optional-read": optional_read_yaml(),
    }


def test_every_definition_the_test_builders_make_has_no_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [write(tmp_path, f"{name}.yaml", text) for name, text in _builder_definitions().items()]
    code, body = run(capsys, *files)
    assert code == 0
    assert [(r["path"], r["problems"]) for r in body["files"]] == [(f, []) for f in files]


@requires_shared(REFERENCE_DEFINITION)
def test_the_reference_sample_has_no_problem_and_its_bare_leaves_are_warnings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, body = run(capsys, str(shared_path(REFERENCE_DEFINITION)))
    [report] = body["files"]
    assert (code, report["problems"]) == (0, [])
    assert {w["code"] for w in report["warnings"]} == {"definition.warning"}
    assert all("bare leaf" in w["message"] for w in report["warnings"])


def test_a_clean_definition_exits_0_and_prints_digests_and_analysis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "write.yaml", definition_yaml(write=True, fork_width=2))
    assert main(["check", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: ok\n  definitionDigest sha256:")
    assert "write task /do/1/save (http POST): sha256:eeee" in out
    assert "http /do/1/save: POST https://api.example.com/claims needs an endpoint target" in out
    assert "max fork width 2" in out


def test_warnings_exit_0_but_1_with_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "optional.yaml", optional_read_yaml())
    assert main(["check", path]) == 0
    assert "warning /do/0/greet [data.field-maybe-absent]" in capsys.readouterr().out
    assert main(["check", "--strict", path]) == 1


def test_check_lists_at_most_the_receipt_cap_of_warnings_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "many.yaml", many_optional_reads_yaml(MAX_WARNINGS + 30, 3_000))
    code, body = run(capsys, path)
    assert code == 0
    [report] = body["files"]
    assert len(report["warnings"]) == MAX_WARNINGS
    assert report["warningsLeftOut"] == 30
    assert all(len(w["message"]) < 400 for w in report["warnings"])
    assert "…" in report["warnings"][0]["message"]
    assert main(["check", path]) == 0
    assert "and 30 more warning(s) left out" in capsys.readouterr().out


def test_a_proved_data_bug_exits_2_naming_task_field_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path, "good.yaml", definition_text(1))
    bad = write(tmp_path, "bad.yaml", decision_yaml(".applicantId"))
    code, body = run(capsys, good, bad)
    assert code == 2
    assert body["exitCode"] == 2
    assert body["files"][0]["problems"] == []
    [problem] = body["files"][1]["problems"]
    assert (problem["pointer"], problem["rule"]) == ("/do/1/finish", "data.field-absent")
    assert "workflow.input.applicantId" in problem["message"]


def test_a_definition_publication_refuses_exits_2_with_the_task_pointer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "bad.yaml", definition_text(3).replace("marker: 3", "marker: ${ .a + }"))
    assert main(["check", path]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: invalid")
    assert "error /do/0/first" in out
    assert "CEL syntax error" in out


def test_text_that_is_not_a_definition_and_a_missing_file_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = write(tmp_path, "broken.yaml", "document: [\n")
    code, body = run(capsys, broken, str(tmp_path / "absent.yaml"))
    assert code == 2
    assert [p["rule"] for r in body["files"] for p in r["problems"]] == [
        "invalid-yaml",
        "unreadable",
    ]


def _binding_file(tmp_path: Path, text: str, **kw: Any) -> str:
    wf_def_id, tool_id = new_id(), new_id()
    maker = write_binding if kw.pop("write", False) else binding
    arguments = publish_args(maker(wf_def_id, tool_id, text), 0, **kw)
    return write(tmp_path, "binding.yaml", yaml.safe_dump(arguments))


def test_a_binding_that_fits_the_definition_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = definition_yaml(write=True)
    payload = _binding_file(tmp_path, text, write=True, endpoint_targets=[endpoint_target()])
    code, body = run(capsys, write(tmp_path, "d.yaml", text), "--binding", payload)
    assert body["files"][0]["binding"]["problems"] == []
    assert code == 0


def test_a_binding_that_misses_an_endpoint_target_or_reaches_a_write_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = definition_yaml(write=True)
    payload = _binding_file(tmp_path, text)  # read-only Tool, no endpoint targets
    code, body = run(capsys, write(tmp_path, "d.yaml", text), "--binding", payload)
    assert code == 2
    problems = body["files"][0]["binding"]["problems"]
    # The publish rules, in the order a refusal lists them: the uncovered call blocks first.
    assert [(p["pointer"], p["rule"]) for p in problems] == [
        ("/endpointTargets", "endpoint-coverage"),
        ("/binding/toolAnnotations/readOnly", "effect-matrix"),
    ]
    assert "/do/1/save" in problems[0]["message"]


def test_a_binding_for_another_definition_or_too_small_bounds_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = definition_yaml(fork_width=3, mcp_tool="accounts.lookup")
    arguments = publish_args(
        binding(new_id(), new_id(), definition_yaml(marker=9)), 0, dependencies=[dependency()]
    )
    arguments["binding"]["runtimeBounds"]["maximumParallelism"] = 2
    payload = write(tmp_path, "binding.yaml", yaml.safe_dump(arguments))
    code, body = run(capsys, write(tmp_path, "d.yaml", text), "--binding", payload)
    assert code == 2
    rules = [p["rule"] for p in body["files"][0]["binding"]["problems"]]
    assert rules == ["digest", "static-fit"]


def _destination_problems(body: dict[str, Any]) -> list[dict[str, str]]:
    problems = body["files"][0]["binding"]["problems"]
    return [p for p in problems if p["rule"] == "destination"]


def test_a_binding_whose_targets_the_destination_policy_refuses_exits_2_naming_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORKFLOW_CONFIG", raising=False)
    text = definition_yaml(write=True)
    targets = [
        endpoint_target(uri="http://api.example.com/claims"),
        endpoint_target(ref="decimal-loopback", uri="https://2130706433/claims"),
    ]
    payload = _binding_file(tmp_path, text, write=True, endpoint_targets=targets)
    code, body = run(capsys, write(tmp_path, "d.yaml", text), "--binding", payload)
    assert code == 2
    refused = _destination_problems(body)
    assert [p["pointer"] for p in refused] == [
        "/endpointTargets/0/endpointUri",
        "/endpointTargets/1/endpointUri",
    ]
    assert "publication.destinations.allowed_schemes" in refused[0]["message"]
    assert "publication.destinations.allowed_networks" in refused[1]["message"]


def test_check_applies_the_destination_policy_of_its_config_and_lists_unresolved_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        tmp_path,
        "workflow.yaml",
        yaml.safe_dump({"publication": {"destinations": {"allowed_schemes": ["http", "https"]}}}),
    )
    text = definition_yaml(write=True)
    targets = [endpoint_target(), endpoint_target(ref="plain", uri="http://api.example.com/x")]
    payload = _binding_file(tmp_path, text, write=True, endpoint_targets=targets)
    definition = write(tmp_path, "d.yaml", text)
    code, body = run(capsys, "--config", config, definition, "--binding", payload)
    assert _destination_problems(body) == []
    assert body["files"][0]["binding"]["unresolvedNames"] == ["api.example.com"]
    assert main(["check", "--config", config, definition, "--binding", payload]) == code
    assert "names not resolved offline (api.example.com)" in capsys.readouterr().out


def test_check_takes_the_destination_policy_from_the_environment_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORKFLOW_CONFIG", raising=False)
    text = definition_yaml(write=True)
    targets = [endpoint_target(uri="http://api.example.com/claims")]
    payload = _binding_file(tmp_path, text, write=True, endpoint_targets=targets)
    definition = write(tmp_path, "d.yaml", text)
    _, body = run(capsys, definition, "--binding", payload)
    assert len(_destination_problems(body)) == 1
    monkeypatch.setenv("WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES", '["http", "https"]')
    _, body = run(capsys, definition, "--binding", payload)
    assert _destination_problems(body) == []


def test_an_unbounded_run_without_a_call_is_not_blamed_on_a_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 40 black-box (e): an ask without a timeout was reported as "a call has no timeout".
    path = write(tmp_path, "open.yaml", approval_yaml())
    code, body = run(capsys, path)
    analysis = body["files"][0]["analysis"]
    assert code == 0
    assert analysis["worstCaseTimeMs"] is None
    assert analysis["unboundedBy"] == ["a human task has no timeout"]
    assert main(["check", path]) == 0
    text = capsys.readouterr().out
    assert "worst-case time unbounded (a human task has no timeout)" in text
    assert "a call has no timeout" not in text
    _, body = run(capsys, write(tmp_path, "bounded.yaml", approval_yaml(timeout="PT2H")))
    assert body["files"][0]["analysis"]["unboundedBy"] == []


def test_check_reports_human_tasks_and_their_worst_case_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "ask.yaml", approval_yaml(timeout="PT2H"))
    code, body = run(capsys, path)
    analysis = body["files"][0]["analysis"]
    assert code == 0
    assert analysis["humanTasks"] == [
        {
            "task": "requestApproval",
            "pointer": "/do/0/requestApproval",
            "assignment": {"roleId": "approver", "categoryCode": "approval"},
            "values": ["APPROVED", "REJECTED"],
            "timeoutMs": 7_200_000,
            "onTimeout": "default",
        }
    ]
    assert analysis["worstCaseHumanWaitMs"] == 7_200_000
    # Without a timeout only the run's deadline ends the wait.
    code, body = run(capsys, write(tmp_path, "open.yaml", approval_yaml()))
    assert body["files"][0]["analysis"]["worstCaseHumanWaitMs"] is None
    assert main(["check", path]) == 0
    text = capsys.readouterr().out
    assert "human task /do/0/requestApproval: asks roleId approver" in text
    assert "worst-case wait for people: 7200000 ms" in text


def test_each_write_without_compensate_in_a_multi_write_workflow_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = {"document": {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}}
    order = order_tasks("https://shop.example.com")
    path = write(tmp_path, "order.yaml", yaml.safe_dump({**doc, "do": order}))
    code, out = run(capsys, "--strict", path)
    flagged = [w for w in out["files"][0]["warnings"] if w["code"] == "uncompensated-write"]
    # ship alone has no compensate; release and refund are the undo, not writes to undo.
    assert [w["pointer"] for w in flagged] == ["/do/2/ship"]
    assert "ship" in flagged[0]["message"] and code == 1
    # One write alone is not flagged: nothing earlier would be left in place by its failure.
    single = write(tmp_path, "single.yaml", yaml.safe_dump({**doc, "do": order[2:]}))
    code, out = run(capsys, single)
    assert not [w for w in out["files"][0]["warnings"] if w["code"] == "uncompensated-write"]
