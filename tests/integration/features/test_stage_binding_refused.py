"""A development-feature stage definition never backs a Tool (issue 36, seed 004 F5): binding
publish refuses a revision pinning one, so workflow_invoke cannot bypass the stage claim."""

from __future__ import annotations

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import binding, definition_yaml, new_id, publish_args
from tests.support.binding_mcp import actors_of, publish, publish_definition_text, refused

STAGE_METADATA = '  version: "1.2.0"\n  metadata:\n    devflowStage: implement-phase\n'


@pytest.mark.requirement("004:F5")
async def test_a_binding_pinning_a_stage_definition_is_refused(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    actors = actors_of(http, dev_identity)
    text = definition_yaml().replace('  version: "1.2.0"\n', STAGE_METADATA, 1)
    assert "devflowStage" in text
    wf_def_id = await publish_definition_text(actors.owner, text)
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    problems = [(p["pointer"], p["rule"]) for p in error["details"]["problems"]]
    assert problems == [("/document/metadata/devflowStage", "stage-definition")]
    assert "workflow_feature_stage_start" in error["message"]
