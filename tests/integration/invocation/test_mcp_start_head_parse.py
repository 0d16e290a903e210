"""workflow_start parses a saved head once per definition digest, not once per start."""

from __future__ import annotations

import pytest

from runtime.admission import start
from runtime.engine import parse_definition
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient


async def test_starts_of_one_head_parse_it_once_and_an_edited_head_again(
    owner: McpTestClient, caller: McpTestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[object] = []

    def counting(document: dict[str, object]) -> object:
        parsed.append(document)
        return parse_definition(document)

    monkeypatch.setattr(start, "parse_definition", counting)
    monkeypatch.setattr(start, "_HEADS", {})
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    for claim in ("C-1", "C-2", "C-3"):
        ok(
            await caller.call_tool(
                "workflow_start", {"wfDefId": wf_def_id, "input": {"claimId": claim}}
            )
        )
    assert len(parsed) == 1
    # An edited head has another digest: it is parsed (and run) as edited.
    await save_head(owner, wf_def_id, definition_yaml(marker=2), revision=2)
    ok(
        await caller.call_tool(
            "workflow_start", {"wfDefId": wf_def_id, "input": {"claimId": "C-4"}}
        )
    )
    assert len(parsed) == 2
