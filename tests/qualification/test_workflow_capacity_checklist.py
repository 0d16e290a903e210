"""Seed 000 Qualification Checklist item 32 (admission limits) on the live service.

Runs are held at the backend, so "in flight" is a fact the test arranged, not a race it hopes
to win; parallel admissions really race over HTTP against the service process.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.invocation import refused
from tests.support.live_stack import QualStack
from tests.support.live_tools import get_definition, invoke, limits, publish_live_tool, runs_of
from tests.support.mcp import McpTestClient

pytestmark = [pytest.mark.requirement("000:Qualification Checklist"), pytest.mark.timeout(60)]

CONCURRENT_LIMIT = "the Tool's admission limit (concurrent runs) is reached"


async def test_item_32a_the_concurrent_limit_refuses_with_retry_after_and_re_attaches_do_not_count(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """32: "Concurrent ... limits return WORKFLOW_CAPACITY_EXHAUSTED with retryAfterMs,
    re-attaches do not count, ..." """
    uri = qual_stack.unique_path("item32a")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), syncWaitMs=500, admissionLimits=limits(2, 2, 120, 10)
    )
    qual_stack.backend.hold(uri)
    try:
        first = refused(await invoke(caller, tool, {"claimId": "C-1"}), "WORKFLOW_TIMEOUT")
        refused(await invoke(caller, tool, {"claimId": "C-2"}), "WORKFLOW_TIMEOUT")
        full = refused(
            await invoke(caller, tool, {"claimId": "C-3"}), "WORKFLOW_CAPACITY_EXHAUSTED"
        )
        assert full["status"] == "rejected"
        assert full["error"]["message"] == CONCURRENT_LIMIT
        assert full["error"]["retryable"] is True and full["error"]["retryAfterMs"] > 0
        assert "workflowInstanceId" not in full
        # The same call as the first re-attaches to its run: not a start, not refused.
        again = refused(await invoke(caller, tool, {"claimId": "C-1"}), "WORKFLOW_TIMEOUT")
        assert again["workflowInstanceId"] == first["workflowInstanceId"]
    finally:
        qual_stack.backend.release(uri)
    assert await qual_stack.count(*runs_of(tool)) == 2


async def test_item_32b_the_per_minute_limit_refuses_with_retry_after(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """32: "... per-minute limits return WORKFLOW_CAPACITY_EXHAUSTED with retryAfterMs ..." """
    uri = qual_stack.unique_path("item32b")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), admissionLimits=limits(20, 2, 2, 2)
    )
    for n in (1, 2):
        assert (await invoke(caller, tool, {"claimId": f"C-{n}"}))["isError"] is False
    body = refused(await invoke(caller, tool, {"claimId": "C-3"}), "WORKFLOW_CAPACITY_EXHAUSTED")
    assert "starts per minute" in body["error"]["message"]
    assert 0 < body["error"]["retryAfterMs"] <= 60000
    assert await qual_stack.count(*runs_of(tool)) == 2


async def test_item_32c_parallel_admissions_cannot_exceed_the_cap(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """32: "... and parallel admissions cannot exceed the cap." """
    uri = qual_stack.unique_path("item32c")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), syncWaitMs=500, admissionLimits=limits(2, 2, 120, 10)
    )
    qual_stack.backend.hold(uri)
    try:
        results = await asyncio.gather(
            *(invoke(caller, tool, {"claimId": f"C-{n}"}) for n in range(8))
        )
    finally:
        qual_stack.backend.release(uri)
    codes = sorted(result["structuredContent"]["error"]["code"] for result in results)
    assert codes == ["WORKFLOW_CAPACITY_EXHAUSTED"] * 6 + ["WORKFLOW_TIMEOUT"] * 2
    assert await qual_stack.count(*runs_of(tool)) == 2
