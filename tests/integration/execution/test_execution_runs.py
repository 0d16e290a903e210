"""Durable workflow runs in-process: result, deadline, budget, destinations, credential."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from runtime.execution import (
    ExecutionSettings,
    SpecLimits,
    WorkflowRuntime,
)
from runtime.scheduler import BudgetAmounts
from runtime.security import Keyring
from runtime.store import Database
from tests.support.execution import (
    LOCAL_BACKENDS,
    LocalServer,
    document,
    executor,
    serving,
    set_tasks,
)
from tests.support.execution_runs import TOKEN, finished, start
from tests.support.shared import set_assert_definitions


@pytest.mark.parametrize("source", set_assert_definitions())
async def test_the_simple_set_assert_reference_runs_durably_to_its_public_result(
    db: Database, keyring: Keyring, source: Path
) -> None:
    host = str(uuid.uuid4())
    reference = yaml.safe_load(source.read_text())
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    async with executor(db, runtime):
        pid = await start(db, keyring, reference, {"applicantId": "A-7"}, host_id=host)
        run = await finished(db, host, pid)
    assert run.state == "COMPLETED"
    assert run.result == {
        "applicantId": "A-7",
        "status": "APPROVED",
        "verified": True,
        "message": "Workflow completed by simple-set-assert",
    }


async def test_each_top_level_task_runs_as_its_own_checkpointed_scheduler_step(
    db: Database, keyring: Keyring, database_url: str
) -> None:
    host = str(uuid.uuid4())
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    async with executor(db, runtime):
        pid = await start(db, keyring, document(set_tasks(3)), {"seen": 0}, host_id=host)
        run = await finished(db, host, pid)
    assert run.result == {"step": 2, "seen": 3}
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT step_no, payload FROM workflow_task WHERE process_id = %s ORDER BY step_no",
            (pid,),
        )
        rows = await cursor.fetchall()
    assert [row["step_no"] for row in rows] == [0, 1000, 2000]
    assert [row["payload"].get("state", {}).get("position") for row in rows] == [None, 1, 2]


async def test_a_run_past_its_deadline_is_cancelled_and_a_dispatched_write_is_left_to_finish(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer(delay_s=1.5)) as server:
        settings = ExecutionSettings(http_allowlist=[server.base])
        post = {"call": "http", "with": {"method": "post", "endpoint": f"{server.base}/orders"}}
        doc = document([{"save": post}, {"after": {"set": {"done": True}}}])
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, doc, {}, host_id=host, timeout_ms=700)
            run = await finished(db, host, pid)
    assert run.state == "CANCELLED" and run.error["code"] == "WORKFLOW_TIMEOUT"
    assert run.error["afterEffect"] is True
    assert server.completed == 1 and len(server.requests) == 1


async def test_retries_spend_the_shared_attempt_budget_until_it_is_exhausted(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer(status=503)) as server:
        settings = ExecutionSettings(http_allowlist=[server.base])
        get = {"get": {"call": "http", "with": {"method": "get", "endpoint": f"{server.base}/x"}}}
        retry = {"delay": {"milliseconds": 1}, "limit": {"attempt": {"count": 10}}}
        flaky = {"try": [get], "catch": {"errors": {"with": {"status": 503}}, "retry": retry}}
        budget = BudgetAmounts(attempts=4, nested_calls=4, request_bytes=1000, cost_units=10)
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(
                db, keyring, document([{"flaky": flaky}]), {}, host_id=host, budget=budget,
                limits=SpecLimits(maximum_task_attempts=20),
            )  # fmt: skip
            run = await finished(db, host, pid)
    assert run.error["code"] == "WORKFLOW_BUDGET_EXHAUSTED"
    # Attempts are dispatch attempts: four calls went out, the fifth never left.
    assert len(server.requests) == 4


async def test_http_outside_the_allowed_destinations_is_refused_before_any_request_leaves(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as server:
        settings = ExecutionSettings(http_allowlist=[f"{server.base}/allowed"])
        get = {"call": "http", "with": {"method": "get", "endpoint": f"{server.base}/other"}}
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, document([{"get": get}]), {}, host_id=host)
            run = await finished(db, host, pid)
    assert run.error["code"] == "WORKFLOW_POLICY_DENIED"
    assert server.requests == []


async def test_the_run_credential_is_stored_sealed_and_deleted_when_the_run_ends(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    pid = await start(db, keyring, document(set_tasks(1)), {"seen": 0}, host_id=host)
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT key_id, nonce, ciphertext FROM workflow_run_credential WHERE process_id = %s",
            (pid,),
        )
        row = await cursor.fetchone()
    assert row is not None and row["key_id"] == "k1"
    assert TOKEN.encode() not in bytes(row["ciphertext"]) and b"eyJ" not in bytes(row["ciphertext"])
    async with executor(db, WorkflowRuntime(ExecutionSettings(), keyring)):
        await finished(db, host, pid)
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT count(*) AS n FROM workflow_run_credential WHERE process_id = %s", (pid,)
        )
        assert (await cursor.fetchone() or {})["n"] == 0


async def test_admission_is_refused_when_no_sealing_key_exists(db: Database) -> None:
    from runtime.errors import WorkflowError

    with pytest.raises(WorkflowError) as refused:
        await start(db, Keyring.empty(), document(set_tasks(1)), {"seen": 0})
    assert refused.value.code == "WORKFLOW_START_REJECTED"
    async with db.transaction() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM workflow_process")
        assert (await cursor.fetchone() or {})["n"] == 0
