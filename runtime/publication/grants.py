"""workflow_definition_grants_sync: replace a definition's whole grant set, by source revision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from generated.models import (
    Grant,
    WorkflowDefinitionGrantsSyncInput,
    WorkflowDefinitionGrantsSyncOutput,
)
from runtime.canonical import canonical_digest
from runtime.errors import input_invalid
from runtime.publication.source_revision import judge_revision
from runtime.publication.store import grant_rows
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Connection, Database

SyncResult = Literal["saved", "unchanged", "stale"]


def grant_digest_form(grant: Grant) -> dict[str, Any]:
    """The grant as it enters grantsDigest: environments sorted."""
    return {
        "grantId": grant.grant_id,
        "toolId": grant.tool_id,
        "allowedEnvironments": sorted(grant.allowed_environments),
        "toolVersion": grant.tool_version,
        "lightapiDigest": grant.lightapi_digest,
    }


def grants_digest(grants: Sequence[Grant]) -> str:
    """Canonical digest of a grant set: grants sorted by grantId."""
    ordered = sorted(grants, key=lambda grant: grant.grant_id)
    return canonical_digest([grant_digest_form(grant) for grant in ordered])


def _refuse_repeated_grant_ids(grants: Sequence[Grant]) -> None:
    # A domain rule the schema cannot state (uniqueness by one member of each item).
    seen: set[str] = set()
    for grant in grants:
        if grant.grant_id in seen:
            raise input_invalid(f"grantId {grant.grant_id!r} appears twice")
        seen.add(grant.grant_id)


async def _apply_sync(
    conn: Connection, request: WorkflowDefinitionGrantsSyncInput, sync: grant_rows.GrantSync
) -> tuple[SyncResult, grant_rows.GrantSyncState]:
    created = await grant_rows.insert_sync(conn, sync)
    if created is None:
        current = await grant_rows.lock_sync(conn, sync.host_id, sync.wf_def_id)
        assert current is not None  # the insert conflicted, and sync rows are never deleted
        verdict = judge_revision(
            sync.source_revision,
            sync.grants_digest,
            current.source_revision,
            current.grants_digest,
            conflict="sourceRevision is already applied with a different grant set",
            details={
                "appliedRevision": current.source_revision,
                "grantsDigest": current.grants_digest,
            },
        )
        if verdict != "apply":
            return verdict, current
        created = await grant_rows.update_sync(conn, sync)
        assert created is not None  # we hold the row lock and our revision is higher
    await grant_rows.replace_grants(conn, sync, request.grants)
    return "saved", created


async def sync_definition_grants(
    db: Database, ctx: InvocationContext, request: WorkflowDefinitionGrantsSyncInput
) -> WorkflowDefinitionGrantsSyncOutput:
    """Replace the grant set in one transaction under the same sourceRevision rules as save.

    Receipt: {result: saved|unchanged|stale, wfDefId, appliedRevision, grantsDigest}; an equal
    revision with another set is WORKFLOW_IDEMPOTENCY_CONFLICT with {appliedRevision,
    grantsDigest}. The actor is audit metadata and is not compared.
    """
    check_host_assertion(ctx, request.host_id)
    _refuse_repeated_grant_ids(request.grants)
    sync = grant_rows.GrantSync(
        host_id=ctx.host_id,
        wf_def_id=request.wf_def_id,
        source_revision=request.source_revision,
        grants_digest=grants_digest(request.grants),
        actor=request.actor,
        synced_by=ctx.user_id,
    )
    async with db.transaction() as conn:
        result, state = await _apply_sync(conn, request, sync)
    return WorkflowDefinitionGrantsSyncOutput(
        result=result,
        wf_def_id=request.wf_def_id,
        applied_revision=state.source_revision,
        grants_digest=state.grants_digest,
    )
