"""workflow_invoke through POST /mcp: output, stored failures and admission refusals."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.execution import close_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.security import Keyring
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.invocation import (
    FAILING_TASK,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
    revoke_args,
    running_executor,
    until_settled,
)
from tests.support.mcp import McpTestClient, asgi_client
from tests.support.publication_builders import OTHER_HOST

pytestmark = pytest.mark.requirement("000:Workflow Invoke")


async def test_a_call_runs_the_pinned_version_and_returns_its_output(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner)
    body = ok(await caller.call_tool("workflow_invoke", invoke_args(tool)))
    assert body["status"] == "completed"
    assert body["definitionDigest"] == tool.definition_digest
    assert body["output"]["marker"] == 1


async def test_a_failed_task_returns_task_failed_with_the_stored_message_on_the_first_call(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner, text=definition_yaml(extra_task=FAILING_TASK))
    result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert body["status"] == "failed"
    assert body["error"]["afterEffect"] is False
    # The message the run stored for its failed task, on the first answer and in the text.
    message = "task /do/1/boom failed with a custom error (status 500)"
    assert body["error"]["message"] == message
    assert result["content"][0]["text"] == f"WORKFLOW_TASK_FAILED: {message}"
    status = ok(
        await caller.call_tool(
            "workflow_get_status", {"workflowInstanceId": body["workflowInstanceId"]}
        )
    )
    assert status["state"] == "FAILED"
    assert status["error"] == body["error"]


async def test_a_call_with_a_parent_action_is_refused_and_never_becomes_a_root_start(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool = await publish_tool(owner)
    args = invoke_args(tool, parentActionId=new_id())
    body = refused(await caller.call_tool("workflow_invoke", args), "WORKFLOW_POLICY_DENIED")
    assert "nested workflow-backed Tool calls" in body["error"]["message"]
    assert await _runs(services) == 0


async def test_a_stale_binding_digest_is_a_mismatch_and_a_missing_one_is_named_as_required(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    tool = await publish_tool(owner)
    stale = invoke_args(tool, expectedBindingDigest="sha256:" + "0" * 64)
    refused(await caller.call_tool("workflow_invoke", stale), "WORKFLOW_DEFINITION_MISMATCH")
    missing = invoke_args(tool)
    del missing["expectedBindingDigest"]
    body = refused(await caller.call_tool("workflow_invoke", missing), "WORKFLOW_START_REJECTED")
    assert "expectedBindingDigest is required" in body["error"]["message"]
    assert "republish" not in body["error"]["message"]
    other = invoke_args(tool, expectedDefinitionDigest="sha256:" + "1" * 64)
    refused(await caller.call_tool("workflow_invoke", other), "WORKFLOW_DEFINITION_MISMATCH")


async def test_a_retired_definition_version_refuses_new_runs(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool = await publish_tool(owner)
    # Publication refuses to retire a version an active revision pins; the status row is
    # moved directly to prove admission checks the version itself, not only the binding.
    async with services.database.transaction() as conn:
        await conn.execute(
            "UPDATE wf_definition_version_t SET status = 'retired', retired_ts = now()"
            " WHERE host_id = %(h)s AND wf_def_id = %(w)s",
            {"h": HOST, "w": tool.wf_def_id},
        )
    result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    refused(result, "WORKFLOW_DEFINITION_RETIRED")


@pytest.mark.requirement("000:QC-16")
async def test_a_version_retired_after_a_call_refuses_the_next_call_admitted_from_the_cache(
    owner: McpTestClient, caller: McpTestClient, services: Services, workers: object
) -> None:
    tool = await publish_tool(owner)
    ok(await caller.call_tool("workflow_invoke", invoke_args(tool)))
    # The revision is now cached: the next call is judged by admission's statement, which
    # must check the pinned version's status itself (the cache cannot know it changed).
    async with services.database.transaction() as conn:
        await conn.execute(
            "UPDATE wf_definition_version_t SET status = 'retired', retired_ts = now()"
            " WHERE host_id = %(h)s AND wf_def_id = %(w)s",
            {"h": HOST, "w": tool.wf_def_id},
        )
    result = await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-2"}))
    refused(result, "WORKFLOW_DEFINITION_RETIRED")


async def test_a_revoked_revision_is_refused_on_the_next_call(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner)
    ok(await caller.call_tool("workflow_invoke", invoke_args(tool)))
    revoke = revoke_args(tool)
    ok(await owner.call_tool("workflow_binding_revoke", revoke))
    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_POLICY_DENIED"
    )
    assert body["error"]["message"] == "binding revoked by workflow owner"


async def test_a_user_outside_the_caller_policy_cannot_call_and_one_inside_can(
    owner: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    workers: object,
) -> None:
    policy = {
        "requireAnyOf": [
            {"claim": "role", "value": "claims-agent"},
            {"claim": "position", "value": "claims-desk"},
        ]
    }
    tool = await publish_tool(owner, callerPolicy=policy)
    outsider = client(http, dev_identity, "u-out", roles=("genai-admin",))
    agent = client(http, dev_identity, "u-agent", roles=("genai-admin", "claims-agent"))
    desk = client(http, dev_identity, "u-desk", roles=(), positions=("claims-desk",))
    refused(
        await outsider.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_POLICY_DENIED"
    )
    ok(await agent.call_tool("workflow_invoke", invoke_args(tool)))
    ok(await desk.call_tool("workflow_invoke", invoke_args(tool)))
    await _close(services)


async def test_a_caller_policy_in_the_seeds_any_role_shape_admits_only_a_holder_of_a_role(
    owner: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    workers: object,
) -> None:
    # Seed 000 Authorization: "for example {"anyRole": ["claims-agent", "genai-admin"]}".
    tool = await publish_tool(owner, callerPolicy={"anyRole": ["claims-agent", "genai-admin"]})
    outsider = client(http, dev_identity, "u-out", roles=("workflow-admin",))
    agent = client(http, dev_identity, "u-agent", roles=("claims-agent",))
    refused(
        await outsider.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_POLICY_DENIED"
    )
    ok(await agent.call_tool("workflow_invoke", invoke_args(tool)))
    await _close(services)


async def test_invoke_is_rejected_when_no_sealing_key_is_configured(
    owner: McpTestClient, services: Services, dev_identity: DevIdentity
) -> None:
    tool = await publish_tool(owner)
    app = create_app()
    attach_services(app, dataclasses.replace(services, keyring=Keyring.empty()), HANDLERS)
    async with asgi_client(app) as http:
        keyless = client(http, dev_identity)
        body = refused(
            await keyless.call_tool("workflow_invoke", invoke_args(tool)),
            "WORKFLOW_START_REJECTED",
        )
    assert "sealing key" in body["error"]["message"]
    assert await _runs(services) == 0


async def test_input_outside_the_tool_schema_is_refused_before_a_run_exists(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    schema = {
        "type": "object",
        "required": ["claimId"],
        "properties": {"claimId": {"type": "string", "pattern": "^C-[0-9]+$"}},
    }
    tool = await publish_tool(owner, inputSchema=schema)
    bad = invoke_args(tool, {"claimId": "secret-value"})
    body = refused(await caller.call_tool("workflow_invoke", bad), "WORKFLOW_INPUT_INVALID")
    assert "secret-value" not in str(body)
    assert await _runs(services) == 0


async def test_an_explicit_key_tool_needs_an_idempotency_key(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    tool = await publish_tool(owner, idempotencyPolicy={"kind": "explicit", "resultReplayMs": 0})
    refused(await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_INPUT_INVALID")


async def test_a_tool_of_another_host_reads_exactly_like_an_unknown_tool(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    tool = await publish_tool(owner)
    stranger = client(http, dev_identity, "u-other", host_id=OTHER_HOST)
    theirs = refused(
        await stranger.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_NOT_FOUND"
    )
    unknown = dataclasses.replace(tool, tool_id=new_id())
    nobody = refused(
        await stranger.call_tool("workflow_invoke", invoke_args(unknown)), "WORKFLOW_NOT_FOUND"
    )
    assert theirs["error"]["message"] == nobody["error"]["message"]


async def test_the_sealed_token_is_stored_without_plaintext_and_gone_after_the_run_ends(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    dev_identity: DevIdentity,
) -> None:
    # A replay window: the retry may arrive after the run ended and must still name it.
    replaying = {"kind": "derived", "resultReplayMs": 600000}
    tool = await publish_tool(owner, syncWaitMs=100, idempotencyPolicy=replaying)
    pending = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_TIMEOUT"
    )
    instance = pending["workflowInstanceId"]
    stored = await _credential(services, instance)
    assert stored is not None
    token = caller.auth["Authorization"].removeprefix("Bearer ").encode()
    assert token not in bytes(stored["ciphertext"])
    async with running_executor(services):
        done = ok(
            await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
        )
    assert done["workflowInstanceId"] == instance
    assert await _credential(services, instance) is None


async def _runs(services: Services) -> int:
    async with services.database.transaction() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM workflow_process")
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


async def _credential(services: Services, instance: str) -> dict[str, Any] | None:
    async with services.database.transaction() as conn:
        cursor = await conn.execute(
            "SELECT ciphertext FROM workflow_run_credential WHERE process_id = %(p)s",
            {"p": instance},
        )
        row: dict[str, Any] | None = await cursor.fetchone()
    return row


async def _close(services: Services) -> None:
    await close_waiter(services.database)
