"""workflow_start: run the saved head of a definition asynchronously and return its receipt."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from generated.models import WorkflowStartOutput
from runtime import telemetry
from runtime.admission.launch import seal_for
from runtime.admission.state import Admission
from runtime.admission.unknown_outcome import admit_or_unknown, unknown_admission
from runtime.canonical import CanonicalError, load_definition_yaml, timestamp
from runtime.engine import DefinitionError, WorkflowDefinition, parse_definition
from runtime.engine.check import worst_case_dispatches
from runtime.engine.check.service_identity import service_identity_problems
from runtime.engine.check.stage_marker import stage_of
from runtime.errors import WorkflowError
from runtime.execution import WORKFLOW_TASK_KIND, RunSpec, SpecLimits, first_task_payload
from runtime.execution.credential import token_expiry
from runtime.invocation import rules, store
from runtime.invocation.requests import StartRequest
from runtime.publication.secrets import missing_secrets, scope_refusal, unscoped_secrets
from runtime.scheduler.models import ExecutionClass
from runtime.scheduler.service import DEFAULT_BUDGET
from runtime.security import InvocationContext, Keyring, SealedSecret
from runtime.store import Connection, Database

# workflow_start runs are root starts of editors and schedulers: the standard class, the
# default budget, and seed 000's 30-day deadline ("workflow_start hard-codes ... a 30-day
# deadline"). A definition's own `timeout` shortens it; a longer one is capped at 30 days.
# A run that outlives its user's token with no exchange endpoint is not refused: seed 000's
# selector uses the original token "while it still verifies, and fail[s] the call with an
# authentication error once it does not" (docs/DECISIONS.md, X-3).
START_DEADLINE = timedelta(days=30)
START_KEY_KIND = "start"
START_CLASS: ExecutionClass = "standard"


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
        definition = parse_definition(document)
        # A step acting as a service identity needs approval evidence, as at publish.
        unapproved = service_identity_problems(definition)
        if unapproved:
            raise DefinitionError.collected(unapproved)
        return document, definition
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


def _receipt(admitted: store.StartOutcome, wf_def_id: str) -> WorkflowStartOutput:
    # A row that names a run has its state, digest and creation.
    assert admitted.process_id is not None and admitted.state is not None
    assert admitted.definition_digest is not None and admitted.created_ts is not None
    return WorkflowStartOutput(
        workflow_instance_id=admitted.process_id,
        state=admitted.state,
        wf_def_id=wf_def_id,
        definition_digest=admitted.definition_digest,
        submitted_at=timestamp(admitted.created_ts),
    )


def _sealed_or_none(
    keyring: Keyring, ctx: InvocationContext, process_id: str
) -> SealedSecret | None:
    # Without a sealing key only a run that makes no outbound call starts (_unsealed_refusal).
    if not keyring.has_usable_key:
        return None
    return seal_for(keyring, ctx, process_id)


def _refusal(judge: Callable[[], None]) -> WorkflowError | None:
    """judge's refusal of a new run (its WorkflowError), or None when it lets one start."""
    try:
        judge()
    except WorkflowError as refusal:
        return refusal
    return None


def _verdict(
    admission: Admission,
    admitted: datetime,
    deadline_ts: datetime,
) -> WorkflowError | None:
    """What refuses a new run, judged before the statement and applied only to a new run
    (seed 000: a re-attach or replay skips capacity checks): the class must have capacity
    (counted only once a run is admitted)."""
    return _refusal(
        lambda: admission.estimator.admit(
            START_CLASS, (deadline_ts - admitted).total_seconds() * 1000, count=False
        )
    )


def _unsealed_refusal(
    sealed: SealedSecret | None, definition: WorkflowDefinition
) -> WorkflowError | None:
    """The refusal of a run that calls out when its token cannot be stored sealed.

    Seed 000: the selector "applies to every run, including async runs started with
    workflow_start", and "the token must be stored, not only held in memory"; as invoke
    admission does ("Workflow refuses invoke admission when a usable sealing key is
    unavailable"), a start whose calls would need that token is refused instead of accepted
    and failed at its first call. A run that makes no call needs no token and still starts.
    """
    if sealed is not None or worst_case_dispatches(definition) == 0:
        return None
    return WorkflowError(
        "WORKFLOW_START_REJECTED",
        "no usable sealing key is configured, so the run's token cannot be stored for its "
        "outbound calls; configure the run credential keyring (WORKFLOW_LONG_KEYRING_FILE)",
    )


def _secrets_refusal(declared: tuple[str, ...], missing: list[str]) -> WorkflowError | None:
    """The refusal of a head that declares secrets the host does not hold, as publish's."""
    if not missing:
        return None
    problems = [
        {
            "pointer": f"/use/secrets/{declared.index(name)}",
            "rule": "unknown-secret",
            "message": f"the host holds no secret named {name}; put it with workflow_secret_put "
            "(or `workflow-mcp secrets put NAME`) and start again",
        }
        for name in missing
    ]
    return WorkflowError(
        "WORKFLOW_NOT_FOUND",
        f"the definition declares secrets the host does not hold: {', '.join(missing)}; put "
        "them with workflow_secret_put and start again",
        details={"secrets": missing, "problems": problems},
    )


@dataclass(frozen=True)
class _Call:
    """A start's values fixed before any round trip (a retry keeps them)."""

    ctx: InvocationContext
    request: StartRequest
    wf_def_id: str
    key: str
    process_id: str
    sealed: SealedSecret | None
    start_roles: frozenset[str] | None


def _start_params(
    call: _Call,
    head: store.SavedHead,
    document: dict[str, Any],
    input_digest: str,
    deadline_ts: datetime,
    refuse_new: bool,
) -> store.StartParams:
    ctx = call.ctx
    spec = RunSpec(
        host_id=ctx.host_id,
        process_id=call.process_id,
        wf_def_id=call.wf_def_id,
        workflow_version=None,
        definition=document,
        binding_id=None,
        user_id=ctx.user_id,
        # A workflow_start run's limits are the defaults (no binding bounds it).
        limits=SpecLimits(),
    )
    budget = DEFAULT_BUDGET
    roles = call.start_roles
    return store.StartParams(
        host_id=ctx.host_id,
        wf_def_id=call.wf_def_id,
        definition=document,
        scope_digest=rules.scope_digest(
            START_KEY_KIND, ctx.host_id, call.wf_def_id, ctx.subject, call.key
        ),
        process_id=call.process_id,
        principal_subject=rules.principal_of(ctx),
        input_digest=input_digest,
        definition_digest=head.definition_digest,
        deadline_ts=deadline_ts,
        user_id=ctx.user_id,
        end_user_subject=ctx.subject,
        starter_roles=None if roles is None else sorted(ctx.roles & roles),
        execution_class=START_CLASS,
        cancellation_policy="before-effects-only",
        attempts=budget.attempts,
        nested_calls=budget.nested_calls,
        request_bytes=budget.request_bytes,
        intermediate_bytes=budget.intermediate_bytes,
        result_bytes=budget.result_bytes,
        cost_units=budget.cost_units,
        task_kind=WORKFLOW_TASK_KIND,
        payload=first_task_payload(spec, call.request.input),
        limits=spec.limits,
        secret=call.sealed,
        token_expires_ts=token_expiry(ctx.user_token) or ctx.user_token_expires_at,
        # Like an invoke run, a start run has no LONG grant: the run id is its grant id, its
        # credential kind 'start' (migration 0060).
        action_limit=budget.nested_calls,
        refuse_new=refuse_new,
        disclosure_ceiling=call.request.disclosure_ceiling,
    )


def _stage_refusal(document: dict[str, Any], stage_claim: bool) -> WorkflowError | None:
    """A development-feature stage definition starts only with its stage claim (F5)."""
    if stage_claim or stage_of(document) is None:
        return None
    return WorkflowError(
        "WORKFLOW_START_REJECTED",
        "this definition is a development-feature stage: it requires a stage claim; start it "
        "with workflow_feature_stage_start",
        details={"reason": "requires-stage-claim"},
    )


async def _admit_on(
    conn: Connection,
    call: _Call,
    admission: Admission,
    *,
    stage_claim: bool,
) -> tuple[store.StartOutcome, WorkflowError | None]:
    """The start's two statements on conn (its own transaction or the caller's)."""
    ctx, request = call.ctx, call.request
    head = await store.select_head(conn, ctx.host_id, call.wf_def_id)
    document, definition = _head_document(head, request.expected_definition_digest)
    assert head is not None
    refused = _stage_refusal(document, stage_claim)
    if refused is not None:
        raise refused
    input_digest = rules.check_input(request.input, None, document)
    admitted = datetime.now(UTC)
    deadline_ts = _deadline(definition, admitted)
    # A head naming a secret the host lacks would only fail at its first call; like
    # publish, refuse it now (a new run only: a retry still re-attaches).
    missing = await missing_secrets(conn, ctx.host_id, definition.secrets)
    unscoped = await unscoped_secrets(conn, ctx.host_id, definition.secrets, call.wf_def_id)
    refusal = (
        _secrets_refusal(definition.secrets, missing)
        or scope_refusal(definition.secrets, unscoped, call.wf_def_id, "start it")
        or _unsealed_refusal(call.sealed, definition)
        or _verdict(admission, admitted, deadline_ts)
    )
    params = _start_params(call, head, document, input_digest, deadline_ts, refusal is not None)
    return await store.admit_start(conn, params), refusal


async def start_stage_in(
    conn: Connection,
    ctx: InvocationContext,
    request: StartRequest,
    keyring: Keyring,
    *,
    process_id: str,
    admission: Admission,
    start_roles: frozenset[str] | None = None,
) -> tuple[WorkflowStartOutput, bool]:
    """workflow_start's admission of a stage definition inside the caller's open transaction
    (workflow_feature_stage_start claims the stage in the same one); the receipt and whether
    it admitted a new run. A refusal raises, so the caller's transaction rolls back whole.
    Call note_admitted after the commit."""
    call = _Call(
        ctx=ctx,
        request=request,
        wf_def_id=str(uuid.UUID(request.wf_def_id)),
        key=request.idempotency_key or process_id,
        process_id=process_id,
        sealed=_sealed_or_none(keyring, ctx, process_id),
        start_roles=start_roles,
    )
    outcome, refusal = await _admit_on(conn, call, admission, stage_claim=True)
    if outcome.outcome == "refused":
        assert refusal is not None
        raise refusal
    if outcome.outcome == "conflict":
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT", "the stage run's key was used for another start"
        )
    return _receipt(outcome, call.wf_def_id), outcome.outcome == "accepted"


def note_admitted(admission: Admission, process_id: str) -> None:
    """Count a committed new run as start_workflow does."""
    admission.estimator.count_admitted(START_CLASS)
    telemetry.run_admitted(process_id)


async def start_workflow(
    db: Database,
    ctx: InvocationContext,
    request: StartRequest,
    keyring: Keyring,
    *,
    admission: Admission,
    start_roles: frozenset[str] | None = None,
) -> WorkflowStartOutput:
    """workflow_start: idempotent (body key, else a fresh one) async start of the saved head.

    start_roles: the roles allowed to start (security.tool_roles); None when none are checked.

    Two statements on one autocommit connection: the saved head, read without a lock (as
    ever: a head saved meanwhile does not stop a start of the one it read), and the admission
    (workflow_admit_start, migrations/functions/invocation_admission.sql).
    """
    process_id = str(uuid.uuid4())
    call = _Call(
        ctx=ctx,
        request=request,
        wf_def_id=str(uuid.UUID(request.wf_def_id)),
        key=request.idempotency_key or str(uuid.uuid4()),
        process_id=process_id,
        sealed=_sealed_or_none(keyring, ctx, process_id),
        start_roles=start_roles,
    )

    async def admit() -> tuple[store.StartOutcome, WorkflowError | None]:
        async with db.connection() as conn:
            return await _admit_on(conn, call, admission, stage_claim=False)

    # A connection found dropped is tried again with the same process id (as a transaction's
    # BEGIN was): a first try that committed holds the key for this very call, so the retry
    # attaches to or replays it.
    outcome, refusal = await admit_or_unknown(
        admit,
        lambda: unknown_admission(
            process_id,
            call.key,
            derived=False,
            generated=request.idempotency_key is None,
            may_write=True,
        ),
    )
    if outcome.outcome == "refused":
        assert refusal is not None
        raise refusal
    if outcome.outcome == "conflict":
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "this idempotencyKey was used with another input, definition or client",
        )
    if outcome.outcome == "accepted":
        admission.estimator.count_admitted(START_CLASS)
        telemetry.run_admitted(process_id)
    return _receipt(outcome, call.wf_def_id)
