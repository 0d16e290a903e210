"""`workflow-mcp draft` and `workflow-mcp check --fixtures` (issue 38), as an operator runs them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.security.devtools import DevIdentity
from tests.support.authoring_model import (
    LOOKUP,
    MODEL,
    MODEL_TOKEN,
    SCORE,
    Reply,
    StubModel,
    good_definition,
    good_draft,
)
from tests.support.binding_builders import HOST
from tests.support.cli import run_command
from tests.support.execution import serving
from tests.support.invocation import publish_tool
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Phase 3 AI-Assisted Authoring")

LOOKUP_OUTPUT = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}},
}
SCORE_OUTPUT = {
    "type": "object",
    "required": ["score"],
    "properties": {"score": {"type": "integer", "minimum": 0}},
}

SCHEMAS = {LOOKUP: LOOKUP_OUTPUT, SCORE: SCORE_OUTPUT}


@pytest.fixture
async def model() -> AsyncIterator[StubModel]:
    """The stub authoring model, served on a free loopback port."""
    async with serving(StubModel()) as running:  # type: ignore[arg-type]
        yield running


async def test_workflow_mcp_draft_prints_a_validated_draft_and_stores_nothing(
    database_url: str, dev_identity: DevIdentity, owner: McpTestClient, model: StubModel
) -> None:
    lookup = await publish_tool(owner, toolName=LOOKUP, outputSchema=LOOKUP_OUTPUT)
    score = await publish_tool(owner, toolName=SCORE, outputSchema=SCORE_OUTPUT)
    model.answer(Reply(draft=good_draft()))
    env = {
        "WORKFLOW_SECURITY_JWKS_FILE": str(dev_identity.paths.jwks),
        "WORKFLOW_AUTHORING_LLM_URL": model.url,
        "WORKFLOW_AUTHORING_LLM_MODEL": MODEL,
        "WORKFLOW_AUTHORING_LLM_BEARER_TOKEN": MODEL_TOKEN,
    }
    args = ["--host", HOST, "--tool", lookup.tool_id, "--tool", score.tool_id]
    code, out, err = await run_command(
        "draft", *args, "--intent", "score a claim", "--database-url", database_url, env=env
    )
    assert code == 0, err
    draft = json.loads(out)
    assert [r["passed"] for r in draft["fixtureResults"]] == [True] * 4
    assert draft["provenance"]["model"] == MODEL and MODEL_TOKEN not in out + err
    # Without the model configured: the typed refusal, nothing sent.
    sent = len(model.received)
    code, out, err = await run_command(
        "draft", *args, "--intent", "score a claim", "--database-url", database_url,
        env={"WORKFLOW_SECURITY_JWKS_FILE": str(dev_identity.paths.jwks)},
    )  # fmt: skip
    assert code == 1 and "WORKFLOW_AUTHORING_UNAVAILABLE" in err
    assert len(model.received) == sent


async def test_check_fixtures_runs_any_definitions_fixtures_against_stub_tools(
    tmp_path: Path,
) -> None:
    definition = tmp_path / "claim-score.yaml"
    definition.write_text(json.dumps(good_definition()))
    draft = good_draft()
    fixtures = [
        {"category": category, **fixture}
        for category, items in draft["fixtures"].items()
        for fixture in items
    ]
    suite = tmp_path / "fixtures.json"
    suite.write_text(json.dumps({"fixtures": fixtures, "toolOutputSchemas": SCHEMAS}))
    code, out, err = await run_command("check", str(definition), "--fixtures", str(suite))
    assert code == 0, out + err
    assert "fixtures 4/4 passed" in out
    # A fixture whose expectation the definition does not meet fails the check.
    fixtures[0]["expect"] = {"output": {"score": 8}}
    suite.write_text(json.dumps({"fixtures": fixtures, "toolOutputSchemas": SCHEMAS}))
    code, out, _ = await run_command("check", str(definition), "--fixtures", str(suite))
    assert code == 1 and "FAIL contract/scores-an-open-claim" in out
    code, out, _ = await run_command(
        "check", str(definition), "--fixtures", str(suite), "--format", "json"
    )
    report = json.loads(out)
    assert code == report["exitCode"] == 1
    [checked] = report["fixtures"]
    assert [result["passed"] for result in checked["results"]] == [False, True, True, True]
