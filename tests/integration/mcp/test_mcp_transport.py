"""The MCP endpoint in both protocol eras: framing, headers, discovery, listing, faults."""

from __future__ import annotations

import json

import pytest

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.mcp.app import attach_services, create_app
from tests.support.mcp import LEGACY, MODERN, McpTestClient, asgi_client, assert_valid_mcp

pytestmark = pytest.mark.requirement("issue-2:mcp-endpoint")


async def test_legacy_initialize_negotiates_2025_11_25(legacy: McpTestClient) -> None:
    reply = await legacy.request(
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    )
    assert reply.result["protocolVersion"] == LEGACY
    assert reply.result["capabilities"]["tools"] == {"listChanged": False}


async def test_legacy_initialize_answers_its_own_version_to_an_unknown_request(
    legacy: McpTestClient,
) -> None:
    reply = await legacy.request(
        "initialize",
        {
            "protocolVersion": "1999-01-01",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
        headers={"MCP-Protocol-Version": LEGACY},
    )
    assert reply.result["protocolVersion"] == LEGACY


async def test_initialized_notification_is_accepted_with_202_and_no_body(
    legacy: McpTestClient,
) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    reply = await legacy.post_raw(json.dumps(message), legacy.envelope_headers("x"))
    assert reply.status == 202
    assert reply.body is None


async def test_legacy_ping_answers_an_empty_result(legacy: McpTestClient) -> None:
    reply = await legacy.request("ping")
    assert reply.result == {}


async def test_modern_discover_advertises_both_eras(modern: McpTestClient) -> None:
    reply = await modern.request("server/discover")
    result = reply.result
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [MODERN, LEGACY]
    assert result["cacheScope"] in {"public", "private"}
    assert isinstance(result["ttlMs"], int)


async def test_tools_list_pages_with_opaque_cursors_in_a_stable_order(
    mcp: McpTestClient,
) -> None:
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {} if cursor is None else {"cursor": cursor}
        result = (await mcp.request("tools/list", params)).result
        assert len(result["tools"]) <= 2
        names += [tool["name"] for tool in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert pages >= 2
    assert names[:4] == [
        "workflow_definition_save",
        "workflow_definition_publish",
        "workflow_definition_retire",
        "workflow_definition_grants_sync",
    ]
    again = (await mcp.request("tools/list")).result
    assert [tool["name"] for tool in again["tools"]] == names[:2]


async def test_modern_tools_list_carries_result_type_ttl_and_cache_scope(
    modern: McpTestClient,
) -> None:
    result = (await modern.request("tools/list")).result
    assert result["resultType"] == "complete"
    assert result["ttlMs"] >= 0
    assert result["cacheScope"] == "public"


async def test_served_tools_have_bundled_schemas_without_refs(mcp: McpTestClient) -> None:
    result = (await mcp.request("tools/list")).result
    for tool in result["tools"]:
        assert "$ref" not in json.dumps(tool["inputSchema"])
        assert tool["inputSchema"]["type"] == "object"


async def test_a_tool_without_a_handler_is_neither_listed_nor_callable(
    services: Services, auth_headers: dict[str, str]
) -> None:
    handlers = {name: handler for name, handler in HANDLERS.items() if name != "workflow_cancel"}
    app = create_app()
    attach_services(app, services, handlers)
    async with asgi_client(app) as http:
        for era in (MODERN, LEGACY):
            client = McpTestClient(http, era, auth_headers)
            listed: list[str] = []
            cursor = None
            while True:
                params = {"cursor": cursor} if cursor else {}
                result = (await client.request("tools/list", params)).result
                listed += [tool["name"] for tool in result["tools"]]
                cursor = result.get("nextCursor")
                if cursor is None:
                    break
            assert "workflow_cancel" not in listed
            assert "workflow_get_status" in listed
            reply = await client.request("tools/call", {"name": "workflow_cancel", "arguments": {}})
            assert reply.error["code"] == -32602


async def test_an_invalid_cursor_is_invalid_params(mcp: McpTestClient) -> None:
    reply = await mcp.request("tools/list", {"cursor": "not-a-cursor"})
    assert reply.error["code"] == -32602


async def test_unknown_tool_is_invalid_params(mcp: McpTestClient) -> None:
    reply = await mcp.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert reply.error["code"] == -32602


async def test_modern_unknown_method_is_404_method_not_found(modern: McpTestClient) -> None:
    reply = await modern.request("resources/list")
    assert reply.status == 404
    assert reply.error["code"] == -32601


async def test_legacy_unknown_method_is_method_not_found_with_http_200(
    legacy: McpTestClient,
) -> None:
    # A 2025-11-25 client reads HTTP 404 as "session expired"; the error travels in the body.
    reply = await legacy.request("prompts/list")
    assert reply.status == 200
    assert reply.error["code"] == -32601


async def test_legacy_unknown_tool_is_invalid_params_with_http_200(legacy: McpTestClient) -> None:
    reply = await legacy.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert reply.status == 200
    assert reply.error["code"] == -32602


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("MCP-Protocol-Version", "2026-07-29"),
        ("Mcp-Method", "tools/call"),
    ],
)
async def test_modern_header_mismatch_is_400_with_32020(
    modern: McpTestClient, header: str, value: str
) -> None:
    reply = await modern.request("tools/list", headers={header: value})
    assert reply.status == 400
    assert reply.error["code"] == -32020
    assert_valid_mcp(MODERN, "HeaderMismatchError", reply.body)


async def test_modern_mcp_name_must_match_the_called_tool(modern: McpTestClient) -> None:
    reply = await modern.request(
        "tools/call",
        {"name": "workflow_definition_save", "arguments": {}},
        headers={"Mcp-Name": "workflow_definition_publish"},
    )
    assert reply.status == 400
    assert reply.error["code"] == -32020


async def test_modern_unsupported_version_is_400_with_32022(modern: McpTestClient) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2099-01-01",
        "Mcp-Method": "tools/list",
    }
    reply = await modern.post_raw(json.dumps(message), headers)
    assert reply.status == 400
    assert reply.error["code"] == -32022
    assert reply.error["data"]["requested"] == "2099-01-01"
    assert MODERN in reply.error["data"]["supported"]
    assert_valid_mcp(MODERN, "UnsupportedProtocolVersionError", reply.body)


async def test_modern_request_without_meta_envelope_is_invalid_params(
    modern: McpTestClient,
) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    reply = await modern.post_raw(json.dumps(message), modern.envelope_headers("tools/list"))
    assert reply.status == 400
    assert reply.error["code"] == -32602


async def test_malformed_json_is_a_parse_error(mcp: McpTestClient) -> None:
    reply = await mcp.post_raw(b'{"jsonrpc": "2.0", "id": 1,', mcp.envelope_headers("tools/list"))
    assert reply.status == 400
    assert reply.error["code"] == -32700
    assert_valid_mcp(mcp.era, "JSONRPCErrorResponse", reply.body)


@pytest.mark.parametrize("charset", ["latin-1", "utf-16", '"iso-8859-1"'])
async def test_a_body_declared_in_another_charset_is_415(mcp: McpTestClient, charset: str) -> None:
    headers = {
        **mcp.envelope_headers("tools/list"),
        "Content-Type": f"application/json; charset={charset}",
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    reply = await mcp.post_raw(json.dumps(message), headers)
    assert reply.status == 415
    assert "utf-8" in reply.error["message"]
    utf8 = await mcp.request(
        "tools/list", headers={"Content-Type": 'application/json; charset="UTF-8"'}
    )
    assert utf8.status == 200


@pytest.mark.parametrize(
    "message",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],
        {"id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": 42},
        {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]},
    ],
)
async def test_an_invalid_request_object_is_32600(mcp: McpTestClient, message: object) -> None:
    reply = await mcp.post_raw(json.dumps(message), mcp.envelope_headers("tools/list"))
    assert reply.status == 400
    assert reply.error["code"] == -32600


async def test_a_foreign_origin_is_refused(mcp: McpTestClient) -> None:
    reply = await mcp.request("tools/list", headers={"Origin": "https://evil.example"})
    assert reply.status == 403


async def test_a_local_origin_is_accepted(mcp: McpTestClient) -> None:
    reply = await mcp.request("tools/list", headers={"Origin": "http://localhost"})
    assert reply.status == 200


async def test_a_browser_on_the_servers_own_loopback_origin_is_accepted(mcp: McpTestClient) -> None:
    # Browsers send the port: the default loopback origins match any port.
    reply = await mcp.request("tools/list", headers={"Origin": "http://127.0.0.1:8787"})
    assert reply.status == 200
    refused = await mcp.request("tools/list", headers={"Origin": "http://127.0.0.1.nip.io:8787"})
    assert refused.status == 403


async def test_get_on_the_endpoint_is_405(mcp: McpTestClient) -> None:
    response = await mcp.http.get("/mcp")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_health_and_readiness(mcp: McpTestClient) -> None:
    health = await mcp.http.get("/healthz")
    assert health.status_code == 200
    ready = await mcp.http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": True, "migrations": True, "keyring": True}


async def test_absurdly_nested_json_is_a_parse_error_not_a_crash(mcp: McpTestClient) -> None:
    body = "[" * 100_000 + "]" * 100_000
    reply = await mcp.post_raw(body, mcp.envelope_headers("tools/list"))
    assert reply.status == 400
    assert reply.error["code"] == -32700
    tool_reply = await mcp.post_raw(
        body, {"Content-Type": "application/json"}, path="/tools/workflow_definition_save"
    )
    assert tool_reply.status == 400


async def test_an_object_with_an_id_but_no_method_is_an_invalid_request(mcp: McpTestClient) -> None:
    reply = await mcp.post_raw(
        json.dumps({"jsonrpc": "2.0", "id": 1}), mcp.envelope_headers("tools/list")
    )
    assert reply.status == 400
    assert reply.error["code"] == -32600


async def test_a_client_response_is_accepted_without_an_answer(mcp: McpTestClient) -> None:
    reply = await mcp.post_raw(
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}), mcp.envelope_headers("x")
    )
    assert reply.status == 202
    assert reply.body is None


async def test_readiness_fails_without_a_usable_sealing_key(
    services: Services,
) -> None:
    from runtime.security import Keyring

    services.keyring = Keyring.empty()
    app = create_app()
    attach_services(app, services, HANDLERS)
    async with asgi_client(app) as http:
        ready = await http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["keyring"] is False


async def test_readiness_fails_when_a_migration_is_not_applied(
    mcp: McpTestClient, database_url: str
) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as owner:
        await owner.execute(
            "DELETE FROM schema_migrations"
            " WHERE version = (SELECT max(version) FROM schema_migrations)"
        )
    ready = await mcp.http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["migrations"] is False


async def test_readiness_fails_when_a_function_file_was_never_installed(
    mcp: McpTestClient, database_url: str
) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as owner:
        await owner.execute(
            "DELETE FROM schema_function_history WHERE name = 'invocation_admission'"
        )
    ready = await mcp.http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["migrations"] is False


async def test_a_modern_notification_naming_an_unsupported_version_is_refused(
    modern: McpTestClient,
) -> None:
    message = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2099-01-01",
        "Mcp-Method": "notifications/cancelled",
    }
    reply = await modern.post_raw(json.dumps(message), headers)
    assert reply.status == 400
    assert reply.error["code"] == -32022
