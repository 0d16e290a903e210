"""An admission whose COMMIT went out but whose answer never came back says the outcome is
unknown, names the run it would be and the key that re-attaches, and never reads as "nothing
was admitted" (issue 42 item 7 (b)).

The fault is real: the admission statement runs (and, in autocommit, commits) on its pooled
connection, then a superuser terminates that connection's backend, so the client reads the
server's own dropped connection before it sees the answer. Both tries of the call lose their
answer this way, as when the database restarts under them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.invocation import store
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import client, invoke_args, ok, publish_tool, refused, save_head
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")

OPEN = {
    "maximumConcurrentRuns": 1000,
    "maximumConcurrentRunsPerUser": 1000,
    "startsPerMinute": 1000,
    "startsPerMinutePerUser": 1000,
}
EXPLICIT = {"kind": "explicit", "resultReplayMs": 600000}
Admin = psycopg.AsyncConnection[dict[str, Any]]


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[Admin]:
    """A superuser session on the test database (autocommit)."""
    conn = await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    )
    try:
        yield conn
    finally:
        await conn.close()


def answer_lost(admin: Admin, seen: list[store.AdmitOutcome]) -> Any:
    """store.admit_invoke, whose connection the server drops once the statement committed."""
    real = store.admit_invoke

    async def lossy(
        conn: Any, params: store.AdmitParams, *, exclusive: bool = False
    ) -> store.AdmitOutcome:
        outcome = await real(conn, params, exclusive=exclusive)
        seen.append(outcome)
        await admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        # The client learns of it where it would have read the answer: on its connection.
        await conn.execute("SELECT 1")
        raise AssertionError("the terminated backend answered")

    return lossy


async def runs_of(admin: Admin, tool_id: str) -> list[str]:
    rows = await (
        await admin.execute(
            "SELECT process_id::text AS id FROM workflow_invocation_t WHERE tool_id = %s",
            (tool_id,),
        )
    ).fetchall()
    return [row["id"] for row in rows]


async def test_an_admission_whose_commit_answer_was_lost_names_the_key_that_reattaches(
    owner: McpTestClient,
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = await publish_tool(
        owner, syncWaitMs=50, admissionLimits=OPEN, idempotencyPolicy=EXPLICIT
    )
    caller = client(wide, dev_identity, "lost-commit")
    seen: list[store.AdmitOutcome] = []
    monkeypatch.setattr(store, "admit_invoke", answer_lost(admin, seen))
    args = invoke_args(tool, idempotencyKey="order-17")
    async with asyncio.timeout(30):
        body = refused(
            await caller.call_tool("workflow_invoke", args), "WORKFLOW_INVOCATION_UNAVAILABLE"
        )
    # Both tries committed: the first admitted the run, the retry attached to it.
    assert [answer.outcome for answer in seen] == ["accepted", "attach"]
    admitted = seen[0].process_id
    assert await runs_of(admin, tool.tool_id) == [admitted]
    error = body["error"]
    assert error["retryable"] is True
    assert error["details"]["admission"] == "unknown"
    assert error["details"]["idempotencyKey"] == "order-17"
    assert error["details"]["workflowInstanceId"] == admitted
    assert "unknown" in error["message"] and "order-17" in error["message"]
    # What the answer said is true: the same key, once the database answers, re-attaches.
    monkeypatch.undo()
    async with asyncio.timeout(30):
        again = await caller.call_tool("workflow_invoke", args)
    assert again["structuredContent"]["workflowInstanceId"] == admitted
    assert await runs_of(admin, tool.tool_id) == [admitted]


async def test_a_derived_key_admission_with_a_lost_answer_says_to_send_the_same_input(
    owner: McpTestClient,
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(wide, dev_identity, "lost-derived")
    seen: list[store.AdmitOutcome] = []
    monkeypatch.setattr(store, "admit_invoke", answer_lost(admin, seen))
    async with asyncio.timeout(30):
        body = refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool)),
            "WORKFLOW_INVOCATION_UNAVAILABLE",
        )
    admitted = seen[0].process_id
    assert body["error"]["details"]["admission"] == "unknown"
    assert body["error"]["details"]["workflowInstanceId"] == admitted
    assert "same input" in body["error"]["message"]
    monkeypatch.undo()
    async with asyncio.timeout(30):
        again = await caller.call_tool("workflow_invoke", invoke_args(tool))
    assert again["structuredContent"]["workflowInstanceId"] == admitted


async def test_a_keyless_start_with_a_lost_answer_names_the_fresh_key_that_reattaches(
    owner: McpTestClient, caller: McpTestClient, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 000: a start without a key is new work, so a retry must reuse an explicit key: the
    answer names the fresh key this call was given, and that key finds the run it admitted."""
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    real = store.admit_start
    seen: list[store.StartOutcome] = []

    async def lossy(conn: Any, params: store.StartParams) -> store.StartOutcome:
        outcome = await real(conn, params)
        seen.append(outcome)
        await admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        await conn.execute("SELECT 1")
        raise AssertionError("the terminated backend answered")

    monkeypatch.setattr(store, "admit_start", lossy)
    args = {"wfDefId": wf_def_id, "input": {"claimId": "C-9"}}
    async with asyncio.timeout(30):
        body = refused(
            await caller.call_tool("workflow_start", args), "WORKFLOW_INVOCATION_UNAVAILABLE"
        )
    admitted = seen[0].process_id
    details = body["error"]["details"]
    assert details["admission"] == "unknown" and details["workflowInstanceId"] == admitted
    key = details["idempotencyKey"]
    assert "no idempotencyKey" in body["error"]["message"] and key in body["error"]["message"]
    monkeypatch.undo()
    async with asyncio.timeout(30):
        receipt = ok(await caller.call_tool("workflow_start", args | {"idempotencyKey": key}))
    assert receipt["workflowInstanceId"] == admitted
