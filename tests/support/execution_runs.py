"""Workflow runs started in-process: a run written as workflow_start writes one, and a wait.

start_workflow_run takes an inline definition (or a published version) and commits the run
through runtime.execution.admit_run in its own transaction (the run, first task, spec and
credential workflow_start's admission writes in its statement, without the reservation, owner
record and authority); the deadline is capped by the definition's workflow `timeout`, as there.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.engine import DefinitionError, parse_definition
from runtime.errors import WorkflowError
from runtime.execution import RunSpec, SpecLimits, admit_run, store, wait_for_result
from runtime.execution.credential import seal_credential, token_expiry
from runtime.scheduler.models import BudgetAmounts, CancellationPolicy, ExecutionClass, RunSnapshot
from runtime.scheduler.service import DEFAULT_BUDGET
from runtime.security import Keyring, SecretToken
from runtime.store import Connection, Database

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1LTEiLCJleHAiOjQxMDI0NDQ4MDB9.c2ln"


def _capped(deadline_ts: datetime, admitted: datetime, workflow_timeout_ms: int | None) -> datetime:
    # The workflow `timeout` counts from admission and can only shorten the run deadline.
    if workflow_timeout_ms is None:
        return deadline_ts
    return min(deadline_ts, admitted + timedelta(milliseconds=workflow_timeout_ms))


async def _version_timeout_ms(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> int | None:
    document = await store.select_definition_document(conn, host_id, wf_def_id, version)
    if document is None:
        raise WorkflowError("WORKFLOW_NOT_FOUND", "the definition version does not exist")
    try:
        return parse_definition(document).timeout_ms
    except DefinitionError:
        return None


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
    limits: SpecLimits | None = None,
) -> str:
    """Admit a run in one transaction (run, first task, spec, sealed credential); its id."""
    assert (definition is None) != (wf_def_id is None or version is None)
    process_id = str(uuid.uuid4())
    admitted = datetime.now(UTC)
    deadline_ts = deadline or admitted + timedelta(milliseconds=timeout_ms)
    if definition is not None:
        deadline_ts = _capped(deadline_ts, admitted, parse_definition(definition).timeout_ms)
    sealed = None
    if credential is not None:
        sealed = seal_credential(keyring, credential, host_id, process_id)
    spec = RunSpec(
        host_id=host_id,
        process_id=process_id,
        wf_def_id=wf_def_id,
        workflow_version=version,
        definition=None if definition is None else dict(definition),
        binding_id=binding_id,
        user_id=user_id,
        limits=limits or SpecLimits(),
    )
    async with db.transaction() as conn:
        if wf_def_id is not None and version is not None:
            published_timeout_ms = await _version_timeout_ms(conn, host_id, wf_def_id, version)
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


async def start(db: Database, keyring: Keyring, doc: dict[str, Any], data: Any, **kw: Any) -> str:
    return await start_workflow_run(
        db,
        host_id=kw.pop("host_id", str(uuid.uuid4())),
        user_id="u-1",
        input=data,
        keyring=keyring,
        credential=kw.pop("credential", SecretToken(TOKEN)),
        definition=doc,
        **kw,
    )


async def finished(db: Database, host_id: str, process_id: str) -> RunSnapshot:
    run = await wait_for_result(db, host_id, process_id, timeout=20)
    assert run is not None and run.state in ("COMPLETED", "FAILED", "CANCELLED"), run
    return run
