"""Text PostgreSQL cannot store (U+0000) is refused as invalid input, never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import binding, definition_yaml
from tests.support.binding_builders import publish_args as binding_publish_args
from tests.support.mcp import McpTestClient
from tests.support.publication import new_id, save_args
from tests.support.tokens import auth_headers


def _refused_as_input(result: dict[str, Any]) -> None:
    assert result["isError"] is True, result
    assert result["structuredContent"]["error"]["code"] == "WORKFLOW_INPUT_INVALID"


async def _count(db: Database, table: str) -> int:
    async with db.connection() as conn:
        cursor = await conn.execute(f"SELECT count(*) AS n FROM {table}")
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.parametrize("where", ["value", "key"])
async def test_a_nul_in_workflow_start_input_is_invalid_input(
    mcp: McpTestClient, db: Database, where: str
) -> None:
    wf_def_id = new_id()
    saved = await mcp.call_tool("workflow_definition_save", save_args(wf_def_id, 1))
    assert saved["isError"] is False
    data = {"claimId": "C-\u0000"} if where == "value" else {"\u0000k": 1}
    started = await mcp.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": data})
    _refused_as_input(started)
    assert await _count(db, "workflow_process") == 0


async def test_a_nul_in_a_binding_description_is_invalid_input(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    value = binding(new_id(), new_id(), definition_yaml(), toolDescription="bad\u0000text")
    args = binding_publish_args(value, 0)
    args["hostId"] = save_args(new_id(), 1)["hostId"]
    admin = auth_headers(dev_identity, dev_identity.user_token(roles=("admin",)), None)
    _refused_as_input(await mcp.call_tool("workflow_binding_publish", args, headers=admin))
    assert await _count(db, "workflow_tool_binding_t") == 0
