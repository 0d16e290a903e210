"""workflow_binding_publish: validate, digest and record an immutable binding revision."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from generated import models
from generated.models import (
    PublicationWarning,
    ToolBinding,
    WorkflowBindingPublishInput,
    WorkflowBindingPublishOutput,
)
from runtime.binding_reach import Reach
from runtime.canonical import CanonicalError
from runtime.errors import WorkflowError, input_invalid
from runtime.publication.bindings.approval import active_version, close_with_decision
from runtime.publication.bindings.binding_problems import BindingProblem, refusal
from runtime.publication.bindings.destination_policy import DestinationPolicy, resolve_names
from runtime.publication.bindings.digests import approval_digest, binding_digest
from runtime.publication.bindings.reach_rules import cycle_problems
from runtime.publication.bindings.rejections import (
    InvalidBindingRequest,
    PublishEnvelope,
    is_final_rejection,
    negative_version_error,
    not_found,
    request_section_error,
    version_conflict,
)
from runtime.publication.bindings.status_rules import (
    Candidate,
    StatusDecision,
    current_owner,
    decide_status,
    stored_write_task,
)
from runtime.publication.bindings.validation import PinnedCheck, check_pinned, check_request
from runtime.publication.check_threads import off_loop
from runtime.publication.promotion.dependents import refuse_stranding
from runtime.publication.promotion.plan import approve_plan, plan_of, refuse_unused_plan
from runtime.publication.receipt_ledger import run_operation
from runtime.publication.store import binding_rows, definition_rows
from runtime.publication.store.definition_rows import Owner
from runtime.security import InvocationContext
from runtime.store import Connection, Database


@dataclass(frozen=True, slots=True)
class ValidatedPublish:
    """A publish request after the request-only rules: binding, reach and digests."""

    binding: ToolBinding
    reach: Reach
    binding_digest: str
    approval_digest: str


def validated_publish(binding: ToolBinding, reach: Reach) -> ValidatedPublish:
    """A request that passed its own rules, with its digests."""
    try:
        digests = binding_digest(binding, reach), approval_digest(binding)
    except CanonicalError as error:
        # Serialization failures do not establish invalid input: no evidence.
        raise input_invalid(
            f"binding is outside the canonical JSON profile: {error.message}"
        ) from None
    return ValidatedPublish(binding, reach, *digests)


async def lock_pinned_version(
    conn: Connection, host_id: str, binding: ToolBinding
) -> definition_rows.PinnedVersion:
    """Lock the pinned version FOR SHARE; it must exist, be active and match both digests."""
    version = await definition_rows.lock_pinned_version(
        conn, host_id, binding.wf_def_id, binding.workflow_version
    )
    if version is None:
        raise not_found("published definition version for the binding's wfDefId and version")
    if version.status != "active":
        raise WorkflowError(
            "WORKFLOW_DEFINITION_RETIRED", "the pinned definition version is retired"
        )
    if (
        version.definition_digest != binding.definition_digest
        or version.schema_digest != binding.schema_digest
    ):
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "definitionDigest or schemaDigest differs from the published version",
            details={
                "definitionDigest": version.definition_digest,
                "schemaDigest": version.schema_digest,
            },
        )
    return version


def revision_receipt(
    result: Literal["published", "unchanged"],
    revision: binding_rows.StoredRevision,
    aggregate_version: int,
    decision_id: str | None,
    warnings: list[PublicationWarning],
) -> WorkflowBindingPublishOutput:
    """The publish receipt of a stored revision, with the pinned version's checker warnings."""
    active = revision.revision_status == "approved"
    denied = None if active else revision.carry_over_denied_reason
    return WorkflowBindingPublishOutput(
        result=result,
        status="active" if active else "pendingApproval",
        tool_id=revision.tool_id,
        binding_id=revision.binding_id,
        source_binding_id=revision.source_binding_id,
        workflow_version=revision.workflow_version,
        definition_digest=revision.definition_digest,
        binding_digest=revision.binding_digest,
        approval_digest=revision.approval_digest,
        aggregate_version=aggregate_version,
        decision_id=UNSET if decision_id is None else decision_id,
        carry_over_denied_reason=denied or UNSET,
        warnings=warnings or UNSET,
    )


def _new_revision(
    ctx: InvocationContext,
    request: ValidatedPublish,
    binding_id: str,
    write_tasks: list[models.WriteTask],
    owner: Owner,
    status: StatusDecision,
    operation_id: str,
) -> binding_rows.NewRevision:
    return binding_rows.NewRevision(
        host_id=ctx.host_id,
        binding_id=binding_id,
        binding=request.binding,
        write_tasks=write_tasks,
        binding_digest=request.binding_digest,
        approval_digest=request.approval_digest,
        active=status.active,
        owner=owner,
        requested_by=ctx.user_id,
        approved_by=status.approved_by,
        approval_basis_id=status.basis_id,
        carry_over_denied_reason=status.denied_reason,
        decided_by=ctx.user_id if status.active else None,
        operation_id=operation_id,
    )


async def _unchanged(
    conn: Connection,
    ctx: InvocationContext,
    head: binding_rows.PublicationHead,
    digest: str,
    warnings: list[PublicationWarning],
) -> WorkflowBindingPublishOutput | None:
    for binding_id in (head.active_binding_id, head.pending_binding_id):
        if binding_id is None:
            continue
        revision = await binding_rows.select_revision(conn, ctx.host_id, binding_id)
        if revision is not None and revision.binding_digest == digest:
            return revision_receipt("unchanged", revision, head.aggregate_version, None, warnings)
    return None


async def _supersede_previous(
    conn: Connection,
    ctx: InvocationContext,
    head: binding_rows.PublicationHead,
    activating: bool,
    operation_id: str,
) -> None:
    previous = [head.pending_binding_id]
    if activating:
        previous.insert(0, head.active_binding_id)
    for binding_id in previous:
        if binding_id is not None:
            await close_with_decision(
                conn,
                ctx,
                binding_id,
                status="superseded",
                action="supersede",
                operation_id=operation_id,
            )


async def _lock_pinned_state(
    conn: Connection, host_id: str, binding: ToolBinding, request_problems: bool
) -> tuple[definition_rows.PinnedVersion, Owner] | None:
    """Lock the pinned version and its owner; None when that fails after a request problem.

    A request-only problem is a refusal whatever the stored state, so a missing, retired or
    mismatched version then only means its rules cannot add problems (as before this one-pass
    check, when the request's rules ran first and stopped the publish).
    """
    try:
        version = await lock_pinned_version(conn, host_id, binding)
        owner = await current_owner(conn, host_id, binding.wf_def_id)
    except WorkflowError:
        if request_problems:
            return None
        raise
    return version, owner


async def _cycle_problems(
    conn: Connection, host_id: str, publish: WorkflowBindingPublishInput
) -> list[BindingProblem]:
    tool_id = publish.binding.tool_id
    nested = sorted({item.nested_tool_id for item in publish.dependencies})
    if not nested:
        return []
    reaching = await binding_rows.dependencies_reaching(conn, host_id, nested, tool_id)
    return cycle_problems(tool_id, publish.dependencies, reaching)


async def _checked_publish(
    conn: Connection,
    ctx: InvocationContext,
    publish: WorkflowBindingPublishInput,
    policy: DestinationPolicy,
    parallelism_ceiling: int | None,
) -> tuple[ValidatedPublish, definition_rows.PinnedVersion, Owner, PinnedCheck]:
    """Every rule in one pass; raises one refusal listing every problem, blockers first."""
    if publish.expected_aggregate_version < 0:
        raise negative_version_error(publish.operation_id, "workflow_binding_publish")
    checked = check_request(publish)
    validated = None if checked.problems else validated_publish(checked.binding, checked.reach)
    state = await _lock_pinned_state(conn, ctx.host_id, checked.binding, bool(checked.problems))
    pinned = PinnedCheck([])
    if state is not None:
        pinned = await off_loop(  # parsing and checking the pinned definition is CPU-bound
            check_pinned,
            state[0].document,
            checked,
            policy,
            parallelism_ceiling=parallelism_ceiling,
        )
    problems = [
        *checked.problems,
        *pinned.problems,
        *await _cycle_problems(conn, ctx.host_id, publish),
    ]
    if problems:
        raise refusal(problems, publish.operation_id)
    assert validated is not None and state is not None
    return validated, state[0], state[1], pinned


async def _publish(
    conn: Connection,
    ctx: InvocationContext,
    publish: WorkflowBindingPublishInput,
    policy: DestinationPolicy,
    parallelism_ceiling: int | None,
) -> WorkflowBindingPublishOutput:
    request, pinned_version, owner, fit = await _checked_publish(
        conn, ctx, publish, policy, parallelism_ceiling
    )
    operation_id, expected = publish.operation_id, publish.expected_aggregate_version
    tool_id = request.binding.tool_id
    warnings = fit.warnings
    head = await binding_rows.lock_head(conn, ctx.host_id, tool_id)
    if expected != head.aggregate_version:
        raise version_conflict(head.aggregate_version)
    unchanged = await _unchanged(conn, ctx, head, request.binding_digest, warnings)
    if unchanged is not None:
        refuse_unused_plan(publish.repin_binding_ids, "the publish is unchanged; nothing moves")
        return unchanged
    candidate = Candidate(
        wf_def_id=request.binding.wf_def_id,
        approval_digest=request.approval_digest,
        reach=request.reach,
        write_tasks=fit.write_tasks,
        binding_approval=pinned_version.binding_approval,
        published_by=pinned_version.published_by,
    )
    status = await decide_status(conn, ctx, head, candidate, owner)
    repinned: list[str] = []
    if not status.active:
        refuse_unused_plan(
            publish.repin_binding_ids,
            "the revision would wait for the owner's approval; "
            "pass the plan to workflow_binding_decide",
        )
    else:
        plan = plan_of(publish.repin_binding_ids, policy, parallelism_ceiling, None, operation_id)
        repinned = await approve_plan(
            conn, ctx, plan, tool_id=tool_id, version=request.binding.workflow_version
        )
        # After the plan: the Tools it repinned no longer pin the version being replaced.
        await refuse_stranding(
            conn,
            ctx.host_id,
            tool_id,
            current_version=await active_version(conn, ctx.host_id, head),
            next_version=request.binding.workflow_version,
            doing="promoting this revision",
        )
    await _supersede_previous(conn, ctx, head, status.active, operation_id)
    binding_id = str(uuid.uuid4())
    write_tasks = [stored_write_task(task) for task in fit.write_tasks]
    revision = _new_revision(ctx, request, binding_id, write_tasks, owner, status, operation_id)
    await binding_rows.insert_revision(conn, revision)
    await binding_rows.insert_reach(conn, ctx.host_id, binding_id, request.reach)
    decision_id = None
    if status.active:
        assert status.action is not None
        await binding_rows.insert_evidence(
            conn, ctx.host_id, binding_id, write_tasks, owner.user_id
        )
        decision_id = await binding_rows.insert_decision(
            conn,
            host_id=ctx.host_id,
            tool_id=tool_id,
            binding_id=binding_id,
            action=status.action,
            actor=ctx.user_id,
            approval_digest=request.approval_digest,
            operation_id=operation_id,
        )
    version = await binding_rows.advance_head(
        conn,
        ctx.host_id,
        tool_id,
        active_binding_id=binding_id if status.active else head.active_binding_id,
        pending_binding_id=None if status.active else binding_id,
    )
    stored = await binding_rows.select_revision(conn, ctx.host_id, binding_id)
    assert stored is not None
    receipt = revision_receipt("published", stored, version, decision_id, warnings)
    return msgspec.structs.replace(receipt, repinned_binding_ids=repinned or UNSET)


async def publish_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingPublishInput,
    arguments: Mapping[str, Any],
    *,
    policy: DestinationPolicy | None = None,
    maximum_parallelism: int | None = None,
) -> WorkflowBindingPublishOutput:
    """workflow_binding_publish: record a revision as active or pendingApproval.

    The hostId assertion is checked first; then the (host, operationId) ledger row is claimed
    or locked before any rule, so request-only rejections (negative expected version,
    bindingFields, bindingReach) and VERSION_CONFLICT are stored and replayed unchanged.
    arguments (the exact argument object) is what the ledger's request digest covers.
    """
    targets = (target.endpoint_uri for target in request.endpoint_targets)
    destination_policy = await resolve_names(policy or DestinationPolicy(), targets)

    async def perform(conn: Connection) -> WorkflowBindingPublishOutput:
        return await _publish(conn, ctx, request, destination_policy, maximum_parallelism)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_binding_publish",
        arguments=arguments,
        perform=perform,
        output=WorkflowBindingPublishOutput,
        is_final=is_final_rejection,
    )


async def refuse_publish_request(
    db: Database,
    ctx: InvocationContext,
    envelope: PublishEnvelope,
    rejection: InvalidBindingRequest,
    arguments: Mapping[str, Any],
) -> WorkflowBindingPublishOutput:
    """Store a publish whose binding or reach the catalog validator refused, with its evidence.

    The envelope (hostId, operationId, expectedAggregateVersion) is valid, so the operation can
    be fenced: the rejection is stored under it like any request-only rejection (a negative
    expected version still wins, as in a publish the validator accepted), and replayed to every
    retry.
    """

    async def perform(conn: Connection) -> WorkflowBindingPublishOutput:
        if envelope.expected_aggregate_version < 0:
            raise negative_version_error(envelope.operation_id, "workflow_binding_publish")
        raise request_section_error(rejection, envelope.operation_id)

    return await run_operation(
        db,
        ctx,
        envelope,
        tool_name="workflow_binding_publish",
        arguments=arguments,
        perform=perform,
        output=WorkflowBindingPublishOutput,
        is_final=is_final_rejection,
    )
