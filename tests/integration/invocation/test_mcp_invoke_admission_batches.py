"""A busy Tool's admissions in batches (migration 0084, runtime.admission.batches).

With one admission statement in flight per Tool, the Tool's next calls wait in the process and
then go as one statement: each gets the answer it would get alone (its own run, an attach to a
run of the same batch, a refusal), a batch holds the Tool's head until it commits (a revoke
waits for all of it), and a batch that fails goes again without losing or doubling a call.
The Tool's admission lock is held from a superuser session so the calls pile up for certain.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from runtime.admission import Admission, CapacitySettings
from runtime.collaborators import Services
from runtime.invocation import store
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from runtime.telemetry import metrics
from tests.integration.conftest import app_on_pool
from tests.integration.invocation.test_mcp_invoke_admission_races import (
    ADMITTED,
    ADVISORY_WAITERS,
    OPEN,
    ROW_WAITERS,
    Admin,
    admission_lock_held,
    code_of,
    runs_of,
    until,
)
from tests.support.binding_builders import HOST
from tests.support.invocation import Tool, client, invoke_args, ok, publish_tool, revoke_args
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Concurrency and rate limits")

# The Tool's calls waiting behind the first one, to go as one batch.
BEHIND = 5
BATCH_WAITERS = (
    "SELECT count(*) AS n FROM pg_stat_activity"
    " WHERE query LIKE '%%workflow_admit_invoke_batch(%%' AND wait_event_type = 'Lock'"
    " AND pid <> pg_backend_pid()"
)
ALONE_WAITER = (
    "SELECT pid FROM pg_stat_activity"
    " WHERE query LIKE '%%workflow_admit_invoke_v2(%%' AND wait_event_type = 'Lock'"
    " AND pid <> pg_backend_pid()"
)
BATCH_WAITER = ALONE_WAITER.replace("workflow_admit_invoke_v2", "workflow_admit_invoke_batch")


@dataclasses.dataclass(frozen=True)
class Busy:
    """An app on a wide pool whose Tools have one admission statement in flight at a time."""

    http: httpx.AsyncClient
    database: Database
    admission: Admission

    def waiting(self, tool: Tool) -> int:
        return self.admission.batcher(self.database).waiting((HOST, tool.tool_id))


@pytest.fixture
async def busy(services: Services, database_url: str) -> AsyncIterator[Busy]:
    services.admission.configure(CapacitySettings(admission_statements_per_tool=1))
    async with app_on_pool(services, database_url, 8, 16) as (http, database):
        yield Busy(http, database, services.admission)


def _statements(calls: int) -> float:
    return metrics.ADMISSION_STATEMENTS.labels(str(calls))._value.get()


async def _pid(admin: Admin, query: str) -> int:
    row = await (await admin.execute(query)).fetchone()
    assert row is not None, query
    return int(row["pid"])


async def _terminate(admin: Admin, query: str) -> None:
    pid = await _pid(admin, query)
    await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


async def _pile(
    busy: Busy, admin: Admin, tool: Tool, callers: list[dict[str, Any]], caller: McpTestClient
) -> list[asyncio.Task[dict[str, Any]]]:
    """The first call alone on the held lock, the others waiting behind it in the process."""
    first = asyncio.create_task(caller.call_tool("workflow_invoke", callers[0]))
    await until(admin, ADVISORY_WAITERS, 1)
    rest = [asyncio.create_task(caller.call_tool("workflow_invoke", args)) for args in callers[1:]]
    await wait_until(
        lambda: _true(busy.waiting(tool) == len(rest)), what="the calls waiting behind the first"
    )
    return [first, *rest]


async def _true(value: bool) -> bool:
    return value


def _numbered(tool: Tool, prefix: str, count: int) -> list[dict[str, Any]]:
    return [invoke_args(tool, {"claimId": f"{prefix}-{n}"}) for n in range(count)]


async def test_calls_waiting_for_a_busy_tool_go_as_one_batch_each_with_its_own_run(
    owner: McpTestClient, busy: Busy, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(busy.http, dev_identity, "batch-caller")
    batches_before = _statements(BEHIND)
    async with asyncio.timeout(30):
        async with admission_lock_held(admin, tool):
            calls = await _pile(busy, admin, tool, _numbered(tool, "b", BEHIND + 1), caller)
        results = await asyncio.gather(*calls)
    assert [code_of(result) for result in results] == [ADMITTED] * (BEHIND + 1)
    instances = {result["structuredContent"]["workflowInstanceId"] for result in results}
    assert len(instances) == BEHIND + 1
    assert {run["process_id"] for run in await runs_of(admin, tool)} == instances
    assert _statements(BEHIND) == batches_before + 1


async def test_identical_calls_in_one_batch_admit_one_run_and_the_other_attaches(
    owner: McpTestClient, busy: Busy, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(
        owner,
        syncWaitMs=50,
        admissionLimits=OPEN,
        idempotencyPolicy={"kind": "derived", "resultReplayMs": 0},
    )
    caller = client(busy.http, dev_identity, "same-caller")
    same = invoke_args(tool, {"claimId": "the-same"})
    async with asyncio.timeout(30):
        async with admission_lock_held(admin, tool):
            calls = await _pile(
                busy, admin, tool, [invoke_args(tool, {"claimId": "other"}), same, same], caller
            )
        results = await asyncio.gather(*calls)
    assert [code_of(result) for result in results] == [ADMITTED] * 3
    first, twin, other_twin = (result["structuredContent"] for result in results)
    assert twin["workflowInstanceId"] == other_twin["workflowInstanceId"]
    assert twin["workflowInstanceId"] != first["workflowInstanceId"]
    assert len(await runs_of(admin, tool)) == 2


@pytest.mark.requirement("000:Concurrency")
async def test_a_batch_holding_the_head_is_admitted_whole_before_a_revoke_and_none_after_it(
    owner: McpTestClient, busy: Busy, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(busy.http, dev_identity, "revoke-racer")
    revoke = revoke_args(tool)
    async with asyncio.timeout(30):
        async with admission_lock_held(admin, tool):
            first, *batched = await _pile(
                busy, admin, tool, _numbered(tool, "r", BEHIND + 1), caller
            )
            # The first call's connection dies: the calls behind it go as one batch, which
            # takes the head's share lock and waits for the Tool's lock (the first call's
            # retry waits behind the batch in the process).
            await _terminate(admin, ALONE_WAITER)
            await until(admin, BATCH_WAITERS, 1)
            moving = asyncio.create_task(owner.call_tool("workflow_binding_revoke", revoke))
            await until(admin, ROW_WAITERS, 1, unless=moving)
            await asyncio.sleep(0.2)
            assert not moving.done(), "the revoke did not wait for the batch in flight"
        ok(await moving)
        stored = len(await runs_of(admin, tool))
        results = await asyncio.gather(*batched)
        retried = await first
    assert [code_of(result) for result in results] == [ADMITTED] * BEHIND
    assert code_of(retried) in (ADMITTED, "WORKFLOW_POLICY_DENIED")
    assert stored == BEHIND + (code_of(retried) == ADMITTED)
    after = await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "late"}))
    assert code_of(after) == "WORKFLOW_POLICY_DENIED"
    assert len(await runs_of(admin, tool)) == stored


async def test_a_batch_whose_connection_dies_admits_each_of_its_calls_once_on_the_retry(
    owner: McpTestClient, busy: Busy, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(busy.http, dev_identity, "lost-batch")
    async with asyncio.timeout(30):
        async with admission_lock_held(admin, tool):
            calls = await _pile(busy, admin, tool, _numbered(tool, "l", BEHIND + 1), caller)
            await _terminate(admin, ALONE_WAITER)
            await until(admin, BATCH_WAITERS, 1)
            await _terminate(admin, BATCH_WAITER)
            # Every call tries once more; some reach the held lock again before it is let go.
            await until(admin, ADVISORY_WAITERS, 1)
            await asyncio.sleep(0.1)
        results = await asyncio.gather(*calls)
    assert [code_of(result) for result in results] == [ADMITTED] * (BEHIND + 1)
    instances = {result["structuredContent"]["workflowInstanceId"] for result in results}
    assert len(instances) == BEHIND + 1
    assert {run["process_id"] for run in await runs_of(admin, tool)} == instances


async def test_a_batch_that_fails_for_one_call_goes_again_alone_and_admits_the_others(
    owner: McpTestClient,
    busy: Busy,
    dev_identity: DevIdentity,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(busy.http, dev_identity, "failed-batch")
    sent: list[int] = []

    async def failing(conn: Any, calls: list[store.AdmitParams]) -> Any:
        sent.append(len(calls))
        raise psycopg.errors.DataError("one call of the batch is unstorable")

    monkeypatch.setattr(store, "admit_invoke_batch", failing)
    async with asyncio.timeout(30):
        async with admission_lock_held(admin, tool):
            calls = await _pile(busy, admin, tool, _numbered(tool, "f", BEHIND + 1), caller)
        results = await asyncio.gather(*calls)
    assert sent == [BEHIND], sent
    assert [code_of(result) for result in results] == [ADMITTED] * (BEHIND + 1)
    assert len(await runs_of(admin, tool)) == BEHIND + 1
