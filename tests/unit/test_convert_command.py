"""`workflow-mcp convert`: what a Tool over the result still needs, and --evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.composition.check import EXIT_CLEAN, EXIT_ERRORS
from runtime.composition.convert_command import run_convert

pytestmark = pytest.mark.requirement("issue-23:convert")

DIGEST = "sha256:" + "ab" * 32
FLOW = """\
document: {dsl: "1.0.3", namespace: t, name: risk, version: "1.0.0"}
input:
  schema:
    format: json
    document: {type: object, properties: {applicantId: {type: string}}}
do:
  - lookup:
      call: http
      with: {method: GET, endpoint: {uri: "http://127.0.0.1:18080/risk/{id}"}}
      input: {from: '${ {"id": workflow.input.applicantId} }'}
  - evaluateRisk:
      call: http
      with:
        method: POST
        endpoint: {uri: "http://127.0.0.1:18080/risk/evaluate"}
        body: {applicantId: "${ .applicantId }"}
      export: {as: {risk: .output}}
"""


def _file(tmp_path: Path) -> str:
    path = tmp_path / "risk.yaml"
    path.write_text(FLOW, encoding="utf-8")
    return str(path)


def _json(files: list[str], **options: Any) -> tuple[int, dict[str, Any]]:
    code, text = run_convert(files, output_format="json", version=None, **options)
    return code, json.loads(text)


def test_the_report_says_a_write_needs_review_evidence_and_each_call_an_endpoint_target(
    tmp_path: Path,
) -> None:
    code, body = _json([_file(tmp_path)], out=None)
    assert code == EXIT_CLEAN
    needs = [(n["pointer"], n["need"]) for n in body["files"][0]["toolNeeds"]]
    assert needs == [
        ("/do/1/evaluateRisk", "review evidence"),
        ("/do/0/lookup", "endpoint target"),
        ("/do/1/evaluateRisk", "endpoint target"),
    ]
    [evidence] = [n for n in body["files"][0]["toolNeeds"] if n["need"] == "review evidence"]
    assert "metadata.approvalEvidenceDigest" in evidence["message"]
    assert "--evidence evaluateRisk=sha256:" in evidence["message"]
    code, text = run_convert([_file(tmp_path)], out=None, output_format="text", version=None)
    assert "needs /do/1/evaluateRisk (review evidence): it writes (http POST)" in text


def test_evidence_is_recorded_on_the_named_write_task_and_converting_again_is_a_no_op(
    tmp_path: Path,
) -> None:
    out = tmp_path / "converted"
    code, body = _json([_file(tmp_path)], out=str(out), evidence=[f"evaluateRisk={DIGEST}"])
    assert code == EXIT_CLEAN
    [report] = body["files"]
    pointer = "/do/1/evaluateRisk/metadata/approvalEvidenceDigest"
    assert {"pointer": pointer, "before": None, "after": DIGEST} in report["changes"]
    assert [n["need"] for n in report["toolNeeds"]] == ["endpoint target", "endpoint target"]
    written = yaml.safe_load((out / "risk.yaml").read_text(encoding="utf-8"))
    assert written["do"][1]["evaluateRisk"]["metadata"] == {"approvalEvidenceDigest": DIGEST}
    again = str(out / "risk.yaml")
    code, body = _json([again], out=None, evidence=[f"/do/1/evaluateRisk={DIGEST}"])
    assert code == EXIT_CLEAN and body["files"][0]["changes"] == []


def test_evidence_for_no_write_task_or_not_a_digest_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "converted"
    source = _file(tmp_path)
    for value, said in (
        (f"lookup={DIGEST}", "--evidence names lookup, which is no write task"),
        (f"evalRisk={DIGEST}", "--evidence names evalRisk, which is no write task"),
        ("evaluateRisk=sha256:12", "is not sha256:<64 lower-case hex digits>"),
        ("evaluateRisk", "expected TASK=sha256:<64 hex digits>"),
    ):
        code, text = run_convert(
            [source], out=str(out), output_format="text", version=None, evidence=[value]
        )
        assert code == EXIT_ERRORS and said in text, text
        assert not out.exists()


def test_a_construct_named_as_not_convertible_is_not_repeated_as_still_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text(
        """\
document: {dsl: "1.0.3", namespace: t, name: loop, version: "1.0.0"}
do:
  - first:
      set: {tried: true}
  - check:
      switch:
        - again: {when: ".tried == true", then: first}
        - default: {then: end}
  - collect:
      ask: {prompt: "details?", mode: form, assignment: {userId: "${ .requester }"}}
""",
        encoding="utf-8",
    )
    code, body = _json([str(path)], out=None)
    [report] = body["files"]
    assert code == EXIT_ERRORS
    assert [(b["pointer"], b["construct"]) for b in report["notConverted"]] == [
        ("/do/2/collect/ask/mode", "ask.mode"),
        ("/do/1/check/switch/0/again/then", "then (backward jump)"),
    ]
    assert report["stillRefused"] == []


def test_a_definition_that_asks_needs_a_start_run_and_the_allowlist_not_a_tools_evidence(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ask.yaml"
    path.write_text(
        FLOW
        + """\
  - approve:
      ask: {prompt: "ok?", mode: approval, assignment: {roleId: admin},
            options: [{label: Yes, value: "YES"}]}
""",
        encoding="utf-8",
    )
    code, body = _json([str(path)], out=None)
    assert code == EXIT_CLEAN
    needs = [(n["pointer"], n["need"]) for n in body["files"][0]["toolNeeds"]]
    assert needs == [
        ("/do/2/approve", "workflow_start"),
        ("/do/0/lookup", "http allowlist"),
        ("/do/1/evaluateRisk", "http allowlist"),
    ]
