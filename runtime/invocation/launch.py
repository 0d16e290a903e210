"""Writing an admitted run inside the admission transaction: process, spec, credential, owner.

Why not runtime.execution.start_workflow_run: it owns its transaction, while admission must
write the idempotency reservation, the admission-limit counts and the run in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runtime.execution import WORKFLOW_TASK_KIND
from runtime.execution import store as execution_store
from runtime.execution.credential import seal_credential, token_expiry
from runtime.invocation import store
from runtime.scheduler import BudgetAmounts, NewTask, enqueue_process
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
    limits: dict[str, Any] = field(default_factory=dict)
    workflow_version: str | None = None
    definition: dict[str, Any] | None = None
    tool_id: str | None = None
    binding_id: str | None = None


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
    await enqueue_process(
        conn,
        host_id=ctx.host_id,
        process_id=plan.process_id,
        first_task=NewTask(WORKFLOW_TASK_KIND, {"input": plan.input}, step_no=0),
        execution_class=plan.execution_class,
        deadline_ts=plan.deadline_ts,
        cancellation_policy=plan.cancellation_policy,
        budget=plan.budget,
        binding_id=plan.binding_id,
    )
    spec = execution_store.RunSpec(
        host_id=ctx.host_id,
        process_id=plan.process_id,
        wf_def_id=plan.wf_def_id,
        workflow_version=plan.workflow_version,
        definition=plan.definition,
        binding_id=plan.binding_id,
        user_id=ctx.user_id,
        limits=plan.limits,
    )
    await execution_store.insert_run_spec(conn, spec)
    if sealed is not None:
        await execution_store.insert_credential(
            conn,
            ctx.host_id,
            plan.process_id,
            sealed,
            token_expires_ts=token_expiry(ctx.user_token) or ctx.user_token_expires_at,
            expires_ts=plan.deadline_ts,
        )
    await store.insert_invocation(
        conn,
        {
            "host_id": ctx.host_id,
            "process_id": plan.process_id,
            "operation": plan.operation,
            "user_id": ctx.user_id,
            "end_user_subject": ctx.subject,
            "principal_subject": principal,
            "tool_id": plan.tool_id,
            "binding_id": plan.binding_id,
            "wf_def_id": plan.wf_def_id,
            "workflow_version": plan.workflow_version,
            "definition_digest": plan.definition_digest,
        },
    )


async def refresh_credential(
    conn: Connection, keyring: Keyring, ctx: InvocationContext, process_id: str
) -> None:
    """On a re-attach: store the caller's token if it outlives the stored one."""
    expires = token_expiry(ctx.user_token) or ctx.user_token_expires_at
    sealed = seal_credential(keyring, ctx.user_token, ctx.host_id, process_id)
    await store.replace_credential(conn, ctx.host_id, process_id, sealed, expires)
