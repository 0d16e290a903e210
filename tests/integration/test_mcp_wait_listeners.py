"""The result waiter's LISTEN connections are bounded by a setting (seed 001 Invocation State)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from runtime.execution import configure_waiter
from runtime.store import Database
from tests.support.binding_builders import definition_yaml
from tests.support.invocation import (
    SLOW_TASK,
    caller,
    invoke_args,
    ok,
    owner,
    publish_tool,
    until_settled,
    workers,
)
from tests.support.mcp import McpTestClient

__all__ = ["caller", "owner", "workers"]

pytestmark = pytest.mark.requirement("001:Invocation State")

Admin = psycopg.AsyncConnection[Any]


async def _result_listeners(admin: Admin) -> int:
    cursor = await admin.execute(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
        " AND query = 'LISTEN \"workflow_process_state\"'"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


async def test_with_no_listener_connections_waiters_poll_durable_status(
    db: Database, owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin
) -> None:
    configure_waiter(db, listener_connections=0)
    # A run that outlives the first read, so the waiter must see its end by polling.
    tool = await publish_tool(owner, text=definition_yaml(extra_task=SLOW_TASK))
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool))))
    assert body["status"] == "completed"
    assert await _result_listeners(admin) == 0


async def test_any_positive_bound_shares_one_listener_connection(
    db: Database, owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin
) -> None:
    configure_waiter(db, listener_connections=8)
    tool = await publish_tool(owner)
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool))))
    assert body["status"] == "completed"
    assert await _result_listeners(admin) == 1
