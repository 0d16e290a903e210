"""Compensation owned by the runtime (issue 42 item 1), in process: a run that fails after
confirmed writes has them undone in reverse order of confirmation, each exactly once, and
keeps its original error; a write whose outcome is unknown is reported, not compensated."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from typing import Any

import pytest

from runtime.execution import WorkflowRuntime, close_waiter, wait_for_result
from runtime.execution.compensation_store import select_compensation
from runtime.execution.effects import AFTER_DISPATCH_POINT
from runtime.execution.settings import ExecutionSettings
from runtime.scheduler import faults
from runtime.scheduler.errors import cancelled_error
from runtime.scheduler.service import cancel_process
from runtime.security import Keyring
from runtime.store import Database
from runtime.telemetry import metrics
from tests.support.cli import run_command
from tests.support.compensation import ORDER_INPUT, OrderBackend, order_document, order_tasks
from tests.support.execution import (
    LOCAL_BACKENDS,
    document,
    executor,
    free_port,
    serving,
    worker_process,
)
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
    assert backend.body_of("refund") == {"order": "reserve-1", "amount": 42}
    assert backend.body_of("release") == {"reservation": "reserve-1", "sku": "sku-7"}
    assert record.state == "completed"
    assert [(s["name"], s["state"], s["attempts"]) for s in record.steps] == [
        ("charge", "completed", 1),
        ("reserve", "completed", 1),
    ]


async def test_a_run_that_completes_needs_no_compensation(db: Database) -> None:
    host = str(uuid.uuid4())
    async with serving(OrderBackend()) as backend, executor(db, _runtime(backend)):
        pid = await _start(db, host, order_document(backend.base))
        run = await wait_for_result(db, host, pid, timeout=20)
    await close_waiter(db)
    assert run is not None and run.state == "COMPLETED"
    async with db.transaction(read_only=True) as conn:
        assert await select_compensation(conn, host, pid) is None
    assert backend.paths() == ["reserve", "charge", "ship"]


def _dies_after_second_dispatch() -> Any:
    """A hook: the task dies right after the second write was sent, before its confirmation."""
    sent = 0

    async def hook() -> None:
        nonlocal sent
        sent += 1
        if sent == 2:
            raise RuntimeError("the worker died after sending charge")

    return hook


@pytest.mark.parametrize("when_possible", [False, True])
async def test_a_write_of_unknown_outcome_is_compensated_only_when_it_says_so(
    db: Database, when_possible: bool
) -> None:
    host = str(uuid.uuid4())
    faults.set_hook(AFTER_DISPATCH_POINT, _dies_after_second_dispatch())
    try:
        async with serving(OrderBackend()) as backend, executor(db, _runtime(backend)):
            doc = order_document(backend.base, when_possible=when_possible)
            pid = await _start(db, host, doc)
            run = await wait_for_result(db, host, pid, timeout=20)
            record = await _compensation(db, host, pid)
    finally:
        faults.set_hook(AFTER_DISPATCH_POINT, None)
        await close_waiter(db)
    assert run is not None and run.state == "FAILED" and run.effect_state == "confirmed"
    charge, reserve = record.steps
    assert (charge["name"], charge["effect"]) == ("charge", "possible")
    assert reserve["name"] == "reserve" and reserve["state"] == "completed"
    assert record.state == "completed"
    if when_possible:
        assert backend.paths() == ["reserve", "charge", "refund", "release"]
        assert charge["state"] == "completed"
    else:
        # Reported, never guessed: no refund of a charge that may not have happened.
        assert backend.paths() == ["reserve", "charge", "release"]
        assert charge["state"] == "skipped" and "outcome is unknown" in charge["error"]


@pytest.mark.parametrize("point", ["compensation_step_ran_0", "after_compensation_step_0"])
async def test_a_worker_killed_while_compensating_sends_each_undo_once(
    db: Database, database_url: str, point: str
) -> None:
    host = str(uuid.uuid4())
    async with serving(OrderBackend(failing={"ship": 500})) as backend:
        settings = {"http_allowlist": [backend.base]}
        # Killed after refund went out and was ledgered, before the step's end was recorded
        # (or after it was, before its task completed).
        async with worker_process(
            database_url, "doomed", faults=f"{point}=kill", settings=settings
        ) as doomed:
            pid = await _start(db, host, order_document(backend.base))
            async with asyncio.timeout(20):
                assert await doomed.wait() == -signal.SIGKILL
        assert backend.paths() == ["reserve", "charge", "ship", "refund"]
        async with worker_process(database_url, "rescuer", settings=settings, lease_ms=10_000):
            record = await _compensation(db, host, pid)
            run = await wait_for_result(db, host, pid, timeout=20)
    await close_waiter(db)
    assert run is not None and run.state == "FAILED"
    assert backend.paths() == ["reserve", "charge", "ship", "refund", "release"]
    assert record.state == "completed"
    assert [s["state"] for s in record.steps] == ["completed", "completed"]


async def test_a_cancelled_run_undoes_its_confirmed_writes(db: Database) -> None:
    host = str(uuid.uuid4())
    backend = OrderBackend(slow={"charge": 1.5})
    async with serving(backend), executor(db, _runtime(backend)):
        pid = await _start(
            db, host, order_document(backend.base), cancellation_policy="cooperative"
        )
        await wait_until(lambda: "charge" in backend.paths(), what="charge sent")
        async with db.transaction() as conn:
            outcome = await cancel_process(conn, host, pid, cancelled_error(after_effect=True))
        assert outcome == "cancellationRequested"
        run = await wait_for_result(db, host, pid, timeout=20)
        record = await _compensation(db, host, pid)
    await close_waiter(db)
    assert run is not None and run.state == "CANCELLED"
    assert run.error is not None and run.error["code"] == "WORKFLOW_CANCELLED"
    assert backend.paths() == ["reserve", "charge", "refund", "release"]
    assert record.state == "completed"


async def test_a_run_ended_by_its_deadline_undoes_its_confirmed_writes(db: Database) -> None:
    host = str(uuid.uuid4())
    # charge is sent before the deadline and answers after it: the write is left to finish,
    # then nothing new starts and the run ends by its deadline.
    backend = OrderBackend(slow={"charge": 2.5})
    async with serving(backend), executor(db, _runtime(backend)):
        pid = await _start(db, host, order_document(backend.base), timeout_ms=1500)
        await wait_until(lambda: "charge" in backend.paths(), what="charge sent")
        record = await _compensation(db, host, pid)
        run = await wait_for_result(db, host, pid, timeout=20)
    await close_waiter(db)
    assert run is not None and run.error is not None
    assert run.error["code"] == "WORKFLOW_TIMEOUT"
    assert backend.paths() == ["reserve", "charge", "refund", "release"]
    assert record.state == "completed"


async def test_a_failed_compensation_stays_visible_and_runs_compensate_retries_it(
    db: Database, database_url: str
) -> None:
    host = str(uuid.uuid4())
    failed_before = _failed_compensations()
    # refund keeps failing: its bounded retries (compensation_retries, 2) run out.
    backend = OrderBackend(failing={"ship": 500, "refund": 503})
    async with serving(backend), executor(db, _runtime(backend)):
        pid = await _start(db, host, order_document(backend.base))
        record = await _compensation(db, host, pid)
        assert record.state == "failed"
        code, listed, _ = await run_command(
            "runs", "list", "--host", host, "--compensation", "failed", "--json",
            "--database-url", database_url,
        )  # fmt: skip
        assert code == 0 and [run["process_id"] for run in json.loads(listed)] == [pid]
        # The refund answers again: an operator starts the compensation once more.
        backend.failing.pop("refund")
        code, said, _ = await run_command(
            "runs", "compensate", pid, "--host", host, "--database-url", database_url
        )
        assert code == 0, said
        record = await _compensation(db, host, pid)
        code, shown, _ = await run_command(
            "runs", "show", pid, "--host", host, "--json", "--database-url", database_url
        )
    await close_waiter(db)
    assert _failed_compensations() == failed_before + 1
    assert backend.paths() == [
        "reserve", "charge", "ship", "refund", "refund", "refund", "release", "refund",
    ]  # fmt: skip
    assert record.state == "completed"
    assert [(s["name"], s["state"]) for s in record.steps] == [
        ("charge", "completed"),
        ("reserve", "completed"),
    ]
    compensation = json.loads(shown)["compensation"]
    assert compensation["state"] == "completed"
    assert [s["task"] for s in compensation["steps"]] == ["charge", "reserve"]


def _failed_compensations() -> float:
    value = metrics.REGISTRY.get_sample_value("workflow_compensations_total", {"outcome": "failed"})
    return value or 0.0


async def test_a_compensation_run_that_dies_leaves_its_record_failed_not_running(
    db: Database,
) -> None:
    host = str(uuid.uuid4())

    async def broken() -> None:
        raise RuntimeError("the compensation handler broke")

    faults.set_hook("before_compensation_step_0", broken)
    try:
        backend = OrderBackend(failing={"ship": 500})
        async with serving(backend), executor(db, _runtime(backend)):
            pid = await _start(db, host, order_document(backend.base))
            record = await _compensation(db, host, pid)
    finally:
        faults.set_hook("before_compensation_step_0", None)
        await close_waiter(db)
    assert record.state == "failed"
    assert backend.paths() == ["reserve", "charge", "ship"]


async def test_nothing_is_compensated_past_the_allowance_after_the_run_ended(
    db: Database,
) -> None:
    host = str(uuid.uuid4())
    # The run ends by its deadline; refund, started within the allowance, is left to finish,
    # and when it answers the allowance is spent: release is not sent.
    backend = OrderBackend(slow={"charge": 2.5, "refund": 2.0})
    settings = ExecutionSettings(http_allowlist=[], compensation_allowance_s=1.0)
    async with serving(backend):
        settings.http_allowlist.append(backend.base)
        runtime = WorkflowRuntime(settings, Keyring.empty(), destinations=LOCAL_BACKENDS)
        async with executor(db, runtime):
            pid = await _start(db, host, order_document(backend.base), timeout_ms=1500)
            record = await _compensation(db, host, pid)
    await close_waiter(db)
    assert backend.paths() == ["reserve", "charge", "refund"]
    assert record.state == "failed"
    charge, reserve = record.steps
    assert charge["state"] == "completed"
    assert reserve["state"] == "failed" and "allowance" in reserve["error"]


async def test_every_confirmed_fork_branch_is_compensated(db: Database) -> None:
    host = str(uuid.uuid4())
    backend = OrderBackend(failing={"ship": 500})
    async with serving(backend), executor(db, _runtime(backend)):
        reserve, charge, ship = order_tasks(backend.base)
        # Both branches confirm (reserve no longer exports inside a branch), then ship fails.
        del reserve["reserve"]["export"]
        # Nothing exported the order, so ship names it by the input (a read of an absent
        # field is an expression error).
        ship["ship"]["with"]["body"] = {"order": "${ workflow.input.sku }"}
        charge["charge"]["compensate"] = order_tasks(backend.base)[0]["reserve"]["compensate"]
        charge["charge"]["compensate"]["with"]["endpoint"] = f"{backend.base}/refund"
        # charge starts a moment later, so the order of confirmation (and so of the undo) is
        # known.
        later = {"later": {"do": [{"pause": {"wait": {"milliseconds": 300}}}, charge]}}
        both = {"both": {"fork": {"branches": [reserve, later]}}}
        pid = await _start(db, host, document([both, ship]))
        record = await _compensation(db, host, pid)
    await close_waiter(db)
    # Each confirmed sibling is undone once, the later-confirmed first.
    assert backend.paths() == ["reserve", "charge", "ship", "refund", "release"]
    assert [step["name"] for step in record.steps] == ["charge", "reserve"]
    assert record.state == "completed"


async def test_runs_compensate_refuses_up_front_a_retry_whose_steps_need_the_run_credential(
    db: Database, database_url: str
) -> None:
    host = str(uuid.uuid4())
    backend = OrderBackend(failing={"ship": 500})
    async with serving(backend), executor(db, _runtime(backend)):
        doc = order_document(backend.base)
        # refund calls with the run's user token; the run starts without one (as after its
        # end, when seed 000 has deleted it), so the first compensation fails that step.
        doc["use"] = {"authentications": {"userToken": {"bearer": {"use": "runCredential"}}}}
        refund = doc["do"][1]["charge"]["compensate"]["do"][0]["refund"]
        endpoint = refund["with"]["endpoint"]
        refund["with"]["endpoint"] = {"uri": endpoint, "authentication": {"use": "userToken"}}
        pid = await _start(db, host, doc)
        record = await _compensation(db, host, pid)
        assert record.state == "failed"
        assert [(s["name"], s["state"]) for s in record.steps] == [
            ("charge", "failed"),
            ("reserve", "completed"),
        ]
        code, said, err = await run_command(
            "runs", "compensate", pid, "--host", host, "--database-url", database_url
        )
        async with db.transaction(read_only=True) as conn:
            after = await select_compensation(conn, host, pid)
    await close_waiter(db)
    # Refused with its typed reason before anything changed: no compensation run started.
    assert code == 2, said
    assert err.startswith("WORKFLOW_POLICY_DENIED: the compensation cannot be retried")
    assert "step(s) charge call with the run's user credential" in err
    assert after == record
    assert backend.paths() == ["reserve", "charge", "ship", "release"]


def _refund_of(doc: dict[str, Any]) -> dict[str, Any]:
    refund: dict[str, Any] = doc["do"][1]["charge"]["compensate"]["do"][0]["refund"]
    return refund


def _refused_by_policy(doc: dict[str, Any], backend: OrderBackend) -> str:
    # Another origin than the allowlisted backend's: refused before anything is sent.
    port = backend.base.rsplit(":", 1)[1]
    _refund_of(doc)["with"]["endpoint"] = f"http://localhost:{port}/refund"
    return "WORKFLOW_POLICY_DENIED: POST http://localhost:"


def _forbidden(doc: dict[str, Any], backend: OrderBackend) -> str:
    backend.failing["refund"] = 403
    return "WORKFLOW_TASK_FAILED: HTTP call failed: HTTP status 403 (status 403)"


def _invalid_input(doc: dict[str, Any], backend: OrderBackend) -> str:
    # The refund reads a field the charge's answer does not have (the same on every attempt).
    _refund_of(doc)["with"]["body"] = {"charge": "${ .receipt.number }"}
    return "WORKFLOW_TASK_FAILED: Expression failed"


def _secret_missing(doc: dict[str, Any], backend: OrderBackend) -> str:
    # The refund authenticates with a host secret the host does not hold (authorization).
    token = {"bearer": {"token": "${ $secrets.refundKey }"}}
    doc["use"] = {"secrets": ["refundKey"], "authentications": {"refunds": token}}
    refund = _refund_of(doc)
    refund["with"]["endpoint"] = {
        "uri": refund["with"]["endpoint"],
        "authentication": {"use": "refunds"},
    }
    return "WORKFLOW_TASK_FAILED: the host holds no secret named refundKey"


@pytest.mark.parametrize(
    "refuse",
    [_refused_by_policy, _forbidden, _invalid_input, _secret_missing],
    ids=["policy-denied", "http-403", "invalid-input", "secret-missing"],
)
async def test_a_refused_compensation_step_is_tried_once_and_fails_with_its_reason(
    db: Database, database_url: str, refuse: Any
) -> None:
    host = str(uuid.uuid4())
    backend = OrderBackend(failing={"ship": 500})
    async with serving(backend), executor(db, _runtime(backend)):
        doc = order_document(backend.base)
        reason = refuse(doc, backend)
        pid = await _start(db, host, doc)
        record = await _compensation(db, host, pid)
        code, shown, _ = await run_command(
            "runs", "show", pid, "--host", host, "--json", "--database-url", database_url
        )
    await close_waiter(db)
    # Not retried: tried again it would be refused again. The next step still runs.
    assert record.state == "failed"
    charge, reserve = record.steps
    assert (charge["name"], charge["state"], charge["attempts"]) == ("charge", "failed", 1)
    assert charge["error"].startswith(reason), charge["error"]
    assert (reserve["name"], reserve["state"]) == ("reserve", "completed")
    sent = backend.paths()
    assert sent == ["reserve", "charge", "ship", *sent[3:]] and sent.count("release") == 1
    assert sent.count("refund") == (1 if refuse is _forbidden else 0)
    assert code == 0
    steps = json.loads(shown)["compensation"]["steps"]
    shown_charge = steps[0]
    assert (shown_charge["task"], shown_charge["state"], shown_charge["attempts"]) == (
        "charge",
        "failed",
        1,
    )
    assert shown_charge["error"] == charge["error"]


async def test_a_refused_compensation_step_is_retried_by_hand_once_its_cause_is_fixed(
    db: Database, database_url: str
) -> None:
    host = str(uuid.uuid4())
    backend = OrderBackend(failing={"ship": 500, "refund": 403})
    async with serving(backend), executor(db, _runtime(backend)):
        pid = await _start(db, host, order_document(backend.base))
        record = await _compensation(db, host, pid)
        assert record.state == "failed" and record.steps[0]["attempts"] == 1
        # The operator has the refund endpoint let the call through, then starts it again.
        backend.failing.pop("refund")
        code, said, _ = await run_command(
            "runs", "compensate", pid, "--host", host, "--database-url", database_url
        )
        assert code == 0, said
        record = await _compensation(db, host, pid)
    await close_waiter(db)
    assert backend.paths() == ["reserve", "charge", "ship", "refund", "release", "refund"]
    assert record.state == "completed"
    assert [(s["name"], s["state"]) for s in record.steps] == [
        ("charge", "completed"),
        ("reserve", "completed"),
    ]


def _unavailable(doc: dict[str, Any], backend: OrderBackend) -> None:
    backend.failing["refund"] = 503


def _unreachable(doc: dict[str, Any], backend: OrderBackend) -> None:
    # Allowlisted, but nothing listens there: the connection is refused.
    _refund_of(doc)["with"]["endpoint"] = f"{CLOSED}/refund"


CLOSED = f"http://127.0.0.1:{free_port()}"


@pytest.mark.parametrize("fail", [_unavailable, _unreachable], ids=["http-503", "connect-error"])
async def test_a_transient_compensation_fault_keeps_its_retries(db: Database, fail: Any) -> None:
    host = str(uuid.uuid4())
    backend = OrderBackend(failing={"ship": 500})
    async with serving(backend):
        settings = ExecutionSettings(http_allowlist=[backend.base, f"{CLOSED}/"])
        runtime = WorkflowRuntime(settings, Keyring.empty(), destinations=LOCAL_BACKENDS)
        async with executor(db, runtime):
            doc = order_document(backend.base)
            fail(doc, backend)
            pid = await _start(db, host, doc)
            record = await _compensation(db, host, pid)
    await close_waiter(db)
    charge, reserve = record.steps
    # compensation_retries (2) after the first attempt, as before; the reason is typed.
    assert (charge["name"], charge["state"], charge["attempts"]) == ("charge", "failed", 3)
    assert charge["error"].startswith("WORKFLOW_TASK_FAILED: "), charge["error"]
    assert reserve["state"] == "completed"
