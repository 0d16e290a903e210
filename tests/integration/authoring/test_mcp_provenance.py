"""Applying an AI-authored draft through POST /mcp: provenance under
document.metadata.aiAuthoring, the reviewer bound to the authenticated subject, the private-first
rule on every save, the semantic digest without the provenance, and the same gates as a
hand-written definition (seed 001 Phase 3; issue 38 item 4).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from runtime.canonical import definition_digest, load_definition_yaml
from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from tests.support.authoring_model import LOOKUP, SCORE, Reply, StubModel, good_draft
from tests.support.binding_builders import (
    HOST,
    OWNER,
    OWNER_POSITION,
    binding,
    dependency,
    new_id,
    publish_args,
)
from tests.support.execution import serving
from tests.support.invocation import client, ok, publish_tool, publish_version, refused
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Phase 3 AI-Assisted Authoring")

REVIEWER = OWNER  # the definition owner reviews and applies the draft
OUTPUT = {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}}


@pytest.fixture
async def model() -> AsyncIterator[StubModel]:
    """The stub authoring model, served on a free loopback port."""
    async with serving(StubModel()) as running:  # type: ignore[arg-type]
        yield running


async def _draft(
    http: httpx.AsyncClient,
    identity: DevIdentity,
    owner: McpTestClient,
    model: StubModel,
    services: Services,
    *,
    caller_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A validated draft from the two selected Tools, generated for the reviewer."""
    extra = {} if caller_policy is None else {"callerPolicy": caller_policy}
    lookup = await publish_tool(owner, toolName=LOOKUP, outputSchema=OUTPUT, **extra)
    score = await publish_tool(owner, toolName=SCORE)
    services.settings.authoring = model.settings()
    model.answer(Reply(draft=good_draft()))
    author = client(http, identity, REVIEWER, roles=("workflow-admin", "claims-author"))
    args = {"hostId": HOST, "intent": "score a claim", "toolIds": [lookup.tool_id, score.tool_id]}
    return ok(await author.call_tool("workflow_definition_draft", args))


def applied(draft: dict[str, Any], reviewer: str = REVIEWER, **changes: Any) -> dict[str, Any]:
    """The reviewed draft's document with its provenance recorded, as the Portal applies it."""
    document = load_definition_yaml(draft["definition"])
    provenance = copy.deepcopy(draft["provenance"]) | {"reviewerUserId": reviewer} | changes
    document["document"]["metadata"] = {"aiAuthoring": provenance}
    return document


def _save_args(
    document: dict[str, Any],
    *,
    wf_def_id: str | None = None,
    revision: int = 1,
    visible: bool = False,
) -> dict[str, Any]:
    return {
        "hostId": HOST,
        "wfDefId": wf_def_id or new_id(),
        "sourceRevision": revision,
        "actor": "reviewer",
        "namespace": "claims",
        "name": "claim-score",
        "version": "0.1.0",
        "definition": json.dumps(document),
        "lifecycleStatus": "DRAFT",
        "catalogVisible": visible,
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "active": True,
    }


async def test_a_saved_draft_is_private_binds_the_reviewer_and_keeps_the_reviewed_digest(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    model: StubModel,
    services: Services,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    draft = await _draft(http, dev_identity, owner, model, services)
    document = applied(draft)
    args = _save_args(document)
    receipt = ok(await owner.call_tool("workflow_definition_save", args))
    # The semantic digest leaves the provenance out: it is the digest the reviewer approved.
    assert receipt["definitionDigest"] == draft["definitionDigest"] == definition_digest(document)
    cursor = await admin.execute(
        "SELECT ai_authored, catalog_visible FROM wf_definition_t WHERE wf_def_id = %s",
        (args["wfDefId"],),
    )
    assert await cursor.fetchone() == {"ai_authored": True, "catalog_visible": False}
    # Visible on the first save, or on a later one without the provenance: refused either way.
    visible = await owner.call_tool("workflow_definition_save", _save_args(document, visible=True))
    problems = refused(visible, "WORKFLOW_INPUT_INVALID")["error"]["details"]["problems"]
    assert problems[0]["rule"] == "ai-authored-private-first"
    stripped = copy.deepcopy(document)
    del stripped["document"]["metadata"]
    again = _save_args(stripped, wf_def_id=args["wfDefId"], revision=2, visible=True)
    sticky = refused(
        await owner.call_tool("workflow_definition_save", again), "WORKFLOW_INPUT_INVALID"
    )
    assert sticky["error"]["details"]["problems"][0]["rule"] == "ai-authored-private-first"
    cursor = await admin.execute(
        "SELECT source_revision, catalog_visible FROM wf_definition_t WHERE wf_def_id = %s",
        (args["wfDefId"],),
    )
    assert await cursor.fetchone() == {"source_revision": 1, "catalog_visible": False}


async def test_the_reviewer_is_the_authenticated_subject_never_the_one_the_browser_names(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    model: StubModel,
    services: Services,
) -> None:
    draft = await _draft(http, dev_identity, owner, model, services)
    forged = _save_args(applied(draft, reviewer="someone-else"))
    refused(await owner.call_tool("workflow_definition_save", forged), "WORKFLOW_POLICY_DENIED")
    unknown_field = _save_args(applied(draft, approvedByBrowser=True))
    body = refused(
        await owner.call_tool("workflow_definition_save", unknown_field), "WORKFLOW_INPUT_INVALID"
    )
    assert body["error"]["details"]["problems"][0]["pointer"] == "/document/metadata/aiAuthoring"


async def test_an_edit_after_review_needs_another_review(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    model: StubModel,
    services: Services,
) -> None:
    draft = await _draft(http, dev_identity, owner, model, services)
    edited = applied(draft)
    edited["do"][1]["score"]["with"]["parameters"]["arguments"]["status"] = "${ 'closed' }"
    result = await owner.call_tool("workflow_definition_save", _save_args(edited))
    details = refused(result, "WORKFLOW_DEFINITION_MISMATCH")["error"]["details"]
    assert details["definitionDigest"] == definition_digest(edited) != draft["definitionDigest"]
    # Publish checks the reviewed digest too.
    publish = {
        "hostId": HOST,
        "wfDefId": new_id(),
        "namespace": "claims",
        "name": "claim-score",
        "version": "0.1.0",
        "definition": json.dumps(edited),
        "expectedDefinitionDigest": definition_digest(edited),
        "bindingApproval": "carryOver",
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "operationId": new_id(),
    }
    refused(
        await owner.call_tool("workflow_definition_publish", publish),
        "WORKFLOW_DEFINITION_MISMATCH",
    )


async def test_a_save_fails_closed_on_the_reviewers_catalog_as_it_is_now(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    model: StubModel,
    services: Services,
) -> None:
    draft = await _draft(
        http, dev_identity, owner, model, services, caller_policy={"anyRole": ["claims-author"]}
    )
    # The owner's own token lacks claims-author: the lookup Tool is out of their reach.
    refused(
        await owner.call_tool("workflow_definition_save", _save_args(applied(draft))),
        "WORKFLOW_POLICY_DENIED",
    )
    reviewer = client(http, dev_identity, REVIEWER, roles=("workflow-admin", "claims-author"))
    sources = copy.deepcopy(draft["provenance"]["sourceSchemas"])
    sources[0]["schemaDigest"] = "sha256:" + "0" * 64
    changed = _save_args(applied(draft, sourceSchemas=sources))
    refused(
        await reviewer.call_tool("workflow_definition_save", changed),
        "WORKFLOW_DEFINITION_MISMATCH",
    )
    sources[0]["toolId"] = new_id()
    gone = _save_args(applied(draft, sourceSchemas=sources))
    refused(await reviewer.call_tool("workflow_definition_save", gone), "WORKFLOW_NOT_FOUND")
    ok(await reviewer.call_tool("workflow_definition_save", _save_args(applied(draft))))


async def test_the_same_definition_by_hand_and_by_the_generator_meets_the_same_gates(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    model: StubModel,
    services: Services,
) -> None:
    draft = await _draft(http, dev_identity, owner, model, services)
    generated = applied(draft)
    manual = copy.deepcopy(generated)
    del manual["document"]["metadata"]
    outcomes = []
    for document in (manual, generated):
        text = json.dumps(document)
        wf_def_id = new_id()
        ok(
            await owner.call_tool(
                "workflow_definition_save", _save_args(document, wf_def_id=wf_def_id)
            )
        )
        await publish_version(owner, wf_def_id, text, "0.1.0")
        value = binding(wf_def_id, new_id(), text, version="0.1.0", toolName="claims.scored")
        reach = [dependency(LOOKUP), dependency(SCORE)]
        # A gate both must fail: no dependency for the Tools the definition calls.
        missing = await owner.call_tool("workflow_binding_publish", publish_args(value, 0))
        too_long = value | {"syncWaitMs": 25000}
        slow = await owner.call_tool(
            "workflow_binding_publish", publish_args(too_long, 0, dependencies=reach)
        )
        good = await owner.call_tool(
            "workflow_binding_publish", publish_args(value, 0, dependencies=reach)
        )
        outcomes.append((_verdict(missing), _verdict(slow), _verdict(good)))
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][2] == ("ok", "active")
    assert outcomes[0][0][0] != "ok" and outcomes[0][1][0] != "ok"


def _verdict(result: dict[str, Any]) -> tuple[str, Any]:
    """What a gate said, without ids: ok and the status, or the code and the problem rules."""
    if not result["isError"]:
        return "ok", result["structuredContent"]["status"]
    error = result["structuredContent"]["error"]
    details = error.get("details") or {}
    evidence = details.get("requestValidation") or details
    rules = sorted(
        str(problem.get("rule") or problem.get("code") or problem.get("pointer"))
        for problem in evidence.get("problems", [])
    )
    return error["code"], rules
