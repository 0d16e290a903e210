"""Helpers for the one end of a run past its deadline (no tests here)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg

from runtime.scheduler.errors import TIMEOUT_MESSAGE
from tests.support.invocation import Tool, invoke_args, ok, publish_tool, refused
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

# A deadline long enough for admission (and a claim) to happen before it on a busy machine.
LATE_TOOL = {"syncWaitMs": 100, "totalDeadlineMs": 1500}


async def late_run(owner: McpTestClient, caller: McpTestClient, **changes: Any) -> tuple[Tool, str]:
    """A Tool and a run of it admitted by one workflow_invoke, still inside its deadline."""
    tool = await publish_tool(owner, **(LATE_TOOL | changes))
    result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    first = refused(result, "WORKFLOW_TIMEOUT")
    assert first["error"]["retryable"] is True, first
    return tool, str(first["workflowInstanceId"])


async def wait_past_deadline(caller: McpTestClient, instance: str) -> None:
    """Return once the run's deadline (its workflow_get_status deadlineAt) has passed."""
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    deadline = datetime.fromisoformat(status["deadlineAt"])
    await wait_until(lambda: datetime.now(UTC) > deadline, what="the run's deadline passing")


async def blocked_on_the_run_row(admin: psycopg.AsyncConnection[Any]) -> bool:
    """Whether a backend waits for a lock on a workflow_process row (a cancel's FOR UPDATE)."""
    cursor = await admin.execute(
        "SELECT count(*) AS waiting FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        " AND query LIKE '%FROM workflow_process%FOR UPDATE%'"
    )
    row = await cursor.fetchone()
    return row is not None and row["waiting"] > 0


def deadline_end(instance: str, *, after_effect: bool = False) -> dict[str, Any]:
    """The isError structuredContent of a run the deadline ended, whoever noticed first."""
    return {
        "status": "timeout",
        "workflowInstanceId": instance,
        "error": {
            "code": "WORKFLOW_TIMEOUT",
            "message": TIMEOUT_MESSAGE,
            "retryable": False,
            "afterEffect": after_effect,
        },
    }


async def assert_one_end(
    caller: McpTestClient, instance: str, result: dict[str, Any], *, after_effect: bool = False
) -> None:
    """The call's answer, the stored run and the status and result tools all tell one end."""
    expected = deadline_end(instance, after_effect=after_effect)
    assert refused(result, "WORKFLOW_TIMEOUT") == expected
    assert result["content"][0]["text"] == f"WORKFLOW_TIMEOUT: {TIMEOUT_MESSAGE}"
    args = {"workflowInstanceId": instance}
    status = ok(await caller.call_tool("workflow_get_status", args))
    assert status["state"] == "CANCELLED", status
    assert status["effectState"] == ("possible" if after_effect else "none")
    assert status["error"] == expected["error"]
    for tool in ("workflow_get_result", "workflow_wait_result"):
        assert refused(await caller.call_tool(tool, args), "WORKFLOW_TIMEOUT") == expected
