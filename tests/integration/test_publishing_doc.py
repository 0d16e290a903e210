"""docs/PUBLISHING.md's worked example, run verbatim through POST /mcp: save to invoke."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.canonical import definition_digest, load_definition_yaml, schema_digest
from runtime.security.devtools import DevIdentity
from tests.support.invocation import client, ok, refused, workers

__all__ = ["workers"]

DOC = Path(__file__).parents[2] / "docs" / "PUBLISHING.md"
_FENCE = re.compile(r"^```(?P<lang>\w+)(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)


def _blocks() -> list[tuple[str, str, str]]:
    """Every fenced block of the doc as (language, info string, body), in order."""
    return [
        (m["lang"], m["info"].strip(), m["body"]) for m in _FENCE.finditer(DOC.read_text("utf-8"))
    ]


def _tool_calls() -> list[tuple[str, dict[str, Any]]]:
    return [
        (info.removeprefix("tool="), json.loads(body))
        for lang, info, body in _blocks()
        if lang == "json" and info.startswith("tool=")
    ]


def _one(lang: str, info: str) -> str:
    [body] = [
        b for block_lang, block_info, b in _blocks() if (block_lang, block_info) == (lang, info)
    ]
    return body


def test_the_example_definition_and_its_digests_are_what_the_doc_says() -> None:
    text = _one("yaml", "file=quick-decision.yaml")
    calls = dict(_tool_calls())
    digest = definition_digest(text)
    assert calls["workflow_definition_save"]["definition"] == text
    assert calls["workflow_definition_publish"]["definition"] == text
    assert calls["workflow_definition_publish"]["expectedDefinitionDigest"] == digest
    assert calls["workflow_binding_publish"]["binding"]["definitionDigest"] == digest
    assert calls["workflow_binding_publish"]["binding"]["schemaDigest"] == schema_digest(
        load_definition_yaml(text)
    )
    prose = DOC.read_text("utf-8")
    assert digest in prose and schema_digest(load_definition_yaml(text)) in prose


@pytest.mark.requirement("000:Binding publish")
async def test_the_worked_example_runs_verbatim_from_save_to_invoke(
    http: httpx.AsyncClient, dev_identity: DevIdentity, workers: object
) -> None:
    calls = _tool_calls()
    assert [name for name, _ in calls] == [
        "workflow_definition_save",
        "workflow_definition_publish",
        "workflow_binding_publish",
        "workflow_invoke",
    ]
    host = calls[0][1]["hostId"]
    owner = client(http, dev_identity, calls[0][1]["owner"]["userId"], host_id=host)
    user = client(http, dev_identity, "bob", host_id=host)
    receipts = {}
    for name, arguments in calls[:3]:
        receipts[name] = ok(await owner.call_tool(name, arguments))
    binding = receipts["workflow_binding_publish"]
    assert binding["status"] == "active"
    invoke = calls[3][1]
    assert invoke["expectedBindingDigest"] == binding["bindingDigest"]
    result = ok(await user.call_tool("workflow_invoke", invoke))
    assert result["output"] == json.loads(_one("json", "output=workflow_invoke"))
    missing = {**invoke, "input": {"applicantId": "A-1"}}
    error = refused(await user.call_tool("workflow_invoke", missing), "WORKFLOW_INPUT_INVALID")
    sentence = f"WORKFLOW_INPUT_INVALID: {error['error']['message']}"
    assert f"`{sentence}`" in " ".join(DOC.read_text("utf-8").split())
