"""Durable timers: a long `wait` or retry back-off parks the run and gives its slot back.

The parked run's next task carries its due time and becomes available then; a killed worker's
waits resume at their original due times, not from the start.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime.execution import ExecutionSettings, WorkflowRuntime, close_waiter
from runtime.human_tasks import store as human_tasks_store
from runtime.human_tasks.parking import parked_task_payload
from runtime.scheduler import Executor, SchedulerSettings, service
from runtime.scheduler.errors import cancelled_error
from runtime.scheduler.models import NewTask, TaskOutcome
from runtime.scheduler.store import queue
from runtime.security import Keyring
from runtime.store import Database
from tests.support.execution import (
    LOCAL_BACKENDS,
    LocalServer,
    Receive,
    Send,
    document,
    read_body,
    serving,
    set_tasks,
    worker_process,
)
from tests.support.execution_runs import finished, start
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("issue-42:durable-timers")

# Two standard slots, as a service has by default: two runs sleeping in them stalled the rest.
TWO_SLOTS = SchedulerSettings(
    interactive_slots=2, standard_slots=2, batch_slots=0, lease_ms=600, renew_interval_ms=150,
    reap_interval_ms=150, sweep_interval_ms=150, poll_interval_ms=100,
    reclaim_min_remaining_ms=100,
)  # fmt: skip
LONG = 600_000  # run deadlines well past every wait here


@asynccontextmanager
async def two_slot_executor(db: Database, runtime: WorkflowRuntime) -> AsyncIterator[Executor]:
    async with Executor(db, runtime.handlers(), TWO_SLOTS) as running:
        yield running
    await runtime.aclose()
    await close_waiter(db)


async def tasks_of(db: Database, pid: str) -> list[dict[str, Any]]:
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT * FROM workflow_task WHERE process_id = %s ORDER BY step_no", (pid,)
        )
        return list(await cursor.fetchall())


async def parked(db: Database, host: str) -> int:
    """How many of the host's tasks wait, unleased, for a due time ahead."""
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT count(*) AS n FROM workflow_task WHERE host_id = %s AND state = 'ready'"
            " AND available_at > now()",
            (host,),
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


async def test_runs_waiting_two_minutes_hold_no_slot_and_a_one_task_run_beside_them_completes(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    waiting = document([{"pause": {"wait": "PT2M"}}, {"after": {"set": {"done": True}}}])
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    async with two_slot_executor(db, runtime):
        pids = [await start_standard(db, keyring, waiting, host) for _ in range(200)]
        await wait_until(
            lambda: _all_parked(db, host, len(pids)), what="every wait parked", within_s=60
        )
        quick = await start(
            db, keyring, document(set_tasks(1)), {"seen": 0}, host_id=host,
            execution_class="standard",
        )  # fmt: skip
        run = await finished(db, host, quick)
    assert run.state == "COMPLETED" and run.result == {"step": 0, "seen": 0}
    first, timer = await tasks_of(db, pids[0])
    # The wait's due time is its successor's available_at: two minutes after it began.
    assert first["state"] == "done" and timer["state"] == "ready" and timer["lease_id"] is None
    due = datetime.fromisoformat(first["result"]["timer"])
    assert timer["available_at"] == due
    assert list(timer["payload"]["timers"]) == ["/do/0/pause#0"]
    # Two minutes after the wait began: between the first task's claim and its completion.
    two_minutes, skew = timedelta(minutes=2), timedelta(seconds=1)
    assert first["created_ts"] + two_minutes - skew <= due <= first["updated_ts"] + two_minutes


async def start_standard(db: Database, keyring: Keyring, doc: Any, host: str) -> str:
    return await start(
        db, keyring, doc, {}, host_id=host, execution_class="standard", timeout_ms=LONG
    )


async def _all_parked(db: Database, host: str, count: int) -> bool:
    return await parked(db, host) == count


async def test_a_wait_past_the_run_deadline_times_out_as_before(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    doc = document([{"pause": {"wait": "PT1M"}}, {"after": {"set": {"ok": 1}}}])
    async with two_slot_executor(db, WorkflowRuntime(ExecutionSettings(), keyring)):
        pid = await start(db, keyring, doc, {}, host_id=host, timeout_ms=2_500)
        run = await finished(db, host, pid)
    assert run.state == "CANCELLED" and run.error["code"] == "WORKFLOW_TIMEOUT"
    # It parked until the deadline, holding no slot meanwhile.
    first, timer = await tasks_of(db, pid)
    assert "timer" in first["result"] and timer["attempts"] == 0


async def test_a_cooperative_cancel_ends_a_run_parked_on_a_timer_at_once(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as backend:
        settings = ExecutionSettings(http_allowlist=[backend.base])
        post = {"call": "http", "with": {"method": "post", "endpoint": f"{backend.base}/hold"}}
        doc = document([{"hold": post}, {"pause": {"wait": "PT2M"}}, {"after": {"set": {}}}])
        runtime = WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)
        async with two_slot_executor(db, runtime):
            pid = await start(
                db, keyring, doc, {}, host_id=host, timeout_ms=LONG,
                cancellation_policy="cooperative",
            )  # fmt: skip
            await wait_until(lambda: _all_parked(db, host, 1), what="the wait parked")
            async with db.transaction() as conn:
                error = cancelled_error(after_effect=True)
                assert await service.cancel_process(conn, host, pid, error) == (
                    "cancellationRequested"
                )
            run = await finished(db, host, pid)
    assert run.state == "CANCELLED" and run.error["code"] == "WORKFLOW_CANCELLED"
    assert run.error["afterEffect"] is True and len(backend.requests) == 1


async def test_an_ask_after_a_parked_wait_in_the_same_task_keeps_the_waits_due_time(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    ask = {
        "prompt": "Go on?",
        "mode": "approval",
        "assignment": {"roleId": "approver"},
        "options": [{"label": "Yes", "value": "YES"}, {"label": "No", "value": "NO"}],
        "timeout": {"after": "PT1S"},
        "onTimeout": {"action": "default", "default": "NO"},
    }
    both = {"do": [{"nap": {"wait": "PT2S"}}, {"approve": {"ask": ask}}]}
    settings = ExecutionSettings(in_slot_wait_ms=100)
    async with two_slot_executor(db, WorkflowRuntime(settings, keyring)):
        pid = await start(
            db, keyring, document([{"both": both}]), {}, host_id=host, timeout_ms=LONG
        )
        run = await finished(db, host, pid)
    assert run.state == "COMPLETED", run
    # Parked on the wait, then on the ask (carrying the wait's due time), then answered by the
    # ask's timeout: the replay passed the wait instead of parking on it a second time.
    results = [row["result"] for row in await tasks_of(db, pid)]
    assert ["timer" in r for r in results] == [True, False, False]
    assert "waiting" in results[1] and results[2] == {"finished": True}


class FlakyBackend:
    """Answers 503 to the first `failures` POSTs, then 200; records when each arrived."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.arrivals: list[float] = []
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        self.arrivals.append(asyncio.get_running_loop().time())
        status = 503 if len(self.arrivals) <= self.failures else 200
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"n": %d}' % len(self.arrivals)})


def retried(
    method: str, endpoint: str, delay_s: int, limit: dict[str, Any] | None = None
) -> dict[str, Any]:
    call = {"call": "http", "with": {"method": method, "endpoint": endpoint}}
    retry = {"delay": {"seconds": delay_s}, "limit": limit or {"attempt": {"count": 3}}}
    return {"try": [{"send": call}], "catch": {"errors": {"with": {"status": 503}}, "retry": retry}}


@pytest.mark.parametrize("method", ["post", "get"])
async def test_a_retry_back_off_parks_the_run_and_each_attempt_is_sent_once(
    db: Database, keyring: Keyring, method: str
) -> None:
    host = str(uuid.uuid4())
    async with serving(FlakyBackend(failures=2)) as backend:
        settings = ExecutionSettings(http_allowlist=[backend.base], in_slot_wait_ms=100)
        doc = document([{"resilient": retried(method, f"{backend.base}/orders", 1)}])
        runtime = WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)
        async with two_slot_executor(db, runtime):
            pid = await start(db, keyring, doc, {}, host_id=host, timeout_ms=LONG)
            run = await finished(db, host, pid)
    assert run.state == "COMPLETED", run
    # Two back-offs, each a parked task; the replays sent no attempt again.
    assert len(backend.arrivals) == 3
    rows = await tasks_of(db, pid)
    assert ["timer" in (row["result"] or {}) for row in rows] == [True, True, False]
    # The due time of each back-off, and when the retrying task first started.
    assert sorted(rows[2]["payload"]["timers"]) == [
        "/do/0/resilient/retry#0",
        "/do/0/resilient/retry#1",
        "/do/0/resilient/started#0",
    ]
    gaps = [b - a for a, b in zip(backend.arrivals, backend.arrivals[1:], strict=False)]
    assert min(gaps) >= 1.0


async def test_a_retrys_duration_limit_counts_from_its_first_attempt_across_parked_back_offs(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(FlakyBackend(failures=100)) as backend:
        settings = ExecutionSettings(http_allowlist=[backend.base], in_slot_wait_ms=100)
        # Two seconds between attempts, at most three seconds in all: a second attempt, and
        # no third, however often the run parked and replayed in between.
        limit = {"attempt": {"count": 5}, "duration": {"seconds": 3}}
        doc = document([{"resilient": retried("get", f"{backend.base}/flaky", 2, limit)}])
        runtime = WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)
        async with two_slot_executor(db, runtime):
            pid = await start(db, keyring, doc, {}, host_id=host, timeout_ms=LONG)
            run = await finished(db, host, pid)
    assert run.state == "FAILED" and len(backend.arrivals) == 2, run


async def test_waits_survive_a_killed_worker_and_resume_at_their_original_due_times(
    db: Database, keyring: Keyring, database_url: str
) -> None:
    host = str(uuid.uuid4())
    doc = document([{"pause": {"wait": {"seconds": 6}}}, {"after": {"set": {"done": True}}}])
    settings = {"in_slot_wait_ms": 100}
    try:
        async with worker_process(database_url, "doomed", settings=settings) as doomed:
            pids = [
                await start(db, keyring, doc, {}, host_id=host, timeout_ms=LONG) for _ in range(20)
            ]
            await wait_until(lambda: _all_parked(db, host, len(pids)), what="every wait parked")
            dues = {pid: (await tasks_of(db, pid))[1]["available_at"] for pid in pids}
            doomed.send_signal(signal.SIGKILL)
            async with asyncio.timeout(20):
                assert await doomed.wait() == -signal.SIGKILL
        async with worker_process(database_url, "rescuer", settings=settings, lease_ms=10_000):
            runs = [await finished(db, host, pid) for pid in pids]
    finally:
        await close_waiter(db)
    assert all(run.state == "COMPLETED" and run.result == {"done": True} for run in runs)
    for pid in pids:
        first, resumed, after = await tasks_of(db, pid)
        # Not waited again from the start: the parked task ran once, at the due time the
        # killed worker recorded, and went on without parking again.
        assert resumed["available_at"] == dues[pid]
        assert resumed["attempts"] == 1 and resumed["result"] == {"position": 1}
        assert after["result"] == {"finished": True}
        assert resumed["worker_id"] == "rescuer" and first["worker_id"] == "doomed"
        assert resumed["heartbeat_ts"] >= dues[pid]


async def test_a_run_resuming_from_a_timer_queues_from_its_due_time_not_from_when_it_parked(
    db: Database,
) -> None:
    host = str(uuid.uuid4())
    due = datetime.now(UTC) + timedelta(seconds=1)
    parked = NewTask("workflow", {"timers": {"/do/0/nap#0": due.timestamp()}}, available_at=due)
    async with db.transaction() as conn:
        waited = await service.enqueue_process(
            conn, host_id=host, first_task=parked, execution_class="standard"
        )
    # Ready while the first run waited, so before its due time: it goes first.
    async with db.transaction() as conn:
        ready = await service.enqueue_process(
            conn, host_id=host, first_task=NewTask("workflow", {}), execution_class="standard"
        )
    await wait_until(lambda: _all_parked(db, host, 0), what="the timer due")
    one_slot = queue.ClaimRequest("w1", 0, 1, 0, 0)
    async with db.transaction() as conn:
        first = await queue.claim_tasks(conn, one_slot, TWO_SLOTS)
        second = await queue.claim_tasks(conn, one_slot, TWO_SLOTS)
    assert [task.process_id for task, _ in first + second] == [ready, waited]


async def test_a_run_resuming_from_an_answered_ask_queues_from_the_answer_not_from_when_it_parked(
    db: Database,
) -> None:
    # Parked on a person (its task available only at the ask's far due time): once the answer
    # wakes it, it queues behind the task that became ready while it waited, as a timer's run
    # does, instead of outranking it by the time it waited.
    host = str(uuid.uuid4())
    one_slot = queue.ClaimRequest("w1", 0, 1, 0, 0)
    async with db.transaction() as conn:
        waited = await service.enqueue_process(
            conn, host_id=host, first_task=NewTask("workflow", {}), execution_class="standard"
        )
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(conn, one_slot, TWO_SLOTS)
    ask = human_tasks_store.NewHumanTask(
        host_id=host, process_id=waited, position=0, ask_key="approve#0", task_name="approve",
        wf_def_id=None, question={"prompt": "Approve?"}, assignee_user_id="ann",
        assignee_role_id=None, assignee_position_id=None, timeout_ms=None,
    )  # fmt: skip
    async with db.transaction() as conn:
        await human_tasks_store.insert_task(conn, ask)
        opened = await human_tasks_store.select_task_at(conn, host, waited, 0, "approve#0")
    assert opened is not None
    due = datetime.now(UTC) + timedelta(days=3)
    parked = NewTask("workflow", parked_task_payload({}, opened.task_id), available_at=due)
    await service.complete(db, lease, TaskOutcome.then(parked))
    async with db.transaction() as conn:
        ready = await service.enqueue_process(
            conn, host_id=host, first_task=NewTask("workflow", {}), execution_class="standard"
        )
    async with db.transaction() as conn:
        woken = await human_tasks_store.wake_parked_task(conn, host, waited, opened.task_id)
    assert woken is not None
    async with db.transaction() as conn:
        first = await queue.claim_tasks(conn, one_slot, TWO_SLOTS)
        second = await queue.claim_tasks(conn, one_slot, TWO_SLOTS)
    assert [task.process_id for task, _ in first + second] == [ready, waited]


def waiting_fork(*branches: dict[str, Any]) -> dict[str, Any]:
    named = [{f"b{index}": branch} for index, branch in enumerate(branches)]
    return {"both": {"fork": {"branches": named}}}


async def test_runs_whose_fork_branches_all_wait_hold_no_slot_and_a_one_task_run_completes(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    fork = waiting_fork({"wait": "PT2M"}, {"wait": "PT3M"})
    doc = document([fork, {"after": {"set": {"done": True}}}])
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    async with two_slot_executor(db, runtime):
        pids = [await start_standard(db, keyring, doc, host) for _ in range(50)]
        await wait_until(
            lambda: _all_parked(db, host, len(pids)), what="every fork parked", within_s=60
        )
        quick = await start(
            db, keyring, document(set_tasks(1)), {"seen": 0}, host_id=host,
            execution_class="standard",
        )  # fmt: skip
        run = await finished(db, host, quick)
    assert run.state == "COMPLETED"
    first, timer = await tasks_of(db, pids[0])
    # Parked as a whole, until the earlier branch's due time, with both waits to reach.
    keys = ["/do/0/both/fork/branches/0/b0#0", "/do/0/both/fork/branches/1/b1#0"]
    assert sorted(timer["payload"]["parked"]) == keys
    due = datetime.fromisoformat(first["result"]["timer"])
    assert timer["available_at"] == due
    assert due.timestamp() == pytest.approx(timer["payload"]["timers"][keys[0]], abs=0.001)


async def test_a_fork_whose_branches_write_then_wait_parks_twice_and_sends_each_write_once(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as backend:
        settings = ExecutionSettings(http_allowlist=[backend.base], in_slot_wait_ms=100)

        def post(path: str) -> dict[str, Any]:
            return {"call": "http", "with": {"method": "post", "endpoint": backend.base + path}}

        fork = waiting_fork(
            {"do": [{"a": post("/a")}, {"nap": {"wait": "PT1S"}}]},
            {"do": [{"b": post("/b")}, {"nap": {"wait": "PT2S"}}, {"c": post("/c")}]},
        )
        doc = document([fork, {"after": {"set": {"done": True}}}])
        runtime = WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)
        async with two_slot_executor(db, runtime):
            pid = await start(db, keyring, doc, {}, host_id=host, timeout_ms=LONG)
            run = await finished(db, host, pid)
    assert run.state == "COMPLETED" and run.result == {"done": True}, run
    # Parked when both branches waited, again when b alone did; the replays sent no write
    # again, and c followed b's wait.
    assert sorted(r["path"] for r in backend.requests) == ["/a", "/b", "/c"]
    rows = await tasks_of(db, pid)
    assert ["timer" in (row["result"] or {}) for row in rows] == [True, True, False, False]
    a, b = "/do/0/both/fork/branches/0/b0/do/1/nap#0", "/do/0/both/fork/branches/1/b1/do/1/nap#0"
    assert sorted(rows[1]["payload"]["parked"]) == [a, b] and rows[2]["payload"]["parked"] == [b]


async def test_a_wait_its_task_timeout_cuts_first_parks_until_the_timeout_and_times_out(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    nap = {"nap": {"wait": "PT1M", "timeout": {"after": "PT2S"}}}
    caught = {
        "try": [nap],
        "catch": {"errors": {"with": {"status": 408}}, "do": [{"late": {"set": {"late": True}}}]},
    }
    settings = ExecutionSettings(in_slot_wait_ms=100)
    async with two_slot_executor(db, WorkflowRuntime(settings, keyring)):
        pid = await start(
            db, keyring, document([{"guarded": caught}]), {}, host_id=host, timeout_ms=LONG
        )
        run = await finished(db, host, pid)
    # The timeout outcome, caught as when the wait slept in the slot until it.
    assert run.state == "COMPLETED" and run.result == {"late": True}, run
    first, resumed = await tasks_of(db, pid)
    due = datetime.fromisoformat(first["result"]["timer"])
    two_seconds, skew = timedelta(seconds=2), timedelta(seconds=1)
    assert first["created_ts"] + two_seconds - skew <= due <= first["updated_ts"] + two_seconds
    assert resumed["payload"]["parked"] == ["/do/0/guarded/try/0/nap#0"]
    assert resumed["result"] == {"finished": True}


async def test_a_parked_fork_survives_a_killed_worker_and_each_branch_write_is_sent_once(
    db: Database, keyring: Keyring, database_url: str
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as backend:

        def post(path: str) -> dict[str, Any]:
            return {"call": "http", "with": {"method": "post", "endpoint": backend.base + path}}

        fork = waiting_fork(
            {"do": [{"a": post("/a")}, {"nap": {"wait": {"seconds": 4}}}]},
            {"do": [{"b": post("/b")}, {"nap": {"wait": {"seconds": 6}}}, {"c": post("/c")}]},
        )
        doc = document([fork, {"after": {"set": {"done": True}}}])
        settings = {"in_slot_wait_ms": 100, "http_allowlist": [backend.base]}
        try:
            async with worker_process(database_url, "doomed", settings=settings) as doomed:
                pid = await start(db, keyring, doc, {}, host_id=host, timeout_ms=LONG)
                await wait_until(lambda: _all_parked(db, host, 1), what="the fork parked")
                due = (await tasks_of(db, pid))[1]["available_at"]
                doomed.send_signal(signal.SIGKILL)
                async with asyncio.timeout(20):
                    assert await doomed.wait() == -signal.SIGKILL
            async with worker_process(
                database_url, "rescuer", settings=settings, lease_ms=10_000
            ):  # fmt: skip
                run = await finished(db, host, pid)
        finally:
            await close_waiter(db)
    assert run.state == "COMPLETED" and run.result == {"done": True}, run
    # The rescuer replayed the fork from its parked task, at the due time the killed worker
    # recorded: the writes before the waits were not sent again.
    assert sorted(r["path"] for r in backend.requests) == ["/a", "/b", "/c"]
    rows = await tasks_of(db, pid)
    assert rows[1]["available_at"] == due and rows[1]["worker_id"] == "rescuer"
    assert rows[0]["worker_id"] == "doomed"
