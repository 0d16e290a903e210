"""The console's pages over HTTP: sign-in, session cookie, CSRF, the same tool rules as MCP."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST
from tests.support.console import ConsoleClient, console_client, csrf_of
from tests.support.human_tasks import approval_yaml, started_waiting
from tests.support.invocation import client, ok
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("issue-39:console")


@pytest.fixture
async def browser_http(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    async with console_client(app) as http:
        yield http


def _token(identity: DevIdentity, user_id: str, roles: tuple[str, ...]) -> str:
    return identity.user_token(host_id=HOST, user_id=user_id, roles=roles, client_id="portal")


async def _signed_in(app: Litestar, identity: DevIdentity, user_id: str, *roles: str) -> Any:
    http = console_client(app)
    person = ConsoleClient(http)
    answer = await person.sign_in(_token(identity, user_id, roles))
    assert answer.status_code == 303 and answer.headers["location"] == "/console/inbox"
    return person


async def test_sign_in_sets_a_sealed_httponly_strict_cookie_and_no_token_in_pages(
    browser_http: httpx.AsyncClient, dev_identity: DevIdentity, caplog: pytest.LogCaptureFixture
) -> None:
    token = _token(dev_identity, "ann", ("approver",))
    person = ConsoleClient(browser_http)
    with caplog.at_level(logging.DEBUG):
        answer = await person.sign_in(token)
    assert answer.status_code == 303
    cookie = next(
        v
        for k, v in answer.headers.multi_items()
        if k == "set-cookie" and v.startswith("wf_console=")
    )
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/console"} <= attributes
    assert token not in cookie and token.split(".")[1] not in cookie
    inbox = await person.get("/console/inbox")
    assert inbox.status_code == 200 and "ann" in inbox.text
    assert token not in inbox.text and token not in str(inbox.url)
    assert all(token not in record.getMessage() for record in caplog.records)


async def test_a_refused_token_signs_nobody_in_and_is_not_echoed(
    browser_http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    expired = dev_identity.user_token(host_id=HOST, user_id="ann", expired=True)
    answer = await ConsoleClient(browser_http).sign_in(expired)
    assert answer.status_code == 401 and "That token was refused" in answer.text
    assert expired not in answer.text and "wf_console=" not in answer.headers.get("set-cookie", "")
    assert (await browser_http.get("/console/inbox")).headers["location"] == "/console/sign-in"


async def test_a_post_without_the_sessions_csrf_token_is_refused_and_changes_nothing(
    app: Litestar,
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    ann = await _signed_in(app, dev_identity, "ann", "approver")
    form = {"value": "APPROVED", "operationId": str(uuid.uuid4())}
    path = f"/console/tasks/{task['taskId']}"
    for fields in (form, {**form, "csrf": "hmac-sha256:dev-1:" + "0" * 64}):
        refused = await ann.http.post(path, data=fields)
        assert refused.status_code == 403 and "nothing was changed" in refused.text
    # A page of another origin cannot post even with a token (the browser names its origin).
    page = (await ann.get(path)).text
    cross = await ann.http.post(
        path, data={**form, "csrf": csrf_of(page)}, headers={"Origin": "https://evil.example"}
    )
    assert cross.status_code == 403
    listed = ok(await approver.call_tool("workflow_task_list", {"workflowInstanceId": instance}))
    assert [t["state"] for t in listed["tasks"]] == ["open"]


async def test_the_inbox_shows_the_assignees_task_and_an_answer_completes_the_run(
    app: Litestar,
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    ann = await _signed_in(app, dev_identity, "ann", "approver")
    sam = await _signed_in(app, dev_identity, "sam", "clerk")
    assert task["taskId"] in (await ann.get("/console/inbox")).text
    assert task["taskId"] not in (await sam.get("/console/inbox")).text
    path = f"/console/tasks/{task['taskId']}"
    assert (await sam.get(path)).status_code == 404
    refused = await ann.submit(path, path, {"value": "MAYBE"})
    assert refused.status_code == 422 and "Your answer was not accepted" in refused.text
    assert "WORKFLOW_INPUT_INVALID" in refused.text
    answered = await ann.submit(path, path, {"value": "APPROVED", "comment": "fine"})
    assert answered.status_code == 303
    assert "answered" in (await ann.get(answered.headers["location"])).text

    async def completed() -> bool:
        status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
        return bool(status["state"] == "COMPLETED")

    await wait_until(completed, what="the run completed by the console's answer")
    result = ok(await caller.call_tool("workflow_get_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"decision": "APPROVED", "by": "ann"}


async def test_the_run_page_is_the_starters_alone(
    app: Litestar,
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, _ = await started_waiting(owner, caller, approver, approval_yaml())
    starter = await _signed_in(app, dev_identity, "caller-1", "admin", "workflow-admin")
    other = await _signed_in(app, dev_identity, "caller-2", "admin", "workflow-admin")
    runs = await starter.get("/console/runs")
    assert instance in runs.text
    page = await starter.get(f"/console/runs/{instance}")
    assert page.status_code == 200 and "WAITING" in page.text
    assert instance not in (await other.get("/console/runs")).text
    assert (await other.get(f"/console/runs/{instance}")).status_code == 404


async def test_pages_need_a_session_and_a_post_without_one_is_refused(
    browser_http: httpx.AsyncClient,
) -> None:
    for path in ("/console/inbox", "/console/runs", "/console/approvals", "/console/tools"):
        answer = await browser_http.get(path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
    task = f"/console/tasks/{uuid.uuid4()}"
    refused = await browser_http.post(task, data={"value": "APPROVED", "csrf": "x"})
    assert refused.status_code == 403 and "nothing was changed" in refused.text
