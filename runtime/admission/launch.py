"""Writing a workflow_start run inside its admission transaction: the run and its owner record.

workflow_start writes the idempotency reservation, the run (runtime.execution.admit_run), its
owner record and its authority in one transaction. workflow_invoke writes all of that in its
one statement instead (store.admit_invoke).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime import telemetry
from runtime.execution import RunSpec, SpecLimits, admit_run
from runtime.execution.credential import seal_credential, token_expiry
from runtime.invocation import store
from runtime.scheduler import BudgetAmounts
from runtime.scheduler.models import CancellationPolicy, ExecutionClass
from runtime.security import InvocationContext, Keyring, SealedSecret
from runtime.store import Connection


@dataclass(frozen=True)
class RunPlan:
    """Everything an admitted run is written with."""

    process_id: str
    operation: str  # invoke | start
    input: Any
    wf_def_id: str
    definition_digest: str
    deadline_ts: datetime
    execution_class: ExecutionClass
    cancellation_policy: CancellationPolicy
    budget: BudgetAmounts
    workflow_version: str | None = None
    definition: dict[str, Any] | None = None
    tool_id: str | None = None
    binding_id: str | None = None
    # workflow_start: the caller's roles that authorized the start (read access keeps to them).
    starter_roles: tuple[str, ...] | None = None


def seal_for(keyring: Keyring, ctx: InvocationContext, process_id: str) -> SealedSecret:
    """Seal the caller's token for the run (before the transaction; refuses without a key)."""
    return seal_credential(keyring, ctx.user_token, ctx.host_id, process_id)


async def write_run(
    conn: Connection,
    ctx: InvocationContext,
    plan: RunPlan,
    sealed: SealedSecret | None,
    principal: str,
) -> None:
    """Insert the run, its first task, spec, sealed credential and owner record."""
    spec = RunSpec(
        host_id=ctx.host_id,
        process_id=plan.process_id,
        wf_def_id=plan.wf_def_id,
        workflow_version=plan.workflow_version,
        definition=plan.definition,
        binding_id=plan.binding_id,
        user_id=ctx.user_id,
        # A workflow_start run's limits are the defaults (no binding bounds it).
        limits=SpecLimits(),
    )
    telemetry.run_admitted(plan.process_id)
    await admit_run(
        conn,
        spec,
        input=plan.input,
        execution_class=plan.execution_class,
        deadline_ts=plan.deadline_ts,
        cancellation_policy=plan.cancellation_policy,
        budget=plan.budget,
        sealed=sealed,
        token_expires_ts=token_expiry(ctx.user_token) or ctx.user_token_expires_at,
    )
    await store.insert_invocation(
        conn,
        store.InvocationInsert(
            host_id=ctx.host_id,
            process_id=plan.process_id,
            operation=plan.operation,
            user_id=ctx.user_id,
            end_user_subject=ctx.subject,
            principal_subject=principal,
            tool_id=plan.tool_id,
            binding_id=plan.binding_id,
            wf_def_id=plan.wf_def_id,
            workflow_version=plan.workflow_version,
            definition_digest=plan.definition_digest,
            starter_roles=None if plan.starter_roles is None else list(plan.starter_roles),
        ),
    )


async def refresh_credential(
    conn: Connection, keyring: Keyring, ctx: InvocationContext, process_id: str
) -> None:
    """On a re-attach: store the caller's token if it outlives the stored one."""
    expires = token_expiry(ctx.user_token) or ctx.user_token_expires_at
    sealed = seal_credential(keyring, ctx.user_token, ctx.host_id, process_id)
    await store.replace_credential(conn, ctx.host_id, process_id, sealed, expires)
