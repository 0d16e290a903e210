"""A run written inside its admission's transaction (admit_run), and waiting for its result."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.errors import input_invalid
from runtime.execution import store
from runtime.execution.task_runner import WORKFLOW_TASK_KIND
from runtime.execution.waiter import TERMINAL_STATES, Wakeup, waiter_for
from runtime.scheduler import NewTask, enqueue_process
from runtime.scheduler.models import BudgetAmounts, CancellationPolicy, ExecutionClass, RunSnapshot
from runtime.security import SealedSecret
from runtime.store import Database, retry_on_connection_error


def _uuid(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise input_invalid(f"{name} must be a UUID") from None


def first_task_payload(spec: store.RunSpec, input: Any) -> dict[str, Any]:
    """The first task of a new run: its input and its spec (so its claim reads no spec row)."""
    return {"input": input, store.SPEC_KEY: store.spec_payload(spec)}


async def admit_run(
    conn: Any,
    spec: store.RunSpec,
    *,
    input: Any,
    execution_class: ExecutionClass,
    deadline_ts: datetime,
    cancellation_policy: CancellationPolicy,
    budget: BudgetAmounts,
    sealed: SealedSecret | None,
    token_expires_ts: datetime | None,
) -> None:
    """Write a run inside the caller's transaction: process, first task, spec, sealed credential.

    The tests' in-process runs (tests/support/execution_runs.py) write runs this way; both
    admissions write theirs in one statement of the function family instead
    (migrations/functions/invocation_admission.sql, workflow_admit_claimed_run).
    """
    await enqueue_process(
        conn,
        host_id=spec.host_id,
        process_id=spec.process_id,
        first_task=NewTask(
            WORKFLOW_TASK_KIND,
            first_task_payload(spec, input),
            step_no=0,
        ),
        execution_class=execution_class,
        deadline_ts=deadline_ts,
        cancellation_policy=cancellation_policy,
        budget=budget,
        binding_id=spec.binding_id,
    )
    await store.insert_run_spec(
        conn, spec, sealed, token_expires_ts=token_expires_ts, expires_ts=deadline_ts
    )


async def read_run(db: Database, host_id: str, process_id: str) -> RunSnapshot | None:
    """A run's state, result, error and effect state, scoped to its host."""
    host, process = _uuid(host_id, "host_id"), _uuid(process_id, "process_id")
    assert host is not None and process is not None

    # One statement on an autocommit connection is one snapshot: a read-only transaction
    # around it cost two more round trips, and waiters poll this at concurrency. A read, so a
    # connection found dropped is simply tried again (as a transaction's BEGIN would be).
    async def read() -> RunSnapshot | None:
        async with db.connection() as conn:
            return await store.select_process_state(conn, host, process)

    return await retry_on_connection_error(read, attempts=2)


class RunWatch:
    """Interest in one run, registered before the caller looks at it (nothing slips between)."""

    def __init__(self, db: Database, process_id: str, wakeup: Wakeup, poll_s: float) -> None:
        self._db = db
        self._process_id = process_id
        self._wakeup = wakeup
        self._poll_s = poll_s

    async def settled(
        self, host_id: str, timeout: float, current: RunSnapshot | None = None
    ) -> RunSnapshot | None:
        """The run once terminal, else its state when timeout seconds pass (None: unknown).

        current is the run as the caller already knows it (no first read). A run ended by this
        process's executor is handed over without a read; otherwise each wake-up (NOTIFY, or
        the fallback poll) reads it.
        """
        loop_deadline = datetime.now(UTC) + timedelta(seconds=timeout)
        run = current if current is not None else await self._read(host_id)
        while True:
            remaining = (loop_deadline - datetime.now(UTC)).total_seconds()
            if run is None or run.state in TERMINAL_STATES or remaining <= 0:
                return run
            if self._wakeup.stopped:
                # Shutting down: the state read last is the answer (the run goes on durably).
                return run
            await self._wakeup.wait_once(min(remaining, self._poll_s))
            run = self._wakeup.take() or await self._read(host_id)

    async def _read(self, host_id: str) -> RunSnapshot | None:
        return await read_run(self._db, host_id, self._process_id)


@asynccontextmanager
async def watch_run(db: Database, process_id: str) -> AsyncIterator[RunWatch]:
    """Watch one run (LISTEN in effect and hand-over registered) for the block's duration."""
    waiter = await waiter_for(db)
    process = _uuid(process_id, "process_id")
    assert process is not None
    async with waiter.watch(process) as wakeup:
        yield RunWatch(db, process, wakeup, waiter.poll_interval_s)


async def wait_for_result(
    db: Database, host_id: str, process_id: str, timeout: float
) -> RunSnapshot | None:
    """The run once terminal, else its current state when timeout seconds pass (None: unknown).

    Wakes on a hand-over from this process's executor or on the process-state NOTIFY, with a
    fallback poll.
    """
    async with watch_run(db, process_id) as watch:
        return await watch.settled(host_id, timeout)


async def forget_expired_credentials(db: Database) -> int:
    """The credential sweeper: delete credentials past their deadline (disabled: run end)."""
    async with db.transaction() as conn:
        return await store.delete_expired_credentials(conn)
