"""Definition publication services: save the editable head, publish and retire versions.

Each public function is one use case that owns its transaction; database scope always comes
from the verified ctx.host_id (the hostId argument is only an assertion, re-checked here).
Requests arrive as the generated input structs (already validated by the catalog validator);
receipts are the generated output structs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from msgspec import UNSET

from generated.models import (
    BindingApproval,
    Owner,
    PublicationWarning,
    WorkflowDefinitionPublishInput,
    WorkflowDefinitionPublishOutput,
    WorkflowDefinitionRetireInput,
    WorkflowDefinitionRetireOutput,
    WorkflowDefinitionSaveInput,
    WorkflowDefinitionSaveOutput,
)
from runtime.canonical import canonical_digest, definition_digest
from runtime.errors import WorkflowError
from runtime.publication.authoring.provenance import (
    AiAuthoring,
    check_private_first,
    check_provenance,
    check_reviewer,
    check_source_tools,
    provenance_of,
)
from runtime.publication.check_threads import off_loop
from runtime.publication.definition_checks import (
    check_document_version,
    checked_for_publication,
    load_definition,
    loaded_with_digest,
    refuse_written_credentials,
)
from runtime.publication.receipt_ledger import rejections_with_codes, run_operation
from runtime.publication.secrets import missing_secrets, scope_refusal, unscoped_secrets
from runtime.publication.source_revision import judge_revision
from runtime.publication.store import definition_rows
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Connection, Database

SaveResult = Literal["saved", "unchanged", "stale"]
# Rejections that depend only on the request and immutable versions, so replay stores them.
PUBLISH_FINAL_REJECTIONS = rejections_with_codes(
    frozenset({"WORKFLOW_INPUT_INVALID", "WORKFLOW_DEFINITION_MISMATCH"})
)
RETIRE_FINAL_REJECTIONS = rejections_with_codes(frozenset({"WORKFLOW_DEFINITION_MISMATCH"}))


def requested_approval(request: WorkflowDefinitionPublishInput) -> BindingApproval:
    """bindingApproval of a publish request (carryOver when absent)."""
    return "carryOver" if request.binding_approval is UNSET else request.binding_approval


def stored_owner(owner: Owner) -> definition_rows.Owner:
    """The owner of a request as stored (positionId absent: None)."""
    position_id = None if owner.position_id is UNSET else owner.position_id
    return definition_rows.Owner(owner.user_id, position_id)


# --- save -------------------------------------------------------------------------------------


def _saved_head(
    ctx: InvocationContext, request: WorkflowDefinitionSaveInput
) -> tuple[definition_rows.SavedHead, AiAuthoring | None]:
    owner = stored_owner(request.owner)
    document = load_definition(request.definition)
    refuse_written_credentials(document)
    provenance = provenance_of(document)
    if provenance is not None:
        check_private_first(provenance, request.catalog_visible)
        check_reviewer(ctx, provenance)
        check_provenance(document, provenance)
    content = {
        "namespace": request.namespace,
        "name": request.name,
        "version": request.version,
        "definition": request.definition,
        "lifecycleStatus": request.lifecycle_status,
        "catalogVisible": request.catalog_visible,
        "owner": {"userId": owner.user_id, "positionId": owner.position_id},
        "active": request.active,
    }
    head = definition_rows.SavedHead(
        host_id=ctx.host_id,
        wf_def_id=request.wf_def_id,
        source_revision=request.source_revision,
        namespace=request.namespace,
        name=request.name,
        version=request.version,
        definition=request.definition,
        definition_digest=definition_digest(document),
        content_digest=canonical_digest(content),
        lifecycle_status=request.lifecycle_status,
        catalog_visible=request.catalog_visible,
        owner=owner,
        active=request.active,
        actor=request.actor,
        saved_by=ctx.user_id,
        ai_authored=provenance is not None,
    )
    return head, provenance


def _save_receipt(
    result: SaveResult, wf_def_id: str, head: definition_rows.HeadState
) -> WorkflowDefinitionSaveOutput:
    return WorkflowDefinitionSaveOutput(
        result=result,
        wf_def_id=wf_def_id,
        applied_revision=head.source_revision,
        definition_digest=head.definition_digest,
        active=head.active,
    )


async def _apply_save(
    conn: Connection, head: definition_rows.SavedHead
) -> tuple[SaveResult, definition_rows.HeadState]:
    created = await definition_rows.insert_head(conn, head)
    if created is not None:
        return "saved", created
    current = await definition_rows.lock_head(conn, head.host_id, head.wf_def_id)
    assert current is not None  # the insert conflicted, and heads are never deleted
    verdict = judge_revision(
        head.source_revision,
        head.content_digest,
        current.source_revision,
        current.content_digest,
        conflict="sourceRevision is already applied with different content or visibility",
        details={
            "appliedRevision": current.source_revision,
            "definitionDigest": current.definition_digest,
        },
    )
    if verdict != "apply":
        return verdict, current
    updated = await definition_rows.update_head(conn, head)
    assert updated is not None  # we hold the row lock and our revision is higher
    await _move_pending_bindings(conn, head)
    return "saved", updated


async def _move_pending_bindings(conn: Connection, head: definition_rows.SavedHead) -> None:
    # Imported here: bindings build on definitions, not the reverse; only the two hooks into
    # them (here and in retire) call up.
    from runtime.publication.bindings import on_definition_owner_saved

    # Only save changes ownership: pending revisions follow the new owner, approvals stay.
    await on_definition_owner_saved(conn, head.host_id, head.wf_def_id, head.owner)


async def save_definition(
    db: Database, ctx: InvocationContext, request: WorkflowDefinitionSaveInput
) -> WorkflowDefinitionSaveOutput:
    """workflow_definition_save: apply a saved head under the sourceRevision rules.

    Lower revision: stale, nothing changes. Equal revision: unchanged when every saved field
    except actor (audit metadata) matches, else WORKFLOW_IDEMPOTENCY_CONFLICT with details
    {appliedRevision, definitionDigest}. Higher: the head (text, visibility, owner, active) is
    replaced. Every receipt carries the head's applied revision and its definition digest.
    """
    check_host_assertion(ctx, request.host_id)
    # Loads the YAML and checks any AI-authoring provenance: off the serving loop.
    saved, provenance = await off_loop(_saved_head, ctx, request)
    async with db.transaction() as conn:
        if provenance is not None:  # fails closed on the reviewer's catalog as it is now
            await check_source_tools(conn, ctx, provenance)
        result, head = await _apply_save(conn, saved)
    return _save_receipt(result, request.wf_def_id, head)


# --- publish ----------------------------------------------------------------------------------


def _version_receipt(
    result: Literal["published", "unchanged"],
    wf_def_id: str,
    version: str,
    state: definition_rows.VersionState,
    warnings: list[PublicationWarning],
) -> WorkflowDefinitionPublishOutput:
    return WorkflowDefinitionPublishOutput(
        result=result,
        status=state.status,
        wf_def_id=wf_def_id,
        version=version,
        definition_digest=state.definition_digest,
        schema_digest=state.schema_digest,
        binding_approval=state.binding_approval,
        warnings=warnings or UNSET,
    )


def _retire_receipt(
    result: Literal["retired", "unchanged"],
    request: WorkflowDefinitionRetireInput,
    state: definition_rows.VersionState,
    withdrawn_binding_ids: list[str],
) -> WorkflowDefinitionRetireOutput:
    return WorkflowDefinitionRetireOutput(
        result=result,
        status="retired",
        wf_def_id=request.wf_def_id,
        version=request.version,
        definition_digest=state.definition_digest,
        withdrawn_binding_ids=withdrawn_binding_ids,
    )


async def _existing_version_receipt(
    conn: Connection,
    ctx: InvocationContext,
    request: WorkflowDefinitionPublishInput,
    digest: str,
    existing: definition_rows.VersionState,
    document: dict[str, Any],
) -> WorkflowDefinitionPublishOutput:
    if existing.definition_digest != digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "this version is already published with a different definition digest",
            details={"publishedDefinitionDigest": existing.definition_digest},
        )
    # The same payload answers the same receipt: its warnings too (same digest, same document),
    # as stored with the version. A version published before they were kept gets them computed
    # once here and stored, so no later unchanged receipt runs the checker again.
    warnings = existing.publication_warnings
    if warnings is None:
        warnings = (await off_loop(checked_for_publication, document)).warnings
        await definition_rows.store_version_warnings(
            conn, ctx.host_id, request.wf_def_id, request.version, warnings
        )
    return _version_receipt("unchanged", request.wf_def_id, request.version, existing, warnings)


async def _publish(
    conn: Connection, ctx: InvocationContext, request: WorkflowDefinitionPublishInput
) -> WorkflowDefinitionPublishOutput:
    document, digest = await off_loop(loaded_with_digest, request.definition)
    if digest != request.expected_definition_digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "expectedDefinitionDigest differs from the digest of the definition text",
            details={"definitionDigest": digest},
        )
    check_document_version(document, request.version)
    provenance = provenance_of(document)
    if provenance is not None:  # the reviewed digest and the Phase 3 rules, again at publish
        await off_loop(check_provenance, document, provenance)
    existing = await definition_rows.lock_version(
        conn, ctx.host_id, request.wf_def_id, request.version
    )
    if existing is not None:
        return await _existing_version_receipt(conn, ctx, request, digest, existing, document)
    checked = await off_loop(checked_for_publication, document)
    await _require_secrets(conn, ctx, checked.secrets)
    out_of_scope = scope_refusal(
        checked.secrets,
        await unscoped_secrets(conn, ctx.host_id, checked.secrets, request.wf_def_id),
        request.wf_def_id,
        "publish",
    )
    if out_of_scope is not None:  # host state, not the request: never stored
        raise out_of_scope
    created = await definition_rows.insert_version(
        conn,
        definition_rows.NewVersion(
            host_id=ctx.host_id,
            wf_def_id=request.wf_def_id,
            version=request.version,
            namespace=request.namespace,
            name=request.name,
            definition=request.definition,
            document=document,
            definition_digest=digest,
            schema_digest=checked.schema_digest,
            binding_approval=requested_approval(request),
            owner=stored_owner(request.owner),
            published_by=ctx.user_id,
            operation_id=request.operation_id,
            normalized_document=checked.normalized_document,
            expression_digests=checked.expression_digests,
            warnings=checked.warnings,
        ),
    )
    if created is None:  # another operation published this version since our lookup
        raced = await definition_rows.lock_version(
            conn, ctx.host_id, request.wf_def_id, request.version
        )
        assert raced is not None
        return await _existing_version_receipt(conn, ctx, request, digest, raced, document)
    return _version_receipt(
        "published", request.wf_def_id, request.version, created, checked.warnings
    )


async def _require_secrets(
    conn: Connection, ctx: InvocationContext, declared: tuple[str, ...]
) -> None:
    # Host state, not the request: WORKFLOW_NOT_FOUND is never stored, so once the secret is
    # put a retry under the same operationId publishes.
    missing = await missing_secrets(conn, ctx.host_id, declared)
    if not missing:
        return
    problems = [
        {
            "pointer": f"/use/secrets/{declared.index(name)}",
            "rule": "unknown-secret",
            "message": f"the host holds no secret named {name}; put it with workflow_secret_put "
            "(or `workflow-mcp secrets put NAME`) and publish again",
        }
        for name in missing
    ]
    raise WorkflowError(
        "WORKFLOW_NOT_FOUND",
        f"the definition declares secrets the host does not hold: {', '.join(missing)}; put "
        "them with workflow_secret_put and publish again",
        details={"secrets": missing, "problems": problems},
    )


async def publish_definition(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowDefinitionPublishInput,
    arguments: Mapping[str, Any],
) -> WorkflowDefinitionPublishOutput:
    """workflow_definition_publish: store an immutable version; never touches the saved head.

    Recomputes the definition and input-schema digests (WORKFLOW_DEFINITION_MISMATCH when the
    expected digest differs), validates the definition, and stores the version. The same digest
    again is unchanged with the current status (retired included); another digest for an
    existing version is WORKFLOW_DEFINITION_MISMATCH. Idempotent per operationId; arguments
    (the exact argument object) is what the ledger's request digest covers.
    """

    async def perform(conn: Connection) -> WorkflowDefinitionPublishOutput:
        return await _publish(conn, ctx, request)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_definition_publish",
        arguments=arguments,
        perform=perform,
        output=WorkflowDefinitionPublishOutput,
        is_final=PUBLISH_FINAL_REJECTIONS,
    )


# --- retire -----------------------------------------------------------------------------------


async def _retire(
    conn: Connection, ctx: InvocationContext, request: WorkflowDefinitionRetireInput
) -> WorkflowDefinitionRetireOutput:
    # Lock order (seed "Concurrency"): the version row FOR UPDATE first, then any Tool heads.
    state = await definition_rows.lock_version(
        conn, ctx.host_id, request.wf_def_id, request.version
    )
    if state is None:
        raise WorkflowError("WORKFLOW_NOT_FOUND", "no published version with that wfDefId")
    if state.status == "retired":
        return _retire_receipt("unchanged", request, state, [])
    from runtime.publication.bindings import on_definition_version_retire  # see save

    # Under the version row lock: refused while an active revision pins the version; pending
    # revisions on it are withdrawn, each with a decision record.
    withdrawn = await on_definition_version_retire(
        conn, ctx, request.wf_def_id, request.version, request.operation_id
    )
    retired = await definition_rows.retire_version(
        conn,
        ctx.host_id,
        request.wf_def_id,
        request.version,
        retired_by=ctx.user_id,
        operation_id=request.operation_id,
    )
    assert retired is not None  # we hold the row lock and saw it active
    return _retire_receipt("retired", request, retired, withdrawn)


async def retire_definition(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowDefinitionRetireInput,
    arguments: Mapping[str, Any],
) -> WorkflowDefinitionRetireOutput:
    """workflow_definition_retire: move a version to retired (terminal); idempotent per operationId.

    Retiring a retired version returns result "unchanged" with status "retired"; an unknown
    version is WORKFLOW_NOT_FOUND (not stored, so it can be retried once the version exists).
    """

    async def perform(conn: Connection) -> WorkflowDefinitionRetireOutput:
        return await _retire(conn, ctx, request)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_definition_retire",
        arguments=arguments,
        perform=perform,
        output=WorkflowDefinitionRetireOutput,
        is_final=RETIRE_FINAL_REJECTIONS,
    )
