"""The console's other actions over HTTP: an input ask, cancel, paging, revoke and roll back."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
    HOST,
    OWNER,
    binding,
    definition_yaml,
    new_id,
    publish_args,
)
from tests.support.binding_mcp import actors_of, publish, publish_definition_text
from tests.support.binding_mcp import ok as binding_ok
from tests.support.console import ConsoleClient, console_client, hidden_fields
from tests.support.human_tasks import approval_yaml, input_ask_yaml, started_waiting
from tests.support.invocation import client, ok, save_head
from tests.support.mcp import McpTestClient
from tests.support.publication import versioned
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("issue-39:console")


@pytest.fixture
async def signed_in(app: Litestar, dev_identity: DevIdentity) -> AsyncIterator[Any]:
    opened: list[httpx.AsyncClient] = []

    async def sign_in(user_id: str, *roles: str) -> ConsoleClient:
        http = console_client(app)
        opened.append(http)
        person = ConsoleClient(http)
        token = dev_identity.user_token(
            host_id=HOST, user_id=user_id, roles=roles, client_id="portal"
        )
        assert (await person.sign_in(token)).status_code == 303
        return person

    yield sign_in
    for http in opened:
        await http.aclose()


async def test_an_input_ask_takes_typed_text_and_refuses_a_missing_required_value(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    signed_in: Any,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, input_ask_yaml())
    ann = await signed_in("ann", "approver")
    path = f"/console/tasks/{task['taskId']}"
    page = (await ann.get(path)).text
    assert re.search(r'<label for="value">Answer \(required\)</label>', page)
    assert re.search(r'<input type="text" id="value" name="value"[^>]* required', page)
    missing = await ann.submit(path, path, {"value": ""})
    assert missing.status_code == 422 and "value is required" in missing.text
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] == "WAITING"
    assert (await ann.submit(path, path, {"value": "The courier lost it."})).status_code == 303
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"reply": "The courier lost it.", "by": "ann"}


async def test_the_starter_cancels_a_waiting_run_from_its_page(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    signed_in: Any,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, _ = await started_waiting(owner, caller, approver, approval_yaml())
    starter = await signed_in("caller-1", "admin", "workflow-admin")
    path = f"/console/runs/{instance}"
    cancelled = await starter.submit(path, f"{path}/cancel", {"reason": "no longer needed"})
    assert cancelled.status_code == 303
    page = await starter.get(cancelled.headers["location"])
    assert "The run was cancelled." in page.text and "CANCELLED" in page.text
    assert "Cancel this run" not in page.text
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] == "CANCELLED"


async def test_the_runs_list_pages_newest_first(
    owner: McpTestClient, caller: McpTestClient, signed_in: Any
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, approval_yaml())
    started = [
        ok(await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))[
            "workflowInstanceId"
        ]
        for _ in range(27)
    ]
    starter = await signed_in("caller-1", "admin", "workflow-admin")
    first = (await starter.get("/console/runs")).text
    shown = re.findall(r'href="/console/runs/([0-9a-f-]{36})"', first)
    assert shown == list(reversed(started))[:25]
    older = re.search(r'href="(/console/runs\?before=[^"]+)"', first)
    assert older is not None
    second = (await starter.get(older.group(1))).text
    assert re.findall(r'href="/console/runs/([0-9a-f-]{36})"', second) == started[1::-1]
    assert "Older runs" not in second


async def test_the_owner_revokes_then_rolls_back_through_the_tool_page(
    http: httpx.AsyncClient, signed_in: Any, dev_identity: DevIdentity
) -> None:
    actors = actors_of(http, dev_identity)
    text = versioned(definition_yaml(), "1.2.0")
    wf_def_id = await publish_definition_text(actors.owner, text)
    tool_id = new_id()
    active = binding(wf_def_id, tool_id, text)
    first = binding_ok(await publish(actors.owner, publish_args(active, 0)))
    slower = binding(wf_def_id, tool_id, text, totalDeadlineMs=25000)
    second = binding_ok(
        await publish(actors.owner, publish_args(slower, first["aggregateVersion"]))
    )
    assert second["status"] == "active"
    owner = await signed_in(OWNER, "admin")
    tools = (await owner.get("/console/tools")).text
    assert f"/console/tools/{tool_id}" in tools
    path = f"/console/tools/{tool_id}"
    rolled = await owner.submit(path, f"{path}/rollback", {"comment": "too slow"})
    assert rolled.status_code == 303, re.findall(r'class="alert error"[^>]*>([^<]*)', rolled.text)
    page = (await owner.get(rolled.headers["location"])).text
    assert "The previous approved revision is active again." in page
    got = binding_ok(
        await actors.owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id})
    )
    assert got["activeBindingId"] != second["bindingId"]
    reviewed = hidden_fields((await owner.get(path)).text, f"{path}/revoke")
    revoked = await owner.submit(path, f"{path}/revoke", {"comment": "withdrawn"})
    assert revoked.status_code == 303
    assert "The active revision was revoked." in (await owner.get(revoked.headers["location"])).text
    # The same form again (a stale tab): refused in words, nothing more changes.
    stale = await owner.http.post(
        f"{path}/revoke", data={**reviewed, "operationId": new_id(), "comment": "again"}
    )
    assert stale.status_code == 422 and 'class="alert error"' in stale.text


async def test_the_inbox_pages_by_the_tools_cursor(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    signed_in: Any,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, approval_yaml())
    for _ in range(27):
        ok(await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))

    async def all_open() -> bool:
        listed = ok(await approver.call_tool("workflow_task_list", {"limit": 100}))
        return len(listed["tasks"]) == 27

    await wait_until(all_open, what="27 tasks open", within_s=30)
    ann = await signed_in("ann", "approver")
    first = (await ann.get("/console/inbox")).text
    tasks = re.findall(r'href="/console/tasks/([0-9a-f-]{36})"', first)
    following = re.search(r'href="(/console/inbox\?cursor=[^"]+)"', first)
    assert len(tasks) == 25 and following is not None
    second = (await ann.get(html.unescape(following.group(1)))).text
    rest = re.findall(r'href="/console/tasks/([0-9a-f-]{36})"', second)
    assert len(rest) == 2 and not set(rest) & set(tasks)
    assert "Next page" not in second
