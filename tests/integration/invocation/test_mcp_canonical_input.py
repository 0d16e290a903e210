"""workflow_invoke input under rfc8785-json-v2: decimals, their spellings, wire duplicates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.canonical import PROFILE_V2, canonical_digest
from runtime.collaborators import Services
from tests.support.binding_builders import HOST
from tests.support.invocation import CALLER, Tool, invoke_args, ok, publish_tool, refused
from tests.support.mcp import McpReply, McpTestClient
from tests.support.publication_builders import new_id, save_args

pytestmark = pytest.mark.requirement("001:Canonical effective input")

LOAN_DEFINITION = (
    'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
    '  version: "1.2.0"\n'
    "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
    "      required: [loanAmount]\n"
    "      properties:\n        loanAmount:\n          type: number\n"
    "do:\n  - quote:\n      set:\n"
    '        loanAmount: "${ input.loanAmount }"\n'
    '        twice: "${ input.loanAmount * 2.0 }"\n'
)
REPLAY = {"kind": "derived", "resultReplayMs": 600000}


async def _loan_tool(owner: McpTestClient) -> Tool:
    return await publish_tool(owner, text=LOAN_DEFINITION, idempotencyPolicy=REPLAY)


async def _invoke_raw(client: McpTestClient, tool: Tool, input_text: str) -> McpReply:
    """workflow_invoke with the input written exactly as input_text on the wire."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": client.params_with_meta(
            {"name": "workflow_invoke", "arguments": invoke_args(tool, {})}
        ),
    }
    text = json.dumps(message).replace('"input": {}', '"input": ' + input_text)
    assert input_text in text
    headers = {**client.envelope_headers("tools/call", "workflow_invoke"), **client.auth}
    return await client.post_raw(text, headers)


async def _scalar(services: Services, query: str) -> Any:
    async with services.database.transaction() as conn:
        cursor = await conn.execute(query)
        row = await cursor.fetchone()
    assert row is not None
    return next(iter(row.values()))


async def test_a_decimal_input_runs_and_its_other_spellings_replay_the_same_run(
    owner: McpTestClient, caller: McpTestClient, services: Services, workers: object
) -> None:
    tool = await _loan_tool(owner)
    first = ok(
        await caller.call_tool(
            "workflow_invoke", invoke_args(tool, {"loanAmount": 100000.5, "currency": "EUR"})
        )
    )
    assert first["output"] == {"loanAmount": 100000.5, "twice": 200001.0}
    for spelling in (
        '{"currency": "EUR", "loanAmount": 100000.5}',
        '{"loanAmount": 1.000005e5, "currency": "EUR"}',
        '{"currency":"EUR","loanAmount":100000.50}',
    ):
        reply = await _invoke_raw(caller, tool, spelling)
        caller.check(reply, "tools/call")
        assert ok(reply.result) == first, spelling
    assert await _scalar(services, "SELECT count(*) FROM workflow_process") == 1


async def test_duplicate_members_in_the_arguments_are_an_is_error_refusal_and_start_nothing(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    # Seed 001: duplicate object keys are rejected; seed 000 Error envelopes: a refusal of an
    # authenticated call is an isError result, not a JSON-RPC error.
    tool = await _loan_tool(owner)
    reply = await _invoke_raw(caller, tool, '{"loanAmount": 1.5, "loanAmount": 2.5}')
    caller.check(reply, "tools/call")
    assert reply.status == 200
    body = refused(reply.result, "WORKFLOW_INPUT_INVALID")
    assert body["error"]["details"]["reason"] == "duplicate-key"
    assert body["error"]["details"]["pointer"] == "/input"
    assert "names the same member twice" in body["error"]["message"]
    assert await _scalar(services, "SELECT count(*) FROM workflow_process") == 0


async def test_duplicate_members_in_the_arguments_of_an_unauthenticated_call_are_a_401(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool = await _loan_tool(owner)
    anonymous = McpTestClient(caller.http, caller.era, {})
    reply = await _invoke_raw(anonymous, tool, '{"loanAmount": 1.5, "loanAmount": 2.5}')
    assert reply.status == 401
    assert reply.error["code"] == -32001


async def test_duplicate_members_in_the_json_rpc_envelope_are_a_parse_error(
    caller: McpTestClient,
) -> None:
    headers = {**caller.envelope_headers("tools/list"), **caller.auth}
    text = '{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list", "params": {}}'
    reply = await caller.post_raw(text, headers)
    assert reply.status == 400
    assert reply.error["code"] == -32700
    assert reply.error["data"] == {"reason": "duplicate-key"}


@pytest.mark.parametrize("number", ["9007199254740993", "1e16", "1e400"])
async def test_a_number_beyond_the_safe_range_is_refused_as_invalid_input(
    owner: McpTestClient, caller: McpTestClient, services: Services, number: str
) -> None:
    tool = await _loan_tool(owner)
    reply = await _invoke_raw(caller, tool, '{"loanAmount": ' + number + "}")
    caller.check(reply, "tools/call")
    body = refused(reply.result, "WORKFLOW_INPUT_INVALID")
    assert "unsupported-number" in body["error"]["message"]
    assert await _scalar(services, "SELECT count(*) FROM workflow_process") == 0


def _scope(tool: Tool, key: str, **profiled: Any) -> str:
    scope = {"v": 1, "kind": "derived", "hostId": HOST, "toolId": tool.tool_id}
    return canonical_digest({**scope, "endUserSubject": CALLER, "key": key, **profiled})


async def test_the_scope_names_v2_only_for_inputs_v1_cannot_express(
    owner: McpTestClient, caller: McpTestClient, services: Services, workers: object
) -> None:
    """Reservations stored before v2 (scope version 1) keep matching a v1-expressible retry."""
    tool = await _loan_tool(owner)
    # Integral, so v1 expresses it (as 100000); a double, so the definition's CEL can use it.
    integral = {"loanAmount": 100000.0}
    ok(await caller.call_tool("workflow_invoke", invoke_args(tool, integral)))
    decimal = {"loanAmount": 100000.5}
    ok(await caller.call_tool("workflow_invoke", invoke_args(tool, decimal)))
    query = "SELECT array_agg(scope_digest ORDER BY created_ts) FROM workflow_idempotency_t"
    stored = await _scalar(services, query)
    integral_key = canonical_digest(integral)
    decimal_key = canonical_digest(decimal, profile=PROFILE_V2)
    expected = [
        _scope(tool, integral_key),
        _scope(tool, decimal_key, v=2, profile=PROFILE_V2),
    ]
    assert list(stored) == expected


async def _call_raw(client: McpTestClient, name: str, arguments: dict[str, Any]) -> McpReply:
    """tools/call whose arguments json.dumps writes, lone surrogates as \\uXXXX escapes."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": client.params_with_meta({"name": name, "arguments": arguments}),
    }
    headers = {**client.envelope_headers("tools/call", name), **client.auth}
    return await client.post_raw(json.dumps(message), headers)


@pytest.mark.parametrize(
    ("tool_name", "where"),
    [
        ("workflow_invoke", "input key"),
        ("workflow_start", "input value"),
        ("workflow_definition_save", "actor"),
        ("workflow_definition_save", "definition"),
    ],
)
async def test_a_lone_surrogate_is_a_permanent_parse_error_and_changes_nothing(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    tool_name: str,
    where: str,
) -> None:
    tool = await _loan_tool(owner)
    lone = {"\ud800": 1} if where == "input key" else {"note": "x\udc00"}
    client, args = caller, invoke_args(tool, {"loanAmount": 5, **lone})
    if tool_name == "workflow_start":
        args = {"wfDefId": tool.wf_def_id, "input": {"loanAmount": 5, **lone}}
    elif tool_name == "workflow_definition_save":
        client, args = owner, save_args(new_id(), 1)
        args[where] = "\ud800" if where == "actor" else args[where] + "# \udc00\n"
    definitions = await _scalar(services, "SELECT count(*) FROM wf_definition_t")
    reply = await _call_raw(client, tool_name, args)
    assert reply.status == 400
    assert reply.error["code"] == -32700
    assert reply.error["data"] == {"reason": "lone-surrogate"}
    assert await _scalar(services, "SELECT count(*) FROM workflow_process") == 0
    assert await _scalar(services, "SELECT count(*) FROM wf_definition_t") == definitions


@pytest.mark.parametrize(
    ("number", "why"), [("9" * 5000, "2^53 - 1"), ("1e-400", "underflows to zero")]
)
async def test_a_number_no_double_holds_is_refused_with_its_reason(
    owner: McpTestClient, caller: McpTestClient, services: Services, number: str, why: str
) -> None:
    tool = await _loan_tool(owner)
    reply = await _invoke_raw(caller, tool, '{"loanAmount": ' + number + "}")
    assert reply.status == 400
    assert reply.error["code"] == -32700
    assert reply.error["data"] == {"reason": "unsupported-number"}
    assert why in reply.error["message"]
    assert await _scalar(services, "SELECT count(*) FROM workflow_process") == 0
