"""Starting a durable workflow run and waiting for its result (the internal API)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.engine import DefinitionError, parse_definition
from runtime.errors import WorkflowError, input_invalid
from runtime.execution import store
from runtime.execution.credential import seal_credential, token_expiry
from runtime.execution.task_runner import WORKFLOW_TASK_KIND
from runtime.execution.waiter import TERMINAL_STATES, Wakeup, waiter_for
from runtime.scheduler import NewTask, enqueue_process
from runtime.scheduler.models import BudgetAmounts, CancellationPolicy, ExecutionClass, RunSnapshot
from runtime.scheduler.service import DEFAULT_BUDGET
from runtime.security import Keyring, SealedSecret, SecretToken
from runtime.store import Database, retry_on_connection_error


def _uuid(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise input_invalid(f"{name} must be a UUID") from None


def _check_source(
    definition: Mapping[str, Any] | None, wf_def_id: str | None, version: str | None
) -> int | None:
    """Refuse a bad source; the inline definition's workflow `timeout` in ms, if any."""
    if (definition is None) == (wf_def_id is None or version is None):
        raise input_invalid("give either a definition document or wf_def_id and version")
    if definition is None:
        return None
    try:
        return parse_definition(definition).timeout_ms
    except DefinitionError as exc:
        raise input_invalid(f"the definition is invalid: {exc}") from None


def _capped(deadline_ts: datetime, admitted: datetime, workflow_timeout_ms: int | None) -> datetime:
    # The workflow `timeout` counts from admission and can only shorten the run deadline.
    if workflow_timeout_ms is None:
        return deadline_ts
    return min(deadline_ts, admitted + timedelta(milliseconds=workflow_timeout_ms))


async def start_workflow_run(
    db: Database,
    *,
    host_id: str,
    user_id: str,
    input: Any,
    keyring: Keyring,
    credential: SecretToken | None,
    definition: Mapping[str, Any] | None = None,
    wf_def_id: str | None = None,
    version: str | None = None,
    execution_class: ExecutionClass = "interactive",
    deadline: datetime | None = None,
    timeout_ms: int = 30_000,
    cancellation_policy: CancellationPolicy = "before-effects-only",
    budget: BudgetAmounts = DEFAULT_BUDGET,
    binding_id: str | None = None,
    limits: store.SpecLimits | None = None,
) -> str:
    """Admit a run in one transaction (run, first task, spec, sealed credential); its id."""
    host = _uuid(host_id, "host_id")
    assert host is not None
    workflow_timeout_ms = _check_source(definition, wf_def_id, version)
    process_id = str(uuid.uuid4())
    admitted = datetime.now(UTC)
    deadline_ts = _capped(
        deadline or admitted + timedelta(milliseconds=timeout_ms), admitted, workflow_timeout_ms
    )
    sealed = None
    if credential is not None:
        # Sealed before the transaction: admission never holds locks while encrypting.
        sealed = seal_credential(keyring, credential, host, process_id)
    spec = store.RunSpec(
        host_id=host,
        process_id=process_id,
        wf_def_id=_uuid(wf_def_id, "wf_def_id"),
        workflow_version=version,
        definition=None if definition is None else dict(definition),
        binding_id=_uuid(binding_id, "binding_id"),
        user_id=user_id,
        limits=limits or store.SpecLimits(),
    )
    async with db.transaction() as conn:
        if spec.wf_def_id is not None and version is not None:
            published_timeout_ms = await _check_version(conn, host, spec.wf_def_id, version)
            deadline_ts = _capped(deadline_ts, admitted, published_timeout_ms)
        await admit_run(
            conn,
            spec,
            input=input,
            execution_class=execution_class,
            deadline_ts=deadline_ts,
            cancellation_policy=cancellation_policy,
            budget=budget,
            sealed=sealed,
            token_expires_ts=None if credential is None else token_expiry(credential),
        )
    return process_id


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

    For admissions that must commit the run together with their own rows (idempotency
    reservations, admission-limit counts); start_workflow_run wraps it in its own transaction.
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


async def _check_version(conn: Any, host_id: str, wf_def_id: str, version: str) -> int | None:
    """Refuse an unknown version; its workflow `timeout` in ms, if any."""
    document = await store.select_definition_document(conn, host_id, wf_def_id, version)
    if document is None:
        raise WorkflowError("WORKFLOW_NOT_FOUND", "the definition version does not exist")
    try:
        return parse_definition(document).timeout_ms
    except DefinitionError:
        return None  # published documents were checked at publication; the worker re-parses


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
