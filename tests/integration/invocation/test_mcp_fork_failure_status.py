"""A failed fork's branch outcomes through POST /mcp: workflow_get_status and the result tools."""

from __future__ import annotations

import pytest

from tests.support.binding_builders import new_id
from tests.support.invocation import ok, refused, save_head
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Phase 2 exit gates")


def _raising(name: str, status: int) -> str:
    return (
        f"          - {name}:\n"
        "              raise:\n"
        "                error:\n"
        f"                  type: https://errors.example.com/{name}\n"
        f"                  status: {status}\n"
    )


FORK = (
    "document:\n"
    '  dsl: "1.0.3"\n'
    "  namespace: claims\n"
    "  name: summarize-claim\n"
    '  version: "1.2.0"\n'
    "do:\n"
    "  - both:\n"
    "      fork:\n"
    "        branches:\n" + _raising("first", 502) + _raising("second", 500)
)


async def test_the_status_of_a_failed_fork_lists_every_branchs_outcome(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, FORK)
    started = ok(await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    handle = {"workflowInstanceId": started["workflowInstanceId"]}
    failed = refused(await caller.call_tool("workflow_wait_result", handle), "WORKFLOW_TASK_FAILED")
    status = ok(await caller.call_tool("workflow_get_status", handle))
    assert status["state"] == "FAILED"
    details = status["error"]["details"]
    assert details["instance"] == "/do/0/both/fork/branches/0/first"
    [fork] = details["forks"]
    assert fork["task"] == "/do/0/both"
    first, second = fork["branches"]
    assert (first["name"], first["outcome"], first["error"]["status"]) == ("first", "failed", 502)
    # The second branch either failed or was cancelled: it is listed either way.
    assert second["name"] == "second" and second["outcome"] in ("failed", "cancelled")
    assert failed["error"]["details"]["forks"] == details["forks"]
