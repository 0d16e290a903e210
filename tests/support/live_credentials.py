"""Run credentials as the live service stores and sends them (qualification helpers)."""

from __future__ import annotations

import httpx
import psycopg

from tests.support.binding_builders import HOST, new_id
from tests.support.invocation import CALLER, ok, save_head
from tests.support.live_stack import QualStack
from tests.support.mcp import MODERN, McpTestClient
from tests.support.protected_backend import calling_definition, http_task
from tests.support.tokens import auth_headers


async def sealed_credential(stack: QualStack, instance: str) -> bytes | None:
    """The stored (sealed) run credential of a run, or None once it is gone."""
    async with await psycopg.AsyncConnection.connect(stack.database_url) as conn:
        cursor = await conn.execute(
            "SELECT ciphertext FROM workflow_run_credential WHERE process_id = %s", (instance,)
        )
        row = await cursor.fetchone()
    return None if row is None else bytes(row[0])


async def credential_gone(stack: QualStack, instance: str) -> bool:
    """Whether the run's stored credential was deleted."""
    return await sealed_credential(stack, instance) is None


async def start_two_calls(
    stack: QualStack,
    owner: McpTestClient,
    http: httpx.AsyncClient,
    *,
    ttl: int = 3600,
    expires_at: int | None = None,
) -> tuple[str, list[str | None], int]:
    """workflow_start a saved definition making two protected GETs, as a user whose token has
    the given lifetime (ttl or expires_at); waits for it. Returns the user token, the
    Authorization headers the backend saw, and how many requests reached the token-exchange
    endpoint meanwhile."""
    uri = stack.unique_path("start")
    text = calling_definition(
        http_task("first", "GET", uri, authenticated=True, write=False),
        http_task("second", "GET", uri, authenticated=True, write=False),
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    user = stack.identity.user_token(
        host_id=HOST,
        user_id=CALLER,
        roles=("workflow-admin",),
        client_id="portal",
        ttl=ttl,
        expires_at=expires_at,
    )
    starter = McpTestClient(
        http, MODERN, auth_headers(stack.identity, user, stack.identity.app_token(host_id=HOST))
    )
    before = stack.exchange_traffic.calls
    receipt = ok(await starter.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    instance = {"workflowInstanceId": receipt["workflowInstanceId"], "waitMs": 20000}
    done = ok(await starter.call_tool("workflow_wait_result", instance))
    assert done["state"] == "COMPLETED", done
    seen = [request.headers.get("authorization") for request in stack.backend.requests_to(uri)]
    return user, seen, stack.exchange_traffic.calls - before


__all__ = ["credential_gone", "sealed_credential", "start_two_calls"]
