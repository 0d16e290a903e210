"""Compensation owned by the runtime (issue 42 item 1), in process: a run that fails after
confirmed writes has them undone in reverse order of confirmation, each exactly once, and
keeps its original error; a write whose outcome is unknown is reported, not compensated."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from runtime.execution import WorkflowRuntime, close_waiter, wait_for_result
from runtime.execution.compensation_store import select_compensation
from runtime.execution.settings import ExecutionSettings
from runtime.security import Keyring
from runtime.store import Database
from tests.support.compensation import ORDER_INPUT, OrderBackend, order_document
from tests.support.execution import LOCAL_BACKENDS, executor, serving
from tests.support.execution_runs import start_workflow_run
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")


def _runtime(backend: OrderBackend) -> WorkflowRuntime:
    settings = ExecutionSettings(http_allowlist=[backend.base])
    return WorkflowRuntime(settings, Keyring.empty(), destinations=LOCAL_BACKENDS)


async def _start(db: Database, host: str, doc: dict[str, Any], **options: Any) -> str:
    return await start_workflow_run(
        db, host_id=host, user_id="u-1", input=ORDER_INPUT, keyring=Keyring.empty(),
        credential=None, definition=doc, **options,
    )  # fmt: skip


async def _compensation(db: Database, host: str, pid: str, *, ended: bool = True) -> Any:
    async def settled() -> bool:
        async with db.transaction(read_only=True) as conn:
            record = await select_compensation(conn, host, pid)
        return record is not None and (not ended or record.state != "running")

    await wait_until(settled, what="the compensation settled", within_s=20)
    async with db.transaction(read_only=True) as conn:
        return await select_compensation(conn, host, pid)


async def test_a_failed_third_write_undoes_the_first_two_in_reverse_order_once(
    db: Database,
) -> None:
    host = str(uuid.uuid4())
    async with serving(OrderBackend(failing={"ship": 500})) as backend:
        runtime = _runtime(backend)
        async with executor(db, runtime):
            pid = await _start(db, host, order_document(backend.base))
            run = await wait_for_result(db, host, pid, timeout=20)
            record = await _compensation(db, host, pid)
    await close_waiter(db)
    assert run is not None and run.state == "FAILED"
    assert run.error is not None and run.error["code"] != "WORKFLOW_COMPENSATION"
    assert backend.paths() == ["reserve", "charge", "ship", "refund", "release"]
    assert backend.body_of("refund") == {"charge": "charge-1", "order": "reserve-1"}
    assert backend.body_of("release") == {"reservation": "reserve-1", "sku": "sku-7"}
    assert record.state == "completed"
    assert [(s["name"], s["state"], s["attempts"]) for s in record.steps] == [
        ("charge", "completed", 1),
        ("reserve", "completed", 1),
    ]


async def test_a_run_that_completes_needs_no_compensation(db: Database) -> None:
    host = str(uuid.uuid4())
    async with serving(OrderBackend()) as backend:
        async with executor(db, _runtime(backend)):
            pid = await _start(db, host, order_document(backend.base))
            run = await wait_for_result(db, host, pid, timeout=20)
    await close_waiter(db)
    assert run is not None and run.state == "COMPLETED"
    async with db.transaction(read_only=True) as conn:
        assert await select_compensation(conn, host, pid) is None
    assert backend.paths() == ["reserve", "charge", "ship"]
