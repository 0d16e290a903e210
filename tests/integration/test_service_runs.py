"""`workflow-mcp runs list|show|cancel` on a real test database, as an operator runs them."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime.execution import start_workflow_run
from runtime.security import SecretToken
from runtime.security.devtools import DevIdentity
from runtime.services import Services
from tests.support.execution import document, set_tasks

REPO = Path(__file__).resolve().parents[2]


async def _cli(database_url: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runtime.cli", *args, "--database-url", database_url,
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


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
