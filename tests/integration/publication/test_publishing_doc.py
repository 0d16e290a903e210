"""docs/PUBLISHING.md's worked example, run verbatim through POST /mcp: save to invoke."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.canonical import definition_digest, load_definition_yaml, schema_digest
from runtime.security.devtools import DevIdentity
from tests.support.invocation import ok, refused
from tests.support.mcp import MODERN, McpTestClient
from workflow_mcp.cli import main

DOC = Path(__file__).parents[3] / "docs" / "PUBLISHING.md"
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


_TOKEN_COMMAND = re.compile(r'^(?P<name>\w+)=\$\(make -s token ARGS="(?P<args>[^"]*)"\)$')


def _doc_tokens(identity: DevIdentity, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The doc's `make -s token` commands, run as `workflow-mcp token` with the test's dev key."""
    tokens = {}
    for line in _one("sh", "tokens").splitlines():
        command = _TOKEN_COMMAND.match(line)
        assert command is not None, line
        args = shlex.split(command["args"])
        assert args[:2] == ["--dir", ".data/dev"]  # where `make run` keeps the dev key
        capsys.readouterr()
        assert main(["token", "--dir", str(identity.paths.directory), *args[2:]]) == 0
        tokens[command["name"]] = capsys.readouterr().out.strip()
    return tokens


def _client(http: httpx.AsyncClient, user: str, app: str) -> McpTestClient:
    headers = {"Authorization": f"Bearer {user}", "X-Scope-Token": f"Bearer {app}"}
    return McpTestClient(http, MODERN, headers)


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
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: object,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls = _tool_calls()
    assert [name for name, _ in calls] == [
        "workflow_definition_save",
        "workflow_definition_publish",
        "workflow_binding_publish",
        "workflow_invoke",
    ]
    tokens = _doc_tokens(dev_identity, capsys)
    assert sorted(tokens) == ["APP", "BOB", "OWNER"]
    owner = _client(http, tokens["OWNER"], tokens["APP"])
    user = _client(http, tokens["BOB"], tokens["APP"])
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
