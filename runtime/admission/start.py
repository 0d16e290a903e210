"""workflow_start: run the saved head of a definition asynchronously and return its receipt."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from generated.models import WorkflowStartOutput
from runtime.admission.launch import RunPlan, seal_for, write_run
from runtime.admission.state import Admission
from runtime.admission.token_cover import check_token_covers_run
from runtime.canonical import CanonicalError, load_definition_yaml, timestamp
from runtime.engine import DefinitionError, WorkflowDefinition, parse_definition
from runtime.errors import WorkflowError
from runtime.invocation import rules, store
from runtime.invocation.requests import StartRequest
from runtime.scheduler.service import DEFAULT_BUDGET
from runtime.security import InvocationContext, Keyring, SealedSecret
from runtime.store import Connection, Database

# workflow_start runs are root starts of editors and schedulers: the standard class, the
# default budget, and seed 000's 30-day deadline ("workflow_start hard-codes ... a 30-day
# deadline"). A definition's own `timeout` shortens it; a longer one is capped at 30 days.
# Without a token exchange endpoint a start that calls out must hold a token lasting to this
# deadline (token_cover), so such a definition states a shorter `timeout`.
START_DEADLINE = timedelta(days=30)
START_KEY_KIND = "start"


# The parsed saved heads, by definition digest: a digest names one document, so its parse is
# the same for every start (YAML loading and parsing were a large share of a start's CPU).
_HEADS: dict[str, tuple[dict[str, Any], WorkflowDefinition]] = {}
_HEADS_SIZE = 256


def _head_document(
    head: store.SavedHead | None, expected: str | None
) -> tuple[dict[str, Any], WorkflowDefinition]:
    if head is None:
        raise WorkflowError("WORKFLOW_NOT_FOUND", "no saved definition with this wfDefId")
    if expected is not None and expected != head.definition_digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "expectedDefinitionDigest is not the saved head's digest",
            details={"definitionDigest": head.definition_digest},
        )
    if not head.active:
        raise WorkflowError("WORKFLOW_START_REJECTED", "the saved definition is not active")
    digest = head.definition_digest
    parsed = _HEADS.get(digest)
    if parsed is None:
        parsed = _parse_head(head.definition)
        if len(_HEADS) >= _HEADS_SIZE:
            del _HEADS[next(iter(_HEADS))]
        _HEADS[digest] = parsed
    return parsed


def _parse_head(text: str) -> tuple[dict[str, Any], WorkflowDefinition]:
    try:
        document = load_definition_yaml(text)
    except CanonicalError:
        raise WorkflowError(
            "WORKFLOW_START_REJECTED", "the saved definition cannot be read"
        ) from None
    try:
        return document, parse_definition(document)
    except DefinitionError as error:
        # The same problems publish would list, so the editor can show where to fix the head.
        raise WorkflowError(
            "WORKFLOW_START_REJECTED",
            f"the saved definition is not a valid workflow: {error.message}",
            details=error.details(),
        ) from None


def _deadline(definition: WorkflowDefinition, admitted: datetime) -> datetime:
    if definition.timeout_ms is None:
        return admitted + START_DEADLINE
    return admitted + min(timedelta(milliseconds=definition.timeout_ms), START_DEADLINE)


async def _receipt(
    conn: Connection, host_id: str, process_id: str, wf_def_id: str
) -> WorkflowStartOutput:
    run = await store.select_owned_run(conn, host_id, process_id)
    assert run is not None  # written or claimed in this transaction
    return WorkflowStartOutput(
        workflow_instance_id=process_id,
        state=run.state,
        wf_def_id=wf_def_id,
        definition_digest=run.definition_digest,
        submitted_at=timestamp(run.created_ts),
    )


def _authority(ctx: InvocationContext, plan: RunPlan) -> store.AuthorityInsert:
    # Like an invoke run, a start run has no LONG grant: the run id is its grant id. The seed
    # names no credential kind for it, so it gets its own ('start', migration 0060).
    return store.AuthorityInsert(
        host_id=ctx.host_id,
        grant_id=plan.process_id,
        process_id=plan.process_id,
        user_id=ctx.user_id,
        deadline_ts=plan.deadline_ts,
        action_limit=plan.budget.nested_calls,
        credential_kind="start",
    )


def _sealed_or_none(
    keyring: Keyring, ctx: InvocationContext, process_id: str
) -> SealedSecret | None:
    # Without a sealing key the run still starts; its outbound calls then fail closed.
    if not keyring.has_usable_key:
        return None
    return seal_for(keyring, ctx, process_id)


async def start_workflow(
    db: Database,
    ctx: InvocationContext,
    request: StartRequest,
    keyring: Keyring,
    *,
    admission: Admission,
    can_exchange: bool = False,
    start_roles: frozenset[str] | None = None,
) -> WorkflowStartOutput:
    """workflow_start: idempotent (body key, else a fresh one) async start of the saved head.

    can_exchange: a token exchange endpoint is configured, so the run may outlive the token.
    start_roles: the roles allowed to start (security.tool_roles); None when none are checked.
    """
    wf_def_id = str(uuid.UUID(request.wf_def_id))
    key = request.idempotency_key or str(uuid.uuid4())
    process_id = str(uuid.uuid4())
    sealed = _sealed_or_none(keyring, ctx, process_id)
    async with db.transaction() as conn:
        head = await store.select_head(conn, ctx.host_id, wf_def_id)
        document, definition = _head_document(head, request.expected_definition_digest)
        assert head is not None
        input_digest = rules.check_input(request.input, None, document)
        admitted = datetime.now(UTC)
        plan = RunPlan(
            process_id=process_id,
            operation="start",
            input=request.input,
            wf_def_id=wf_def_id,
            definition=document,
            definition_digest=head.definition_digest,
            deadline_ts=_deadline(definition, admitted),
            execution_class="standard",
            cancellation_policy="before-effects-only",
            budget=DEFAULT_BUDGET,
            starter_roles=None if start_roles is None else tuple(sorted(ctx.roles & start_roles)),
        )
        principal = rules.principal_of(ctx)
        claim = await store.claim_idempotency(
            conn,
            store.IdempotencyClaim(
                host_id=ctx.host_id,
                scope_digest=rules.scope_digest(
                    START_KEY_KIND, ctx.host_id, wf_def_id, ctx.subject, key
                ),
                operation="start",
                key_kind=START_KEY_KIND,
                process_id=process_id,
                principal_subject=principal,
                input_digest=input_digest,
                definition_digest=head.definition_digest,
                result_replay_ms=None,
                deadline_ts=plan.deadline_ts,
            ),
        )
        if claim.outcome == "conflict":
            raise WorkflowError(
                "WORKFLOW_IDEMPOTENCY_CONFLICT",
                "this idempotencyKey was used with another input, definition or client",
            )
        if claim.outcome == "accepted":
            check_token_covers_run(ctx, definition, plan.deadline_ts, can_exchange=can_exchange)
            admission.estimator.admit(
                plan.execution_class, (plan.deadline_ts - admitted).total_seconds() * 1000
            )
            await write_run(conn, ctx, plan, sealed, principal)
            await store.insert_action_authority(conn, _authority(ctx, plan))
        receipt = await _receipt(conn, ctx.host_id, claim.process_id, wf_def_id)
    return receipt
