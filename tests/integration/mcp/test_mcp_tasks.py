"""Durable MCP tasks through POST /mcp, revision 2026-07-28's extension (issue 35 item 1).

Raw JSON-RPC; every reply is checked against the extension's JSON schema.
"""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import psycopg
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import new_id
from tests.support.human_tasks import approval_yaml, input_ask_yaml
from tests.support.invocation import client, ok, save_head
from tests.support.mcp import MODERN, McpTestClient, assert_valid_mcp
from tests.support.mcp_tasks import (
    EXTENSION,
    get_task,
    modern,
    start_task,
    task_reaching,
)

pytestmark = pytest.mark.requirement("issue-35:mcp-tasks")

# The starter holds the role "admin": an ask assigned to it is the starter's to answer.
MINE = "admin"
FAILING = (
    "document:\n"
    '  dsl: "1.0.3"\n'
    "  namespace: claims\n"
    "  name: failing-claim\n"
    '  version: "1.0.0"\n'
    "do:\n"
    "  - boom:\n"
    "      raise:\n"
    "        error:\n"
    "          type: https://errors.example.com/boom\n"
    "          status: 500\n"
    "          title: claim lookup failed\n"
)


async def _saved(owner: McpTestClient, text: str) -> str:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    return wf_def_id


async def test_discover_lists_the_tasks_extension(caller: McpTestClient) -> None:
    result = (await modern(caller, "server/discover", {})).result
    assert result["capabilities"]["extensions"] == {EXTENSION: {}}


async def test_a_start_declaring_the_extension_is_a_task_that_asks_the_starter_and_completes(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    wf_def_id = await _saved(owner, approval_yaml(role=MINE))
    created = await start_task(caller, wf_def_id)
    assert created["status"] == "working" and created["taskId"].startswith("tsk_")
    assert created["ttlMs"] > 0 and created["pollIntervalMs"] > 0
    # Durably created: the very next tasks/get resolves.
    assert (await get_task(caller, created["taskId"]))["taskId"] == created["taskId"]
    asked = await task_reaching(caller, created["taskId"], ("input_required",))
    [(key, request)] = asked["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "form"
    assert request["params"]["message"] == "Approve the claim?"
    schema = request["params"]["requestedSchema"]
    assert [o["const"] for o in schema["properties"]["value"]["oneOf"]] == ["APPROVED", "REJECTED"]
    assert schema["required"] == ["value"] and "comment" in schema["properties"]
    # The key is stable across polls.
    again = await get_task(caller, created["taskId"])
    assert list(again["inputRequests"]) == [key]
    update = {"taskId": created["taskId"], "inputResponses": {key: _accept("APPROVED")}}
    reply = await modern(caller, "tasks/update", update)
    assert reply.result["resultType"] == "complete"
    done = await task_reaching(caller, created["taskId"], ("completed",))
    # The CallToolResult as tools/call answers it in this revision, resultType included.
    assert_valid_mcp(MODERN, "CallToolResult", done["result"])
    assert done["result"]["resultType"] == "complete" and done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["output"] == {
        "decision": "APPROVED",
        "by": "caller-1",
    }
    assert done["lastUpdatedAt"] >= done["createdAt"]


def _accept(value: str, **more: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"value": value, **more}}


async def test_an_input_ask_becomes_a_free_text_form_and_a_comment_travels_with_the_answer(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    wf_def_id = await _saved(owner, input_ask_yaml(f"roleId: {MINE}", required=False))
    created = await start_task(caller, wf_def_id)
    asked = await task_reaching(caller, created["taskId"], ("input_required",))
    [(key, request)] = asked["inputRequests"].items()
    schema = request["params"]["requestedSchema"]
    assert schema["properties"]["value"]["maxLength"] == 4096 and "required" not in schema
    responses = {key: _accept("the post was slow", comment="checked")}
    await modern(caller, "tasks/update", {"taskId": created["taskId"], "inputResponses": responses})
    done = await task_reaching(caller, created["taskId"], ("completed",))
    assert done["result"]["structuredContent"]["output"]["reply"] == "the post was slow"


async def test_an_ask_for_someone_else_leaves_the_task_working_and_says_for_whom(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    wf_def_id = await _saved(owner, approval_yaml(role="approver"))
    created = await start_task(caller, wf_def_id)

    async def waiting_message() -> dict[str, Any]:
        return await task_reaching(caller, created["taskId"], ("working",))

    seen = await waiting_message()
    while "waits for" not in seen.get("statusMessage", ""):
        seen = await waiting_message()
    assert seen["statusMessage"] == "The workflow run waits for roleId approver."
    assert "inputRequests" not in seen


async def test_a_tool_level_failure_is_completed_with_is_error(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    created = await start_task(caller, await _saved(owner, FAILING))
    done = await task_reaching(caller, created["taskId"], ("completed", "failed"))
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["structuredContent"]["error"]["code"] == "WORKFLOW_TASK_FAILED"


async def test_cancel_requests_workflow_cancel_and_a_replayed_cancel_is_acknowledged(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    task_id = created["taskId"]
    await task_reaching(caller, task_id, ("input_required",))
    first = await modern(caller, "tasks/cancel", {"taskId": task_id})
    assert first.result["resultType"] == "complete"
    cancelled = await get_task(caller, task_id)
    assert cancelled["status"] == "cancelled"
    assert "result" not in cancelled and "inputRequests" not in cancelled
    replay = await modern(caller, "tasks/cancel", {"taskId": task_id})
    assert replay.result["resultType"] == "complete"
    assert (await get_task(caller, task_id))["status"] == "cancelled"


async def test_without_the_declared_extension_start_is_a_plain_result_and_tasks_are_refused(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = await _saved(owner, approval_yaml(role=MINE))
    arguments = {"wfDefId": wf_def_id, "input": {}}
    plain = await modern(
        caller, "tools/call", {"name": "workflow_start", "arguments": arguments}, capabilities={}
    )
    assert plain.result["resultType"] == "complete" and plain.result["isError"] is False
    created = await start_task(caller, wf_def_id)
    for method, params in (
        ("tasks/get", {"taskId": created["taskId"]}),
        ("tasks/update", {"taskId": created["taskId"], "inputResponses": {}}),
        ("tasks/cancel", {"taskId": created["taskId"]}),
    ):
        refused = await modern(caller, method, params, capabilities={})
        assert refused.error["code"] == -32021
        assert refused.error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert (await get_task(caller, created["taskId"]))["status"] in ("working", "input_required")


async def test_mcp_name_must_carry_the_task_id(owner: McpTestClient, caller: McpTestClient) -> None:
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    reply = await modern(caller, "tasks/get", {"taskId": created["taskId"]}, name="tsk_other")
    assert reply.error["code"] == -32020


NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}


async def test_another_users_another_hosts_and_a_guessed_task_id_are_one_and_the_same_unknown(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    task_id = created["taskId"]
    other_user = client(http, dev_identity, "mallory")
    other_host = client(http, dev_identity, host_id="00000000-0000-4000-8000-0000000000ff")
    same_user_other_client = client(http, dev_identity, user_client_id="other-portal")
    for stranger in (other_user, other_host, same_user_other_client):
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
            ("tasks/cancel", {"taskId": task_id}),
        ):
            assert (await modern(stranger, method, params)).error == NOT_FOUND
    guessed = "tsk_" + "A" * 43
    for guess in (guessed, task_id[:-1] + ("B" if task_id[-1] != "B" else "C"), "x"):
        assert (await modern(caller, "tasks/get", {"taskId": guess})).error == NOT_FOUND
    # Nothing the strangers sent changed the task.
    assert (await get_task(caller, task_id))["status"] != "cancelled"


async def test_an_answer_outside_the_schema_is_refused_and_changes_nothing(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    task_id = created["taskId"]
    asked = await task_reaching(caller, task_id, ("input_required",))
    [key] = asked["inputRequests"]
    for content in ({"value": "MAYBE"}, {"value": 7}, {"value": "APPROVED", "comment": ""}):
        responses = {key: {"action": "accept", "content": content}}
        error = (
            await modern(caller, "tasks/update", {"taskId": task_id, "inputResponses": responses})
        ).error
        assert error["code"] == -32602
        assert error["data"]["error"]["code"] == "WORKFLOW_INPUT_INVALID", error
    declined = {key: {"action": "decline"}, "not-a-key": _accept("APPROVED")}
    await modern(caller, "tasks/update", {"taskId": task_id, "inputResponses": declined})
    still = await get_task(caller, task_id)
    assert still["status"] == "input_required" and list(still["inputRequests"]) == [key]


async def test_update_of_a_finished_task_ignores_unknown_keys_and_refuses_a_different_answer(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    task_id = created["taskId"]
    asked = await task_reaching(caller, task_id, ("input_required",))
    [key] = asked["inputRequests"]
    answer = {"taskId": task_id, "inputResponses": {key: _accept("APPROVED")}}
    await modern(caller, "tasks/update", answer)
    done = await task_reaching(caller, task_id, ("completed",))
    # The same answer again is acknowledged (workflow_task_complete's idempotency).
    assert (await modern(caller, "tasks/update", answer)).result["resultType"] == "complete"
    unknown = {"taskId": task_id, "inputResponses": {new_id(): _accept("REJECTED")}}
    assert (await modern(caller, "tasks/update", unknown)).result["resultType"] == "complete"
    different = {"taskId": task_id, "inputResponses": {key: _accept("REJECTED")}}
    error = (await modern(caller, "tasks/update", different)).error
    assert error["code"] == -32602
    assert error["data"]["error"]["code"] == "WORKFLOW_STATE_CONFLICT"
    assert (await get_task(caller, task_id))["result"] == done["result"]


async def test_an_expired_task_answers_invalid_params(
    owner: McpTestClient, caller: McpTestClient, database_url: str
) -> None:
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE workflow_mcp_task SET expires_ts = now() - interval '1 second' "
            "WHERE task_id = %s",
            (created["taskId"],),
        )
    error = (await modern(caller, "tasks/get", {"taskId": created["taskId"]})).error
    assert error == {"code": -32602, "message": "Failed to retrieve task: Task has expired"}
    update = {"taskId": created["taskId"], "inputResponses": {}}
    assert (await modern(caller, "tasks/update", update)).error["code"] == -32602


async def test_an_ordinary_tools_call_is_unchanged_by_a_declared_extension(
    caller: McpTestClient,
) -> None:
    reply = await modern(caller, "tools/call", {"name": "workflow_task_list", "arguments": {}})
    assert reply.result["resultType"] == "complete"
    assert ok({k: v for k, v in reply.result.items() if k != "resultType"}) == {"tasks": []}


async def test_a_key_of_another_tasks_run_is_ignored_even_when_the_caller_may_answer_it(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    # Two tasks of one caller: an answer sent on the first under the second's key changes
    # nothing; keys are the asks of the task's own run.
    wf_def_id = await _saved(owner, approval_yaml(role=MINE))
    first = await start_task(caller, wf_def_id)
    second = await start_task(caller, wf_def_id)
    await task_reaching(caller, first["taskId"], ("input_required",))
    asked = await task_reaching(caller, second["taskId"], ("input_required",))
    [their_key] = asked["inputRequests"]
    crossed = {"taskId": first["taskId"], "inputResponses": {their_key: _accept("APPROVED")}}
    assert (await modern(caller, "tasks/update", crossed)).result["resultType"] == "complete"
    for task in (first, second):
        assert (await get_task(caller, task["taskId"]))["status"] == "input_required"
    for bad in ([], "x", None):
        refused = await modern(
            caller, "tasks/update", {"taskId": first["taskId"], "inputResponses": bad}
        )
        assert refused.error["code"] == -32602


async def test_a_task_row_that_cannot_be_stored_names_the_run_which_runs_on(
    owner: McpTestClient, caller: McpTestClient, database_url: str
) -> None:
    # A real fault: the runtime role loses INSERT on the task table, after admission's commit.
    wf_def_id = await _saved(owner, approval_yaml(role=MINE))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("REVOKE INSERT ON workflow_mcp_task FROM workflow_runtime")
    arguments = {"wfDefId": wf_def_id, "input": {}}
    reply = await modern(caller, "tools/call", {"name": "workflow_start", "arguments": arguments})
    error = reply.error
    assert error["code"] == -32603
    instance = error["data"]["workflowInstanceId"]
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] in ("ACCEPTED", "RUNNING", "WAITING")


async def _declared_start_output(client: McpTestClient) -> dict[str, Any]:
    cursor = None
    while True:
        result = (await client.request("tools/list", {"cursor": cursor} if cursor else {})).result
        for tool in result["tools"]:
            if tool["name"] == "workflow_start":
                schema: dict[str, Any] = tool["outputSchema"]
                return schema
        cursor = result["nextCursor"]


async def test_a_completed_tasks_result_conforms_to_workflow_starts_declared_output_schema(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    # MCP: structuredContent conforms to the tool's declared outputSchema; a task of
    # workflow_start completes with the run's result, which the declaration must admit.
    validator = jsonschema.Draft202012Validator(await _declared_start_output(caller))
    created = await start_task(caller, await _saved(owner, FAILING))
    failed = await task_reaching(caller, created["taskId"], ("completed",))
    assert list(validator.iter_errors(failed["result"]["structuredContent"])) == []
    created = await start_task(caller, await _saved(owner, approval_yaml(role=MINE)))
    asked = await task_reaching(caller, created["taskId"], ("input_required",))
    [key] = asked["inputRequests"]
    responses = {key: _accept("APPROVED")}
    await modern(caller, "tasks/update", {"taskId": created["taskId"], "inputResponses": responses})
    done = await task_reaching(caller, created["taskId"], ("completed",))
    assert done["result"]["isError"] is False
    assert list(validator.iter_errors(done["result"]["structuredContent"])) == []
