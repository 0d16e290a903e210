"""`workflow-mcp runs list|show|cancel` on a real test database, as an operator runs them."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime.collaborators import Services
from runtime.security import SecretToken
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, new_id
from tests.support.cli import run_command
from tests.support.execution import LocalServer, document, serving, set_tasks
from tests.support.execution_runs import start_workflow_run
from tests.support.human_tasks import approval_yaml
from tests.support.invocation import invoke_args, ok, publish_tool, save_head, until_settled
from tests.support.mcp import McpTestClient
from tests.support.telemetry import publish_fetching_tool
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]


async def _cli(database_url: str, *args: str) -> tuple[int, str, str]:
    return await run_command(*args, "--database-url", database_url)


async def _run_of(services: Services, host_id: str, token: str) -> str:
    """An admitted run that nobody executes (no executor runs in these tests)."""
    return await start_workflow_run(
        services.database,
        host_id=host_id,
        user_id="u-1",
        input={"seen": 0},
        keyring=services.keyring,
        credential=SecretToken(token),
        definition=document(set_tasks(2)),
        deadline=datetime.now(UTC) + timedelta(minutes=5),
    )


async def _listed(database_url: str, host_id: str, *extra: str) -> list[dict[str, Any]]:
    code, out, err = await _cli(database_url, "runs", "list", "--host", host_id, "--json", *extra)
    assert code == 0, err
    listed: list[dict[str, Any]] = json.loads(out)
    return listed


async def test_runs_list_shows_a_hosts_runs_and_no_other_hosts(
    services: Services, database_url: str, dev_identity: DevIdentity
) -> None:
    host, other = str(uuid.uuid4()), str(uuid.uuid4())
    token = dev_identity.user_token()
    first = await _run_of(services, host, token)
    second = await _run_of(services, host, token)
    await _run_of(services, other, token)
    listed = await _listed(database_url, host)
    assert {run["process_id"] for run in listed} == {first, second}
    assert {run["state"] for run in listed} == {"ACCEPTED"}
    assert await _listed(database_url, host, "--state", "COMPLETED") == []
    code, out, _ = await _cli(database_url, "runs", "list", "--host", host)
    assert code == 0 and first in out and out.splitlines()[0].startswith("process_id")


async def test_runs_show_gives_state_budget_and_tasks(
    services: Services, database_url: str, dev_identity: DevIdentity
) -> None:
    host = str(uuid.uuid4())
    run_id = await _run_of(services, host, dev_identity.user_token())
    code, out, err = await _cli(database_url, "runs", "show", run_id, "--host", host, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["state"] == "ACCEPTED"
    assert shown["effect_state"] == "none"
    assert shown["remaining_attempts"] is not None
    assert [(task["step_no"], task["state"]) for task in shown["tasks"]] == [(0, "ready")]
    missing = await _cli(database_url, "runs", "show", run_id, "--host", str(uuid.uuid4()))
    assert missing[0] == 1 and "no run" in missing[2]
    bad = await _cli(database_url, "runs", "show", "not-a-uuid", "--host", host)
    assert bad[0] == 2 and "WORKFLOW_INPUT_INVALID" in bad[2]


async def test_runs_cancel_ends_a_run_before_effects_through_the_cancel_path(
    services: Services, database_url: str, dev_identity: DevIdentity
) -> None:
    host = str(uuid.uuid4())
    run_id = await _run_of(services, host, dev_identity.user_token())
    assert await _cli(database_url, "runs", "cancel", run_id, "--host", host) == (
        0,
        "cancelled\n",
        "",
    )
    code, out, err = await _cli(database_url, "runs", "show", run_id, "--host", host, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["state"] == "CANCELLED"
    assert shown["error"]["code"] == "WORKFLOW_CANCELLED"
    assert {task["state"] for task in shown["tasks"]} == {"cancelled"}
    # Idempotent: a second cancel finds the run already ended.
    again = await _cli(database_url, "runs", "cancel", run_id, "--host", host)
    assert again[:2] == (0, "alreadyTerminal\n")


@pytest.mark.requirement("issue-14:run-inspection")
async def test_runs_list_narrows_to_one_tool_by_its_id_or_its_name(
    owner: McpTestClient, caller: McpTestClient, workers: object, database_url: str
) -> None:
    first = await publish_tool(owner)
    other = await publish_tool(owner, toolName="claims.other")
    mine = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(first))))
    ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(other))))
    by_id = await _listed(database_url, HOST, "--tool", first.tool_id)
    assert [run["process_id"] for run in by_id] == [mine["workflowInstanceId"]]
    assert by_id[0]["tool_name"] == "claims.summarize" and by_id[0]["operation"] == "invoke"
    by_name = await _listed(database_url, HOST, "--tool", "claims.other")
    assert [run["tool_id"] for run in by_name] == [other.tool_id]
    assert await _listed(database_url, HOST, "--tool", "claims.none") == []
    code, out, _ = await _cli(
        database_url, "runs", "list", "--host", HOST, "--tool", "claims.other"
    )
    assert code == 0 and "claims.other" in out and "claims.summarize" not in out


@pytest.mark.requirement("issue-14:run-inspection")
async def test_runs_show_gives_the_timeline_of_tasks_with_attempts_and_the_budget_used(
    owner: McpTestClient,
    caller: McpTestClient,
    workers: object,
    database_url: str,
    services: Services,
) -> None:
    services.settings.publication.destinations.allowed_schemes = ["http", "https"]
    backend = LocalServer()
    async with serving(backend):
        tool = await publish_fetching_tool(owner, backend.base)
        done = ok(
            await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
        )
    run_id = done["workflowInstanceId"]
    code, out, err = await _cli(database_url, "runs", "show", run_id, "--host", HOST, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["state"] == "COMPLETED" and shown["tool_id"] == tool.tool_id
    events = [event["event"] for event in shown["timeline"]]
    assert events[0] == "run.accepted" and events[-1] == "run.completed"
    assert "task.enqueued" in events and "task.done" in events
    done_tasks = [e for e in shown["timeline"] if e["event"] == "task.done"]
    assert all(e["attempts"] >= 1 and e["kind"] for e in done_tasks)
    assert shown["effects"] == []  # a read-only Tool: no write step in the effect ledger
    cost = shown["budget"]["cost_units"]
    assert cost["limit"] == 100 and cost["used"] > 0 and cost["used"] + cost["remaining"] == 100
    attempts = shown["budget"]["attempts"]
    assert attempts["limit"] == 8 and attempts["used"] >= 1
    code, out, _ = await _cli(database_url, "runs", "show", run_id, "--host", HOST)
    assert code == 0
    assert "run.completed" in out and "cost_units" in out and "task.done" in out


async def test_runs_show_lists_the_runs_human_tasks(
    owner: McpTestClient, caller: McpTestClient, workers: object, database_url: str
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, approval_yaml())
    started = ok(await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    run_id = started["workflowInstanceId"]

    async def waiting() -> bool:
        status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": run_id}))
        return bool(status.get("openTaskIds"))

    await wait_until(waiting, what="the run WAITING on its task")
    code, out, err = await _cli(database_url, "runs", "show", run_id, "--host", HOST, "--json")
    assert code == 0, err
    [task] = json.loads(out)["human_tasks"]
    assert (task["task_name"], task["state"]) == ("requestApproval", "open")
    assert (task["assignee_kind"], task["assignee"]) == ("roleId", "approver")
    code, out, _ = await _cli(database_url, "runs", "show", run_id, "--host", HOST)
    assert code == 0 and task["task_id"] in out and "approver" in out
