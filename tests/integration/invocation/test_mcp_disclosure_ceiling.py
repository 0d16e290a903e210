"""The stored disclosure ceiling through POST /mcp (issue 42 item 6).

A run stores at acceptance what its caller's authorization let it see (its status, its
result); every later status or result read shows the intersection of that ceiling and the
reader's current authorization. Here an `auditor` may read statuses but not results, and a
`starter` may start runs: a run accepted under those narrow rights never discloses its result,
even once the same user holds workflow-admin, and one accepted under wide rights discloses
only what the reader's current rights allow.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from runtime.admission import CapacitySettings
from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from runtime.store import Database
from tests.integration.conftest import app_on_pool
from tests.integration.invocation.test_mcp_invoke_admission_batches import (
    BEHIND,
    Busy,
    _numbered,
    _pile,
)
from tests.integration.invocation.test_mcp_invoke_admission_races import (
    ADMITTED,
    OPEN,
    Admin,
    admission_lock_held,
    code_of,
)
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.invocation import (
    CALLER,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
    save_head,
)
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Phase 2 exit gates")

NARROW = ("starter", "auditor")
WIDE = ("starter", "auditor", "workflow-admin")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """auditor reads statuses only; starter may start runs (and so read their status)."""
    roles = settings.security.tool_roles
    roles["workflow_get_status"] = [*roles["workflow_get_status"], "auditor"]
    roles["workflow_start"] = [*roles["workflow_start"], "starter"]
    return settings


def _as(http: httpx.AsyncClient, identity: DevIdentity, roles: tuple[str, ...]) -> McpTestClient:
    return client(http, identity, CALLER, roles=roles)


async def _completed_start(owner: McpTestClient, starter: McpTestClient) -> dict[str, str]:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml(marker=7))
    started = ok(await starter.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    handle = {"workflowInstanceId": started["workflowInstanceId"]}

    async def completed() -> bool:
        status = ok(await starter.call_tool("workflow_get_status", handle))
        return status["state"] == "COMPLETED"

    await wait_until(completed, what="the started run to complete")
    return handle


async def _status(reader: McpTestClient, handle: dict[str, str]) -> dict[str, Any]:
    return ok(await reader.call_tool("workflow_get_status", handle))


async def test_rights_widened_after_acceptance_do_not_widen_what_the_run_discloses(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity, workers: object
) -> None:
    handle = await _completed_start(owner, _as(http, dev_identity, NARROW))
    widened = _as(http, dev_identity, WIDE)
    status = await _status(widened, handle)
    assert status["state"] == "COMPLETED" and "result" not in status
    for tool in ("workflow_get_result", "workflow_wait_result"):
        body = refused(await widened.call_tool(tool, handle), "WORKFLOW_POLICY_DENIED")
        assert "beyond what the caller may see" in body["error"]["message"]
    # The same rights at acceptance disclose the result: only the ceiling withheld it.
    wide_handle = await _completed_start(owner, widened)
    assert (await _status(widened, wide_handle))["result"]["marker"] == 7
    assert ok(await widened.call_tool("workflow_get_result", wide_handle))["output"]["marker"] == 7


async def test_rights_narrowed_after_acceptance_narrow_what_the_run_discloses(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity, workers: object
) -> None:
    handle = await _completed_start(owner, _as(http, dev_identity, WIDE))
    narrowed = _as(http, dev_identity, NARROW)
    status = await _status(narrowed, handle)
    assert status["state"] == "COMPLETED" and "result" not in status
    refused(await narrowed.call_tool("workflow_get_result", handle), "WORKFLOW_POLICY_DENIED")


async def test_a_run_whose_caller_could_see_nothing_of_it_stays_unknown_to_wider_rights(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity, db: Database
) -> None:
    # No executor: the run stays ACCEPTED; its status is what is withheld.
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    starter = _as(http, dev_identity, ("starter",))
    started = ok(await starter.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    handle = {"workflowInstanceId": started["workflowInstanceId"]}
    widened = _as(http, dev_identity, ("starter", "workflow-admin"))
    for tool in ("workflow_get_status", "workflow_get_result"):
        refused(await widened.call_tool(tool, handle), "WORKFLOW_NOT_FOUND")
    row = await _owner_record(db, handle["workflowInstanceId"])
    assert row["disclosure_ceiling"] == []


async def test_an_invoke_run_stores_its_callers_ceiling_and_discloses_no_more_later(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity, db: Database,
    workers: object,
) -> None:  # fmt: skip
    tool = await publish_tool(owner, text=definition_yaml(marker=3))
    # workflow_invoke checks no role (the Tool is the capability): an auditor calls it.
    answer = ok(await _as(http, dev_identity, ("auditor",)).call_tool(
        "workflow_invoke", invoke_args(tool)
    ))  # fmt: skip
    handle = {"workflowInstanceId": answer["workflowInstanceId"]}
    row = await _owner_record(db, handle["workflowInstanceId"])
    assert row["disclosure_ceiling"] == ["status"]
    widened = _as(http, dev_identity, ("auditor", "workflow-admin"))
    assert "result" not in await _status(widened, handle)
    refused(await widened.call_tool("workflow_get_result", handle), "WORKFLOW_POLICY_DENIED")


@pytest.fixture
async def busy(services: Services, database_url: str) -> AsyncIterator[Busy]:
    """One admission statement in flight per Tool: the Tool's next calls go as one batch."""
    services.admission.configure(CapacitySettings(admission_statements_per_tool=1))
    async with app_on_pool(services, database_url, 8, 16) as (http, database):
        yield Busy(http, database, services.admission)


async def _owner_record(db: Database, process_id: str) -> dict[str, Any]:
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT disclosure_ceiling FROM workflow_invocation_t"
            " WHERE host_id = %s AND process_id = %s",
            (HOST, process_id),
        )
        row = await cursor.fetchone()
    assert row is not None
    return dict(row)


async def test_each_call_of_a_batch_stores_its_callers_disclosure_ceiling(
    owner: McpTestClient, busy: Busy, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(busy.http, dev_identity, "ceiling-batch")  # admin, workflow-admin
    async with asyncio.timeout(30):
        async with admission_lock_held(admin, tool):
            calls = await _pile(busy, admin, tool, _numbered(tool, "c", BEHIND + 1), caller)
        results = await asyncio.gather(*calls)
    assert [code_of(result) for result in results] == [ADMITTED] * (BEHIND + 1)
    cursor = await admin.execute(
        "SELECT disclosure_ceiling FROM workflow_invocation_t WHERE tool_id = %s", (tool.tool_id,)
    )
    ceilings = [row["disclosure_ceiling"] for row in await cursor.fetchall()]
    assert ceilings == [["result", "status"]] * (BEHIND + 1)
