"""The run's budget ledger: attempts are dispatch attempts; bytes and cost units are consumed."""

from __future__ import annotations

import json
import uuid
from typing import Any

from runtime.execution import ExecutionSettings, SpecLimits, WorkflowRuntime
from runtime.scheduler import BudgetAmounts, get_process
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
from tests.support.execution_runs import finished, start

ROOMY = BudgetAmounts(
    attempts=5,
    nested_calls=5,
    request_bytes=1 << 20,
    intermediate_bytes=1 << 20,
    result_bytes=1 << 20,
    cost_units=10_000,
)


def size(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())


async def run_with(
    db: Database, keyring: Keyring, doc: dict[str, Any], data: Any, budget: BudgetAmounts
) -> tuple[dict[str, Any], dict[str, Any]]:
    host = str(uuid.uuid4())
    async with executor(db, WorkflowRuntime(ExecutionSettings(), keyring)):
        pid = await start(db, keyring, doc, data, host_id=host, budget=budget)
        run = await finished(db, host, pid)
    counters = await get_process(db, host, pid)
    assert counters is not None
    return run, counters


async def test_an_eight_task_run_without_calls_spends_no_attempt(
    db: Database, keyring: Keyring
) -> None:
    run, counters = await run_with(db, keyring, document(set_tasks(8)), {"seen": 0}, ROOMY)
    assert run.state == "COMPLETED"
    assert counters.remaining_attempts == ROOMY.attempts


async def test_each_http_dispatch_spends_one_attempt_and_one_cost_unit(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as server:
        settings = ExecutionSettings(http_allowlist=[server.base])
        get = {"call": "http", "with": {"method": "get", "endpoint": f"{server.base}/x"}}
        doc = document([{"a": get}, {"b": get}])
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, doc, {}, host_id=host, budget=ROOMY)
            run = await finished(db, host, pid)
    counters = await get_process(db, host, pid)
    assert run.state == "COMPLETED" and counters is not None
    assert counters.remaining_attempts == ROOMY.attempts - 2
    # Two dispatches, and per top-level task one unit plus one started block of steps (the
    # task's own step; no CEL evaluated).
    assert counters.remaining_cost_units == ROOMY.cost_units - 2 - 2 * 2


async def test_checkpoints_consume_intermediate_bytes_and_the_result_consumes_result_bytes(
    db: Database, keyring: Keyring
) -> None:
    run, counters = await run_with(db, keyring, document(set_tasks(2)), {"seen": 0}, ROOMY)
    assert run.state == "COMPLETED"
    assert counters.remaining_result_bytes == ROOMY.result_bytes - size(run.result)
    spent = ROOMY.intermediate_bytes - counters.remaining_intermediate_bytes
    assert spent > size({"step": 0, "seen": 0})  # one checkpoint: data, context, input


async def test_a_checkpoint_beyond_the_intermediate_bytes_fails_with_budget_exhausted(
    db: Database, keyring: Keyring
) -> None:
    budget = BudgetAmounts(**{**ROOMY.as_params(), "intermediate_bytes": 40})
    run, _ = await run_with(db, keyring, document(set_tasks(3)), {"seen": 0}, budget)
    assert run.state == "FAILED" and run.error["code"] == "WORKFLOW_BUDGET_EXHAUSTED"


async def test_a_result_beyond_the_result_bytes_fails_with_budget_exhausted(
    db: Database, keyring: Keyring
) -> None:
    budget = BudgetAmounts(**{**ROOMY.as_params(), "result_bytes": 5})
    run, _ = await run_with(db, keyring, document(set_tasks(1)), {"seen": 0}, budget)
    assert run.state == "FAILED" and run.error["code"] == "WORKFLOW_BUDGET_EXHAUSTED"
    assert run.result is None


async def test_cel_evaluation_steps_are_charged_as_cost_units(
    db: Database, keyring: Keyring
) -> None:
    heavy = {"h": {"set": {"n": "${ [1,2,3,4,5,6,7,8,9,10].map(x, x * 2).size() }"}}}
    light = {"l": {"set": {"n": 1}}}
    _, with_cel = await run_with(db, keyring, document([heavy]), {}, ROOMY)
    _, without = await run_with(db, keyring, document([light]), {}, ROOMY)
    assert without.remaining_cost_units == ROOMY.cost_units - 2
    assert with_cel.remaining_cost_units < without.remaining_cost_units


async def test_a_run_without_cost_units_left_fails_with_budget_exhausted(
    db: Database, keyring: Keyring
) -> None:
    budget = BudgetAmounts(**{**ROOMY.as_params(), "cost_units": 1})
    run, _ = await run_with(db, keyring, document(set_tasks(3)), {"seen": 0}, budget)
    assert run.state == "FAILED" and run.error["code"] == "WORKFLOW_BUDGET_EXHAUSTED"


def nested_loops(items: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Three nested loops over the input's items around a CEL-evaluating set: CPU-heavy."""
    body: list[Any] = [{"add": {"set": {"total": "${ a * 2 + 1 }"}}}]
    for each in ("a", "b", "c"):
        loop = {"for": {"each": each, "in": "${ workflow.input.items }"}, "do": body}
        body = [{f"loop_{each}": loop}]
    return document(body), {"items": list(range(items))}


async def attempts_of(db: Database, host: str, pid: str) -> list[int]:
    async with db.transaction(read_only=True) as conn:
        cursor = await conn.execute(
            "SELECT attempts FROM workflow_task WHERE host_id = %s AND process_id = %s",
            (host, pid),
        )
        return [row["attempts"] for row in await cursor.fetchall()]


async def test_a_task_over_its_step_budget_fails_budget_exhausted_on_its_first_attempt(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    doc, data = nested_loops(30)
    runtime = WorkflowRuntime(ExecutionSettings(task_step_budget=300), keyring)
    async with executor(db, runtime):
        pid = await start(db, keyring, doc, data, host_id=host, budget=ROOMY)
        run = await finished(db, host, pid)
    assert run.state == "FAILED" and run.error["code"] == "WORKFLOW_BUDGET_EXHAUSTED"
    assert "300 evaluation steps" in run.error["message"]
    assert await attempts_of(db, host, pid) == [1]


async def test_the_runs_cost_units_cap_the_step_budget_of_each_task(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    doc, data = nested_loops(30)
    async with executor(db, WorkflowRuntime(ExecutionSettings(), keyring)):
        pid = await start(
            db,
            keyring,
            doc,
            data,
            host_id=host,
            budget=ROOMY,
            limits=SpecLimits(maximum_cost_units=3),
        )
        run = await finished(db, host, pid)
    assert run.state == "FAILED" and run.error["code"] == "WORKFLOW_BUDGET_EXHAUSTED"
    # The task's own unit first, then 100 steps per unit: (3 - 1) * 100.
    assert "200 evaluation steps" in run.error["message"]
