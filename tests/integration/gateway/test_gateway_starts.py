"""Task-started routes at the reference Gateway (issue 35): mcp-router.yml's `starts:` gives a
tool name to workflow_start of one definition, served as an MCP task, with an MRTR round for
missing input before the start (2026-07-28).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import yaml

from gateway.router import RouterError, RouterSnapshot, StartRoute, parse_snapshot, write_snapshot
from publisher.routes import merge
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import new_id
from tests.support.gateway import RecordingTransport, gateway_client
from tests.support.invocation import save_head
from tests.support.mcp import LEGACY, MODERN, McpTestClient, assert_valid_mcp
from tests.support.mcp_tasks import (
    EXTENSION,
    assert_valid_ext,
    legacy,
    legacy_task_reaching,
    modern,
    task_reaching,
)

pytestmark = pytest.mark.requirement("issue-35:task-started-routes")

ROLE = "workflow-admin"
ROUTE = "claims.greet"
WITH_ELICITATION = {"elicitation": {}, "extensions": {EXTENSION: {}}}
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 100}},
    "required": ["name"],
    "additionalProperties": False,
}
GREETING = """\
document:
  dsl: "1.0.3"
  namespace: claims
  name: summarize-claim
  version: "1.2.0"
do:
  - greet:
      set:
        greeting: "${ 'Hello, ' + input.name + '!' }"
"""


def _route(wf_def_id: str, **changes: Any) -> StartRoute:
    values: dict[str, Any] = {
        "name": ROUTE,
        "description": "Greet someone, as an MCP task",
        "workflow_definition_id": wf_def_id,
        "input_schema": INPUT_SCHEMA,
        "task_support": "required",
        "roles": (ROLE,),
    }
    values.update(changes)
    return StartRoute(**values)


async def _served(owner: McpTestClient, router_file: Path, **changes: Any) -> StartRoute:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, GREETING)
    route = _route(wf_def_id, **changes)
    write_snapshot(router_file, RouterSnapshot(starts=(route,)))
    return route


def _user(http: httpx.AsyncClient, identity: DevIdentity, era: str = MODERN, **kw: Any) -> Any:
    return gateway_client(http, identity, roles=kw.pop("roles", (ROLE,)), era=era, **kw)


def _starts_sent(seen: RecordingTransport) -> list[dict[str, Any]]:
    """The tools/call requests the Gateway sent Workflow, decoded."""
    sent = [msgspec.json.decode(request.content) for request in seen.requests]
    return [message for message in sent if message.get("method") == "tools/call"]


def _call(name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, **params}


# -- the route format -------------------------------------------------------------------------


def _document(**start: Any) -> str:
    entry = {
        "name": ROUTE,
        "workflowDefinitionId": "0196a000-0000-7000-8000-000000000001",
        "inputSchema": INPUT_SCHEMA,
        "taskSupport": "optional",
        **start,
    }
    return yaml.safe_dump({"version": 1, "starts": [entry]})


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"taskSupport": None}, "taskSupport"),
        ({"taskSupport": "forbidden"}, "taskSupport"),
        ({"workflowDefinitionId": "not-a-uuid"}, "workflowDefinitionId"),
        ({"definitionDigest": "sha256:short"}, "definitionDigest"),
        ({"pinned": True}, "pinned"),
        ({"name": "workflow_start"}, "starts[0].name 'workflow_start' is reserved"),
        ({"inputSchema": {"type": "string"}}, "starts[0].inputSchema must be an object schema"),
    ],
)
def test_a_start_route_that_cannot_be_served_is_refused_naming_its_field(
    change: dict[str, Any], named: str
) -> None:
    document = yaml.safe_load(_document())
    entry = document["starts"][0]
    for key, value in change.items():
        if value is None:
            del entry[key]
        else:
            entry[key] = value
    with pytest.raises(RouterError) as refused:
        parse_snapshot(yaml.safe_dump(document))
    assert named in str(refused.value)


def test_a_start_route_may_not_take_a_tools_name_and_the_publisher_keeps_the_routes() -> None:
    parsed = parse_snapshot(_document())
    assert parsed.starts[0].task_support == "optional"
    # The publisher rewrites the Tools and keeps the operator's routes as they are.
    assert merge(parsed, {}).starts == parsed.starts
    tool = {
        "name": ROUTE,
        "stableToolRef": "0196a000-0000-7000-8000-000000000002",
        "workflowDefinitionId": "0196a000-0000-7000-8000-000000000001",
        "workflowVersion": "1.0.0",
        "definitionDigest": "sha256:" + "0" * 64,
        "inputSchema": INPUT_SCHEMA,
        "syncWaitMs": 1000,
    }
    document = yaml.safe_load(_document())
    document["tools"] = [tool]
    with pytest.raises(RouterError, match=r"starts\[0\]\.name 'claims.greet' is repeated"):
        parse_snapshot(yaml.safe_dump(document))


# -- tools/list -------------------------------------------------------------------------------


async def test_tools_list_shows_a_start_route_to_its_roles_with_each_eras_task_support(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
) -> None:
    await _served(owner, router_file)
    listed = (await legacy(_user(gateway_http, dev_identity, LEGACY), "tools/list", {})).result
    [tool] = [tool for tool in listed["tools"] if tool["name"] == ROUTE]
    assert tool["execution"] == {"taskSupport": "required"}
    assert tool["inputSchema"] == INPUT_SCHEMA
    assert_valid_mcp(LEGACY, "ListToolsResult", listed)
    # 2026-07-28 Tools have no execution: task creation is the server's call (the extension).
    modern_list = (await modern(_user(gateway_http, dev_identity), "tools/list", {})).result
    [tool] = [tool for tool in modern_list["tools"] if tool["name"] == ROUTE]
    assert "execution" not in tool
    stranger = _user(gateway_http, dev_identity, roles=("genai-admin",))
    names = [t["name"] for t in (await modern(stranger, "tools/list", {})).result["tools"]]
    assert ROUTE not in names


# -- calls without the extension --------------------------------------------------------------


async def test_a_required_route_without_the_extension_is_refused_and_starts_nothing(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    await _served(owner, router_file)
    user = _user(gateway_http, dev_identity)
    refused = await modern(user, "tools/call", _call(ROUTE, {"name": "Ann"}), capabilities={})
    assert refused.error["code"] == -32021
    assert refused.error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    old = _user(gateway_http, dev_identity, LEGACY)
    refused = await legacy(old, "tools/call", _call(ROUTE, {"name": "Ann"}))
    assert refused.error["code"] == -32601
    assert "params.task" in refused.error["message"]
    assert _starts_sent(workflow_seen) == []


async def test_an_optional_route_without_the_extension_is_a_plain_workflow_start(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    route = await _served(owner, router_file, task_support="optional")
    user = _user(gateway_http, dev_identity)
    reply = await modern(user, "tools/call", _call(ROUTE, {"name": "Ann"}), capabilities={})
    result = reply.result
    assert result["resultType"] == "complete" and "taskId" not in result
    assert result["structuredContent"]["wfDefId"] == route.workflow_definition_id
    [sent] = _starts_sent(workflow_seen)
    assert sent["params"]["name"] == "workflow_start"
    assert sent["params"]["arguments"] == {
        "wfDefId": route.workflow_definition_id,
        "input": {"name": "Ann"},
    }


# -- MRTR before the task, and the task -------------------------------------------------------


async def test_mrtr_asks_for_the_missing_field_then_the_answer_starts_the_task_with_it(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workflow_seen: RecordingTransport,
    workers: Any,
) -> None:
    await _served(owner, router_file)
    user = _user(gateway_http, dev_identity)
    first = (
        await modern(user, "tools/call", _call(ROUTE, {}), capabilities=WITH_ELICITATION)
    ).result
    assert_valid_mcp(MODERN, "InputRequiredResult", first)
    assert first["resultType"] == "input_required" and "taskId" not in first
    [(key, request)] = first["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    schema = request["params"]["requestedSchema"]
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"]["type"] == "string"
    assert _starts_sent(workflow_seen) == []  # a first round never reaches Workflow
    responses = {key: {"action": "accept", "content": {"name": "Alice"}}}
    params = _call(ROUTE, {}, inputResponses=responses)
    second = (await modern(user, "tools/call", params, capabilities=WITH_ELICITATION)).result
    assert second["resultType"] == "task" and "requestState" not in second
    assert "inputRequests" not in second
    assert_valid_ext("CreateTaskResult", second)
    [sent] = _starts_sent(workflow_seen)
    assert sent["params"]["arguments"]["input"] == {"name": "Alice"}
    done = await task_reaching(user, second["taskId"], ("completed",))
    assert done["result"]["structuredContent"]["output"] == {"greeting": "Hello, Alice!"}


async def test_a_start_route_runs_as_a_2025_11_25_task_and_its_result_comes_back(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workers: Any,
) -> None:
    await _served(owner, router_file)
    user = _user(gateway_http, dev_identity, LEGACY)
    params = _call(ROUTE, {"name": "Bo"}, task={"ttl": 60_000})
    created = (await legacy(user, "tools/call", params)).result
    assert_valid_mcp(LEGACY, "CreateTaskResult", created)
    task_id = created["task"]["taskId"]
    await legacy_task_reaching(user, task_id, ("completed",))
    result = (await legacy(user, "tasks/result", {"taskId": task_id})).result
    assert result["structuredContent"]["output"] == {"greeting": "Hello, Bo!"}


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"action": "decline"}, "was not given (action 'decline'): nothing was started"),
        ({"action": "cancel"}, "was not given (action 'cancel'): nothing was started"),
        (
            {"action": "accept", "content": {"name": "Ann", "admin": True}},
            "gives fields it did not ask for: 'admin'",
        ),
        ({"action": "accept", "content": {"name": ""}}, "name"),
    ],
)
async def test_a_declined_or_out_of_schema_answer_is_a_typed_refusal_and_starts_nothing(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workflow_seen: RecordingTransport,
    answer: dict[str, Any],
    message: str,
) -> None:
    await _served(owner, router_file)
    user = _user(gateway_http, dev_identity)
    params = _call(ROUTE, {}, inputResponses={"start-input": answer})
    result = (await modern(user, "tools/call", params, capabilities=WITH_ELICITATION)).result
    assert result["resultType"] == "complete" and result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "WORKFLOW_INPUT_INVALID"
    assert message in error["message"]
    assert _starts_sent(workflow_seen) == []


async def test_a_malformed_input_response_is_invalid_params(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
) -> None:
    await _served(owner, router_file)
    user = _user(gateway_http, dev_identity)
    for responses in ({"start-input": 12345}, {"start-input": {"action": "accept", "content": 1}}):
        params = _call(ROUTE, {}, inputResponses=responses)
        reply = await modern(user, "tools/call", params, capabilities=WITH_ELICITATION)
        assert reply.error["code"] == -32602


async def test_a_caller_without_the_routes_roles_is_refused_before_anything_is_asked(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    await _served(owner, router_file)
    stranger = _user(gateway_http, dev_identity, roles=("genai-admin",))
    for arguments in ({}, {"name": "Ann"}):
        params = _call(ROUTE, arguments)
        reply = await modern(stranger, "tools/call", params, capabilities=WITH_ELICITATION)
        assert reply.result["isError"] is True
        error = reply.result["structuredContent"]["error"]
        assert error["code"] == "WORKFLOW_POLICY_DENIED"
        assert error["message"] == f"the caller holds no role allowed to call {ROUTE}"
    assert _starts_sent(workflow_seen) == []


async def test_a_missing_field_no_form_can_ask_for_gets_the_input_schemas_refusal(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    nested = {
        "type": "object",
        "properties": {"claim": {"type": "object"}, "tags": {"type": ["string", "null"]}},
        "required": ["tags", "claim"],
    }
    await _served(owner, router_file, input_schema=nested)
    user = _user(gateway_http, dev_identity)
    reply = await modern(user, "tools/call", _call(ROUTE, {}), capabilities=WITH_ELICITATION)
    assert reply.result["resultType"] == "complete" and reply.result["isError"] is True
    error = reply.result["structuredContent"]["error"]
    assert error["code"] == "WORKFLOW_INPUT_INVALID"
    assert "claim" in error["message"] or "tags" in error["message"]
    assert _starts_sent(workflow_seen) == []
