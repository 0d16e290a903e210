"""The console in a real browser (issue 39): headless chromium, driven by Playwright.

Sign in, see an assigned task and not another role's, answer it and watch the run complete; an
invalid answer shows its error and changes nothing; an owner approves a pending revision that a
non-owner cannot see; a failed step is shown with its error; a form without the session's CSRF
token is refused. The inbox and run screenshots of the README are taken here (CONSOLE_SCREENSHOTS=1
writes them to docs/).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.browser.conftest import serious_violations
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
from tests.support.human_tasks import approval_yaml, start_run, started_waiting
from tests.support.invocation import FAILING_TASK, client, ok
from tests.support.mcp import McpTestClient
from tests.support.publication import versioned
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("issue-39:console")

playwright_api = pytest.importorskip(
    "playwright.async_api", reason="Playwright for Python is not installed"
)
expect = playwright_api.expect

DOCS = Path(__file__).resolve().parents[2] / "docs"
PHONE = {"width": 375, "height": 740}
# Long enough for a loaded two-core machine; every wait below ends as soon as its page says so.
WAIT_MS = 20_000


def _screenshot_dir(tmp_path: Path) -> Path:
    """docs/ when CONSOLE_SCREENSHOTS=1 (to refresh the README's pictures), else the test's tmp."""
    return DOCS if os.environ.get("CONSOLE_SCREENSHOTS") == "1" else tmp_path


def _token(identity: DevIdentity, user_id: str, *roles: str) -> str:
    return identity.user_token(host_id=HOST, user_id=user_id, roles=roles, client_id="portal")


@pytest.fixture
async def people(browser: Any, console_url: str) -> AsyncIterator[list[Any]]:
    """Browser contexts opened by the test (each its own cookie jar), closed after it."""
    opened: list[Any] = []
    yield opened
    for context in opened:
        await context.close()


async def _sign_in(browser: Any, people: list[Any], url: str, token: str, **options: Any) -> Any:
    """A new browser context signed in through the development sign-in form; its page."""
    context = await browser.new_context(base_url=url, **options)
    people.append(context)
    page = await context.new_page()
    await page.goto("/console/sign-in")
    await page.get_by_label("Development user token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(re.compile(r"/console/inbox$"), timeout=WAIT_MS)
    return page


async def _task_state(approver: McpTestClient, instance: str) -> list[str]:
    listed = ok(await approver.call_tool("workflow_task_list", {"workflowInstanceId": instance}))
    open_or_not = [task["state"] for task in listed["tasks"]]
    return open_or_not


async def test_an_assignee_answers_in_the_browser_and_watches_the_run_complete(
    browser: Any,
    console_url: str,
    people: list[Any],
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
    tmp_path: Path,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, _ = await started_waiting(owner, caller, approver, approval_yaml())
    shots = _screenshot_dir(tmp_path)
    # The starter opens the waiting run's page and keeps it open.
    starter = await _sign_in(
        browser,
        people,
        console_url,
        dev_identity.user_token(
            host_id=HOST, user_id="caller-1", roles=("admin", "workflow-admin"), client_id="portal"
        ),
    )
    await starter.get_by_role("link", name="Runs").click()
    await starter.get_by_role("link", name=instance).click()
    await expect(starter.locator("#run-state-value")).to_have_text("WAITING")
    ann = await _sign_in(browser, people, console_url, _token(dev_identity, "ann", "approver"))
    sam = await _sign_in(browser, people, console_url, _token(dev_identity, "sam", "clerk"))
    # Ann, an approver, sees the task; Sam, a clerk, sees an empty inbox.
    await expect(ann.get_by_role("link", name="requestApproval")).to_be_visible()
    await expect(sam.get_by_text("No open tasks are assigned to you.")).to_be_visible()
    await ann.screenshot(path=str(shots / "console-inbox.png"), full_page=True)
    await ann.get_by_role("link", name="requestApproval").click()
    await expect(ann.get_by_role("heading", name="Approve the claim?")).to_be_visible()
    await ann.get_by_label("Comment (optional)").fill("within budget")
    await ann.get_by_role("button", name="Approve").click()
    await expect(ann.get_by_text("Your answer was recorded.")).to_be_visible(timeout=WAIT_MS)
    await expect(ann.locator("#task-state")).to_have_text("answered")
    # The starter's page, never reloaded, refreshes itself while the run is live: it completes.
    await expect(starter.locator("#run-state-value")).to_have_text("COMPLETED", timeout=WAIT_MS)
    await expect(starter.locator("#run-output")).to_contain_text('"by": "ann"')
    await expect(starter.get_by_role("button", name="Cancel this run")).to_have_count(0)
    await starter.screenshot(path=str(shots / "console-run.png"), full_page=True)


async def test_an_invalid_answer_is_shown_in_words_and_changes_nothing(
    browser: Any,
    console_url: str,
    people: list[Any],
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    ann = await _sign_in(browser, people, console_url, _token(dev_identity, "ann", "approver"))
    await ann.goto(f"/console/tasks/{task['taskId']}")
    # A tampered button: the service, not the page, decides what an answer may be.
    await ann.get_by_role("button", name="Approve").evaluate("b => b.value = 'MAYBE'")
    await ann.get_by_role("button", name="Approve").click()
    alert = ann.locator("#answer-error")
    await expect(alert).to_contain_text("Your answer was not accepted", timeout=WAIT_MS)
    await expect(alert).to_contain_text("WORKFLOW_INPUT_INVALID")
    await expect(ann.locator("#task-state")).to_have_text("open")
    assert await _task_state(approver, instance) == ["open"]
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] == "WAITING"


async def test_a_form_without_the_sessions_csrf_token_is_refused(
    browser: Any,
    console_url: str,
    people: list[Any],
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    ann = await _sign_in(browser, people, console_url, _token(dev_identity, "ann", "approver"))
    await ann.goto(f"/console/tasks/{task['taskId']}")
    answer_form = ann.locator(f"form[action='/console/tasks/{task['taskId']}']")
    await answer_form.locator("input[name=csrf]").evaluate("i => i.remove()")
    await ann.get_by_role("button", name="Approve").click()
    await expect(ann.get_by_role("heading", name="Form refused")).to_be_visible(timeout=WAIT_MS)
    # The same POST with the session cookie but no token, as another page's script would send.
    answer = await ann.context.request.post(
        f"{console_url}/console/tasks/{task['taskId']}",
        form={"value": "APPROVED", "operationId": new_id()},
    )
    assert answer.status == 403
    assert await _task_state(approver, instance) == ["open"]


async def test_an_owner_approves_a_pending_revision_a_non_owner_cannot_see(
    browser: Any,
    console_url: str,
    people: list[Any],
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    actors = actors_of(http, dev_identity)
    text = versioned(definition_yaml(), "1.2.0")
    wf_def_id = await publish_definition_text(actors.owner, text)
    tool_id = new_id()
    active = binding(wf_def_id, tool_id, text)
    first = binding_ok(await publish(actors.owner, publish_args(active, 0)))
    slower = binding(wf_def_id, tool_id, text, totalDeadlineMs=25000)
    version = first["aggregateVersion"]
    pending = binding_ok(await publish(actors.author, publish_args(slower, version)))
    assert pending["status"] == "pendingApproval"
    # A reviewer with no relationship to the Tool (not an admin, who may read any Tool to retire
    # it, exactly as workflow_binding_get allows on MCP).
    olga = _token(dev_identity, "olga", "workflow-admin")
    stranger = await _sign_in(browser, people, console_url, olga)
    await stranger.get_by_role("link", name="Approvals").click()
    await expect(stranger.get_by_text("No Tool revision waits for your approval.")).to_be_visible()
    refused = await stranger.goto(f"/console/tools/{tool_id}?binding={pending['bindingId']}")
    assert refused is not None and refused.status in (403, 404)
    await expect(stranger.get_by_text("Approve", exact=True)).to_have_count(0)
    owner = await _sign_in(
        browser, people, console_url, _token(dev_identity, OWNER, "admin"), bypass_csp=True
    )
    await owner.get_by_role("link", name="Approvals").click()
    await owner.locator("#pending").get_by_role("link").first.click()
    changes = owner.locator("#changes")
    await expect(changes).to_contain_text("/totalDeadlineMs")
    await expect(changes).to_contain_text("25000")
    await expect(owner.locator("#limits")).to_contain_text("/runtimeBounds/")
    assert await serious_violations(owner) == []
    await owner.get_by_role("button", name="Approve", exact=True).click()
    await expect(owner.get_by_text("The revision was approved")).to_be_visible(timeout=WAIT_MS)
    await expect(owner.locator("#revision-status")).to_have_text("active")
    got = binding_ok(
        await actors.owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id})
    )
    assert got["activeBindingId"] == pending["bindingId"]


async def test_a_failed_step_is_shown_with_its_error(
    browser: Any,
    console_url: str,
    people: list[Any],
    owner: McpTestClient,
    caller: McpTestClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    text = (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: failing-claim\n'
        '  version: "1.0.0"\ndo:\n' + FAILING_TASK
    )
    instance = await start_run(owner, caller, text)

    async def failed() -> bool:
        status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
        return bool(status["state"] == "FAILED")

    await wait_until(failed, what="the run failed")
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    starter = await _sign_in(
        browser,
        people,
        console_url,
        dev_identity.user_token(
            host_id=HOST, user_id="caller-1", roles=("admin", "workflow-admin"), client_id="portal"
        ),
    )
    await starter.goto(f"/console/runs/{instance}")
    await expect(starter.locator("#run-state-value")).to_have_text("FAILED")
    await expect(starter.locator("#run-error")).to_contain_text(status["error"]["code"])
    await expect(starter.locator("#run-error")).to_contain_text(status["error"]["message"])
    failed_row = starter.locator("#steps tbody tr").filter(has_text="failed")
    await expect(failed_row).to_have_count(1)
    # The step's own row names its error and its attempts.
    await expect(failed_row).to_contain_text(status["error"]["message"])


async def test_pages_read_without_javascript_fit_a_phone_and_pass_axe(
    browser: Any,
    console_url: str,
    people: list[Any],
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver", "workflow-admin"))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    # axe-core (its script is injected, so this context lets it past the page's CSP), on every
    # page with data in it: the starter also holds the approver role, so the open task too.
    checker = await _sign_in(
        browser,
        people,
        console_url,
        _token(dev_identity, "caller-1", "admin", "workflow-admin", "approver"),
        bypass_csp=True,
    )
    for path in (
        "/console/inbox",
        f"/console/tasks/{task['taskId']}",
        "/console/runs",
        f"/console/runs/{instance}",
        "/console/approvals",
        "/console/tools",
    ):
        await checker.goto(path)
        assert await serious_violations(checker) == [], path
    # The run page's tables and digests at phone width: they scroll or wrap inside the page.
    await checker.set_viewport_size(PHONE)
    await checker.goto(f"/console/runs/{instance}")
    assert await checker.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    # JavaScript off, phone width: every page reads, and the answer is a plain POST + redirect.
    ann = await _sign_in(
        browser,
        people,
        console_url,
        _token(dev_identity, "ann", "approver"),
        java_script_enabled=False,
        viewport=PHONE,
    )
    for path in ("/console/inbox", f"/console/tasks/{task['taskId']}", "/console/approvals"):
        await ann.goto(path)
        width = await ann.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (path, width)
    await ann.goto(f"/console/tasks/{task['taskId']}")
    # Keyboard: the first Tab reaches the skip link.
    await ann.keyboard.press("Tab")
    await expect(ann.get_by_role("link", name="Skip to content")).to_be_focused()
    # Keyboard only: Tab through the page to the Reject button, then Enter.
    reject = ann.get_by_role("button", name="Reject")
    for _ in range(30):
        if await reject.evaluate("b => b === document.activeElement"):
            break
        await ann.keyboard.press("Tab")
    await expect(reject).to_be_focused()
    await ann.keyboard.press("Enter")
    await expect(ann.get_by_text("Your answer was recorded.")).to_be_visible(timeout=WAIT_MS)
    signed_out = await browser.new_context(base_url=console_url, bypass_csp=True)
    people.append(signed_out)
    page = await signed_out.new_page()
    await page.goto("/console/sign-in")
    assert await serious_violations(page) == []


@pytest.mark.parametrize("script", [True, False], ids=["htmx", "no-javascript"])
async def test_sign_out_ends_the_session_on_the_server_back_and_reload_show_sign_in(
    browser: Any, console_url: str, people: list[Any], dev_identity: DevIdentity, script: bool
) -> None:
    token = _token(dev_identity, "ann", "approver")
    ann = await _sign_in(browser, people, console_url, token, java_script_enabled=script)
    await ann.get_by_role("link", name="Runs").click()
    await expect(ann).to_have_url(re.compile(r"/console/runs$"), timeout=WAIT_MS)
    copied = [c for c in await ann.context.cookies() if c["name"] == "wf_console"]
    assert len(copied) == 1
    await ann.get_by_role("button", name="Sign out").click()
    sign_in = ann.get_by_role("button", name="Sign in")
    await expect(sign_in).to_be_visible(timeout=WAIT_MS)
    # Back to the page seen while signed in, and a reload of it: the sign-in page each time.
    await ann.go_back()
    await expect(ann).to_have_url(re.compile(r"/console/sign-in$"), timeout=WAIT_MS)
    await expect(sign_in).to_be_visible()
    await ann.reload()
    await expect(sign_in).to_be_visible(timeout=WAIT_MS)
    # The session cookie copied before sign-out, in another browser: refused there too.
    thief = await browser.new_context(base_url=console_url)
    people.append(thief)
    await thief.add_cookies(copied)
    page = await thief.new_page()
    await page.goto("/console/inbox")
    await expect(page).to_have_url(re.compile(r"/console/sign-in$"), timeout=WAIT_MS)
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
