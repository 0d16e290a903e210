"""Scheduler use cases: each function owns one transaction (store helpers never commit)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.errors import WorkflowError, input_invalid
from runtime.scheduler import faults, wakeup
from runtime.scheduler.errors import (
    agreeing,
    cancelled_error,
    ending_state,
    error_document,
    timeout_error,
)
from runtime.scheduler.models import (
    CANCELLATION_POLICIES,
    EXECUTION_CLASSES,
    LIVE_STATES,
    BudgetAmounts,
    CancellationPolicy,
    CancelOutcome,
    ClaimedTask,
    Completion,
    EffectState,
    ExecutionClass,
    LeaseState,
    NewTask,
    ReconcileOutcome,
    RunSnapshot,
    RunState,
    SchedulerSettings,
    Successor,
    TaskOutcome,
)
from runtime.scheduler.outcomes import HUB
from runtime.scheduler.store import ledgers, queue, runs
from runtime.store import Connection, Database, PerDatabase, retry_on_connection_error
from runtime.store.batches import StatementBatcher, on_pool
from runtime.telemetry import metrics

CANCEL_LOCKED_POINT = "cancel_locked"
DEFAULT_BUDGET = BudgetAmounts(
    attempts=32,
    nested_calls=8,
    request_bytes=1 << 20,
    intermediate_bytes=8 << 20,
    result_bytes=1 << 20,
    cost_units=10_000,
)


async def enqueue_process(
    conn: Connection,
    *,
    host_id: str,
    first_task: NewTask,
    execution_class: ExecutionClass = "interactive",
    deadline_ts: datetime | None = None,
    timeout_ms: int = 30_000,
    cancellation_policy: CancellationPolicy = "before-effects-only",
    budget: BudgetAmounts = DEFAULT_BUDGET,
    binding_id: str | None = None,
    process_id: str | None = None,
) -> str:
    """Insert a run, its budget row and its first task (NOTIFY) inside the caller's transaction."""
    host = _uuid(host_id, "host_id")
    if execution_class not in EXECUTION_CLASSES:
        raise input_invalid(f"unknown execution class {execution_class!r}")
    if cancellation_policy not in CANCELLATION_POLICIES:
        raise input_invalid(f"unknown cancellation policy {cancellation_policy!r}")
    run_id = _uuid(process_id, "process_id") if process_id else str(uuid.uuid4())
    deadline = deadline_ts or datetime.now(UTC) + timedelta(milliseconds=timeout_ms)
    await runs.insert_run(
        conn,
        host_id=host,
        process_id=run_id,
        execution_class=execution_class,
        deadline_ts=deadline,
        cancellation_policy=cancellation_policy,
        binding_id=_uuid(binding_id, "binding_id") if binding_id else None,
        budget=budget,
        first_task=first_task,
        step_no=first_task.step_no if first_task.step_no is not None else 0,
    )
    return run_id


async def cancel_process(
    conn: Connection, host_id: str, process_id: str, error: WorkflowError
) -> CancelOutcome:
    """Cancel a run per its policy inside the caller's transaction.

    Ending a run whose effect state is none is always safe (nothing was dispatched); after an
    effect only a cooperative run is asked to stop, a before-effects-only run is left to finish.
    A run already past its deadline ends as the deadline's end (WORKFLOW_TIMEOUT) whoever asks,
    so its stored end never depends on whether the deadline sweep came first.
    """
    row = await runs.lock_process(conn, host_id, process_id)
    if row is None or row.state not in LIVE_STATES:
        return "alreadyTerminal"
    # Lets a test run the deadline sweep while a cancel holds the live run's row.
    await faults.point(CANCEL_LOCKED_POINT)
    policy = row.cancellation_policy
    if policy == "disabled":
        return "disabled"
    if row.effect_state == "none":
        if row.past_deadline:
            error = timeout_error(after_effect=False)
        await runs.fail_process(conn, host_id, process_id, error)
        return "cancelled"
    if policy == "cooperative":
        await runs.request_cancel(conn, host_id, process_id)
        return "cancellationRequested"
    return "effect"


async def get_process(db: Database, host_id: str, process_id: str) -> runs.ProcessRow | None:
    """One run (state, result, error, effect state, budget counters), scoped to its host."""
    async with db.transaction(read_only=True) as conn:
        return await runs.fetch_process(
            conn, _uuid(host_id, "host_id"), _uuid(process_id, "process_id")
        )


async def complete(
    db: Database,
    lease: LeaseState,
    outcome: TaskOutcome,
    successor: Successor | None = None,
) -> Completion:
    """Commit a handler's outcome under its lease: budget used, task done, next tasks or run end.

    One transaction, and for at most one next task one statement (workflow_complete_task); a
    run it ends is handed to this process's waiters once committed. With successor, a single
    next task is inserted already claimed by that worker when no other ready work waits
    (nothing is skipped ahead of, and no claim round trip is spent).
    """
    if len(outcome.next_tasks) <= 1:
        completion = await _complete_at_once(db, lease, outcome, successor)
        if completion is not None:
            return completion
    return await _complete_in_transaction(db, lease, outcome, successor)


async def _complete_at_once(
    db: Database, lease: LeaseState, outcome: TaskOutcome, successor: Successor | None
) -> Completion | None:
    """The run's end or its one next task in one statement; None: a deadline or cancel ends it.

    None means nothing was written: that end's error is worded on the transaction path.
    """

    # A run with no waiter here has its end notified with the completion itself (one round
    # trip, no second statement later); a waiter that leaves meanwhile gets announce_run_end.
    notify_end = outcome.finish and not HUB.waits_here(lease.process_id)

    async def attempt() -> runs.CompletedAtOnce:
        if not notify_end:
            # With the process's other completions waiting meanwhile, in one statement.
            return await _completions_of(db).batcher.run(
                None, runs.Completing(lease, outcome, successor)
            )
        async with db.connection() as conn:
            return await runs.complete_at_once(conn, lease, outcome, successor, announce_end=True)

    with HUB.settling(lease.process_id) as settlement:
        # Safe to repeat: a first try that committed before its answer was lost left the task
        # done and its lease cleared, so the repeat is refused as LeaseLost, as a lost COMMIT
        # answer is on the transaction path (the executor logs it; the waiters are woken).
        done = await retry_on_connection_error(attempt, attempts=2)
        if done.outcome == "ending":
            return None
        if done.outcome == "finished" and done.effect_state is not None:
            settlement.hand(_ended("COMPLETED", done.effect_state, result=outcome.run_result))
    # Committed without a NOTIFY (migration 0018). A waiter of this process is handed the end:
    # the call that admitted the run waits in the process that admitted it, and a free slot of
    # that process takes the run's first task, so this is the common case, and a NOTIFY would
    # be a statement per call for nobody. A second waiter of the same run in another process
    # (a retry of the call that landed there) then reads the run at its next poll instead
    # (within a second: the result waiter's DEFAULT_POLL_INTERVAL_S). A run with no waiter
    # here had its NOTIFY sent with the completion; one whose waiter left is announced now.
    ended = done.outcome == "finished" and done.effect_state is not None
    if ended and not settlement.delivered and not notify_end:
        wakeup.announce_run_end(db, lease.process_id)
    elif done.ready is not None:
        wakeup.announce_task(db, *done.ready)
    return Completion(done.backlog, done.claimed)


# workflow_completion_batch_max() of migration 0085: the statement refuses a larger batch.
COMPLETION_BATCH_MAX = 16
CompletionBatcher = StatementBatcher[None, runs.Completing, runs.CompletedAtOnce]


class _Completions:
    """The completions of one database: alone while quiet, batched while busy."""

    def __init__(self, db: Database) -> None:
        # Set by the executor on this database (SchedulerSettings.completion_statements).
        self.statements = SchedulerSettings().completion_statements
        self.batcher: CompletionBatcher = on_pool(
            db,
            runs.complete_completing,
            runs.complete_at_once_batch,
            batch_max=COMPLETION_BATCH_MAX,
            in_flight=lambda: self.statements,
            sent=metrics.record_completion_statement,
        )


_completions_of: PerDatabase[_Completions] = PerDatabase(_Completions)


def use_completion_statements(db: Database, statements: int) -> None:
    """How many one-statement completions on db may be in flight at once (the rest batch)."""
    _completions_of(db).statements = statements


async def _complete_in_transaction(
    db: Database, lease: LeaseState, outcome: TaskOutcome, successor: Successor | None
) -> Completion:
    """complete() as one transaction of several statements: parallel next tasks, or a run
    ending at its deadline or cancellation signal."""
    with HUB.settling(lease.process_id) as settlement:
        async with db.transaction() as conn:
            if outcome.consume is not None:
                await ledgers.consume_budget(conn, lease, outcome.consume)
            run = await runs.complete_task(conn, lease, outcome.output)
            if run.backlog or len(outcome.next_tasks) != 1:
                successor = None
            ended, claimed = await _after_completion(conn, lease, outcome, run, successor)
        if ended is not None:
            settlement.hand(ended)
    return Completion(run.backlog, claimed)


async def _after_completion(
    conn: Connection,
    lease: LeaseState,
    outcome: TaskOutcome,
    run: runs.CompletedTask,
    successor: Successor | None,
) -> tuple[RunSnapshot | None, tuple[ClaimedTask, LeaseState] | None]:
    """Finish the run, end it, or enqueue its next tasks: the run's end and any claimed task."""
    host_id, process_id = lease.host_id, lease.process_id
    if outcome.finish:
        effect = await runs.finish_process(conn, host_id, process_id, outcome.run_result)
        ended = None if effect is None else _ended("COMPLETED", effect, result=outcome.run_result)
        return ended, None
    error: WorkflowError | None = None
    after_effect = run.effect_state != "none"
    if run.past_deadline and run.cancellation_policy != "disabled":
        # The dispatched step was allowed to finish; nothing new starts after the deadline.
        # A cooperative signal honoured now is the deadline's end too, whoever raised it.
        error = timeout_error(after_effect=after_effect)
    elif run.cancel_requested and run.cancellation_policy == "cooperative":
        # The signal is honoured between steps: nothing new is scheduled.
        error = cancelled_error(after_effect=after_effect)
    if error is not None:
        effect = await runs.end_process(conn, host_id, process_id, error)
        ended = None if effect is None else _ended(ending_state(error), effect, error=error)
        return ended, None
    for offset, task in enumerate(outcome.next_tasks, start=1):
        step_no = task.step_no if task.step_no is not None else lease.step_no + offset
        if successor is not None and task.available_at is None:
            claimed = await queue.insert_claimed_task(
                conn,
                lease,
                task,
                step_no,
                worker_id=successor.worker_id,
                lease_ms=successor.lease_ms,
                overrun_ms=successor.overrun_ms,
            )
            if claimed is not None:
                return None, claimed
        await runs.insert_task(
            conn, host_id=host_id, process_id=process_id, task=task, step_no=step_no
        )
    return None, None


async def fail(db: Database, lease: LeaseState, error: WorkflowError) -> None:
    """Fail the leased task and its run with error (fenced). Raises LeaseLost.

    WORKFLOW_CANCELLED and WORKFLOW_TIMEOUT (the deadline) end both as cancelled, not failed.
    """
    state = ending_state(error)
    with HUB.settling(lease.process_id) as settlement:
        async with db.transaction() as conn:
            task_state = "cancelled" if state == "CANCELLED" else "failed"
            await runs.fail_task(conn, lease, error, state=task_state)
            effect = await runs.end_process(conn, lease.host_id, lease.process_id, error)
        if effect is not None:
            settlement.hand(_ended(state, effect, error=error))


def _ended(
    state: RunState, effect: EffectState, *, result: Any = None, error: WorkflowError | None = None
) -> RunSnapshot:
    """A terminal run as its waiters read it (what select_process_state reads)."""
    document = None if error is None else error_document(agreeing(error, effect))
    return RunSnapshot(state, result, document, effect)


async def cancel_signal(db: Database, lease: LeaseState) -> WorkflowError | None:
    """The error to stop with when the run asks to be cancelled, else None.

    WORKFLOW_CANCELLED, or WORKFLOW_TIMEOUT once the deadline passed: a run past its deadline
    ends as the deadline's end whichever path stops it. Read from the run row at every call:
    renewal only copies the signal onto the lease now and then, and a dispatch must not wait.
    """
    async with db.transaction(read_only=True) as conn:
        row = await runs.select_cancel_signal(conn, lease.host_id, lease.process_id)
    if row is None or not row.cancel_requested:
        return None
    lease.cancel_requested.set()
    after_effect = row.effect_state != "none"
    if row.past_deadline:
        return timeout_error(after_effect=after_effect)
    return cancelled_error(after_effect=after_effect)


async def release(db: Database, lease: LeaseState) -> bool:
    """Give the leased task back to the queue; False when the lease was already lost."""
    async with db.transaction() as conn:
        return await runs.release_task(conn, lease)


async def mark_effect_possible(
    db: Database,
    lease: LeaseState,
    step_no: int,
    *,
    takeover: bool = False,
    request_digest: str | None = None,
    compensation: Any = None,
) -> None:
    """Before dispatching an external effect: record it as possible (fenced).

    takeover lets an idempotent task re-mark a step an earlier claim left possible; otherwise
    a possible step of another claim refuses, so one write is never dispatched twice.
    """
    async with db.transaction() as conn:
        await ledgers.mark_effect_possible(
            conn,
            lease,
            step_no,
            takeover=takeover,
            request_digest=request_digest,
            compensation=compensation,
        )
    lease.effect_dispatched = True


async def confirm_effect(db: Database, lease: LeaseState, step_no: int, output: Any = None) -> bool:
    """After the effect succeeded: record it as confirmed with its output (fenced)."""
    async with db.transaction() as conn:
        return await ledgers.confirm_effect(conn, lease, step_no, output)


async def reserve(db: Database, lease: LeaseState, amounts: BudgetAmounts) -> str:
    """Reserve budget for a dispatch, all counters or none (fenced); the reservation id."""
    async with db.transaction() as conn:
        return await ledgers.reserve_budget(conn, lease, amounts)


async def reconcile(
    db: Database, lease: LeaseState, reservation_id: str, actual: BudgetAmounts
) -> ReconcileOutcome:
    """Settle a reservation with actual usage, exactly once (fenced)."""
    async with db.transaction() as conn:
        return await ledgers.reconcile_budget(conn, lease, reservation_id, actual)


def _uuid(value: str | None, name: str) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise input_invalid(f"{name} must be a UUID") from None
