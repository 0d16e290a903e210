"""workflow_start's admission (workflow_admit_start) raced on many connections at once.

Each test holds workflow_invocation_t in EXCLUSIVE mode from a superuser transaction: a start
writes its owner record last, so the first start of a key waits there holding its new
reservation, and every other start of that key waits on the reservation's unique entry (a
start of another key waits at the owner record too). Once all of them are seen waiting the
lock goes, so they really overlap. These check behaviour workflow_start already had (they pass
on its earlier Python road as well): one key admits one run, distinct keys admit one run each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from runtime.store import Database
from tests.conftest import RUNTIME_ROLE
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient

Admin = psycopg.AsyncConnection[Any]

RACERS = 10
LOCK_WAITERS = (
    "SELECT count(*) AS n FROM pg_stat_activity"
    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """The service's pool, wide enough that every racing start holds a connection of its own."""
    async with Database(
        database_url, runtime_role=RUNTIME_ROLE, min_size=1, max_size=RACERS + 2
    ) as database:
        yield database


async def _waiting(admin: psycopg.AsyncConnection[Any]) -> int:
    row = await (await admin.execute(LOCK_WAITERS)).fetchone()
    assert row is not None
    return int(row["n"])


@asynccontextmanager
async def owner_records_locked(database_url: str) -> AsyncIterator[None]:
    """Hold workflow_invocation_t in EXCLUSIVE mode (inserts wait) until the block ends."""
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute("LOCK TABLE workflow_invocation_t IN EXCLUSIVE MODE")
        try:
            yield
        finally:
            await holder.rollback()


async def _race(
    caller: McpTestClient, admin: Admin, database_url: str, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    async with owner_records_locked(database_url):
        tasks = [asyncio.create_task(caller.call_tool("workflow_start", a)) for a in calls]
        async with asyncio.timeout(30):
            while await _waiting(admin) < len(calls):
                assert not any(t.done() for t in tasks), [t.result() for t in tasks if t.done()]
                await asyncio.sleep(0.02)
    return [ok(r) for r in await asyncio.gather(*tasks)]


async def _counts(admin: Admin) -> dict[str, int]:
    cursor = await admin.execute(
        "SELECT (SELECT count(*) FROM workflow_process WHERE host_id = %(h)s) AS runs,"
        " (SELECT count(*) FROM workflow_task WHERE host_id = %(h)s) AS tasks,"
        " (SELECT count(*) FROM workflow_invocation_t WHERE host_id = %(h)s) AS owners,"
        " (SELECT count(*) FROM workflow_action_authority_t WHERE host_id = %(h)s)"
        " AS authorities,"
        " (SELECT count(*) FROM workflow_run_spec WHERE host_id = %(h)s) AS specs,"
        " (SELECT count(*) FROM workflow_idempotency_t WHERE host_id = %(h)s) AS reservations",
        {"h": HOST},
    )
    row = await cursor.fetchone()
    assert row is not None
    return {name: int(value) for name, value in row.items()}


@pytest.mark.requirement("000:Admission")
async def test_starts_of_one_key_at_once_admit_one_run_and_the_rest_attach(
    owner: McpTestClient, caller: McpTestClient, admin: Admin, database_url: str
) -> None:
    wf_def_id = new_id()
    digest = await save_head(owner, wf_def_id, definition_yaml())
    args = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}, "idempotencyKey": "one-key"}
    receipts = await _race(caller, admin, database_url, [args] * RACERS)
    assert {r["workflowInstanceId"] for r in receipts} == {receipts[0]["workflowInstanceId"]}
    assert {r["state"] for r in receipts} == {"ACCEPTED"}
    assert {r["definitionDigest"] for r in receipts} == {digest}
    assert {r["submittedAt"] for r in receipts} == {receipts[0]["submittedAt"]}
    assert await _counts(admin) == {
        "runs": 1,
        "tasks": 1,
        "owners": 1,
        "authorities": 1,
        "specs": 1,
        "reservations": 1,
    }


@pytest.mark.requirement("000:Admission")
async def test_starts_of_distinct_keys_at_once_are_all_admitted(
    owner: McpTestClient, caller: McpTestClient, admin: Admin, database_url: str
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    calls = [
        {"wfDefId": wf_def_id, "input": {"claimId": f"C-{n}"}, "idempotencyKey": f"key-{n}"}
        for n in range(RACERS)
    ]
    receipts = await _race(caller, admin, database_url, calls)
    assert len({r["workflowInstanceId"] for r in receipts}) == RACERS
    assert {r["state"] for r in receipts} == {"ACCEPTED"}
    assert await _counts(admin) == {
        "runs": RACERS,
        "tasks": RACERS,
        "owners": RACERS,
        "authorities": RACERS,
        "specs": RACERS,
        "reservations": RACERS,
    }
