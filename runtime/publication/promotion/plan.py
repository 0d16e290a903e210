"""Promotion plans: the outer Tools' repins approved with the move of the Tool they pin.

Seed 001 "Publication, Versioning, And Rollback": an incompatible change cannot strand outer
bindings; "the outer tools are explicitly repinned, retested, and reapproved in the same
promotion plan". A plan (repinBindingIds of workflow_binding_publish, _decide and _rollback)
names pending revisions of other Tools that pin the moving Tool at the version it moves to; each
is locked, revalidated and approved in the caller's transaction before the reverse dependency
gate runs, so one refusal of any entry refuses the whole call and changes nothing.

A retirement's plan (workflow_binding_retire) moves the Tool to no version at all: its entries
are pending revisions of the Tools whose active revision pins the retiring one, and which no
longer pin it (they dropped the dependency, or call another Tool instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import UNSET, UnsetType

from runtime.errors import WorkflowError, input_invalid
from runtime.publication.bindings.approval import (
    Reviewed,
    approve_reviewed,
    lock_reviewed_revision,
    revalidate,
)
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.publication.bindings.rejections import not_found
from runtime.publication.store import binding_rows, lineage_rows
from runtime.security import InvocationContext
from runtime.store import Connection


@dataclass(frozen=True, slots=True)
class Plan:
    """A call's plan and what approving its revisions needs: the rules as configured now."""

    binding_ids: tuple[str, ...]
    policy: DestinationPolicy
    parallelism_ceiling: int | None
    comment: str | None
    operation_id: str


def plan_of(
    value: list[str] | UnsetType,
    policy: DestinationPolicy,
    parallelism_ceiling: int | None,
    comment: str | None,
    operation_id: str,
) -> Plan:
    """The plan of a request's repinBindingIds (absent: an empty plan)."""
    ids = () if value is UNSET else tuple(value)
    return Plan(ids, policy, parallelism_ceiling, comment, operation_id)


def refuse_unused_plan(value: list[str] | UnsetType, why: str) -> None:
    """A plan the call cannot carry out is refused, never silently dropped."""
    if value is not UNSET and value:
        raise input_invalid(f"repinBindingIds: {why}")


def _conflict(message: str) -> WorkflowError:
    return WorkflowError("WORKFLOW_STATE_CONFLICT", message)


async def _lock_repin(
    conn: Connection, ctx: InvocationContext, binding_id: str, tool_id: str, version: str | None
) -> Reviewed:
    """Lock an entry as decide does (the owner check first), then check what it repins
    (version None: that it pins tool_id no more)."""
    found = await binding_rows.select_revision(conn, ctx.host_id, binding_id)
    if found is None:
        raise not_found(f"binding revision {binding_id} of repinBindingIds")
    reviewed = await lock_reviewed_revision(conn, ctx, binding_id, found.binding_digest)
    revision = reviewed.revision
    if revision.tool_id == tool_id or revision.revision_status != "pendingApproval":
        raise _conflict(f"repinBindingIds: {binding_id} is not a pending revision of another Tool")
    reach = await binding_rows.read_reach(conn, ctx.host_id, binding_id)
    pins = {d.nested_tool_version for d in reach.dependencies if d.nested_tool_id == tool_id}
    if version is None and pins:
        raise _conflict(f"repinBindingIds: {binding_id} still pins the Tool being retired")
    if version is not None and pins != {version}:
        raise _conflict(
            f"repinBindingIds: {binding_id} does not pin this Tool at version {version}"
        )
    return reviewed


async def approve_plan(
    conn: Connection, ctx: InvocationContext, plan: Plan, *, tool_id: str, version: str
) -> list[str]:
    """Approve the plan's revisions in the given order; each must repin tool_id at version.

    Each must be pending, of another Tool, pin this Tool at version only, be the caller's to
    approve (the owner rules of decide) and pass every publish rule now. The caller runs the
    reverse dependency gate afterwards: a Tool the plan left out is listed there.
    """
    for binding_id in plan.binding_ids:
        reviewed = await _lock_repin(conn, ctx, binding_id, tool_id, version)
        await revalidate(conn, ctx, reviewed, plan.policy, plan.parallelism_ceiling)
        await approve_reviewed(conn, ctx, reviewed, plan.comment, plan.operation_id)
    return list(plan.binding_ids)


async def approve_retirement_plan(
    conn: Connection,
    ctx: InvocationContext,
    plan: Plan,
    *,
    tool_id: str,
    active_version: str | None,
) -> list[str]:
    """Approve a retirement's plan: each entry is a pending revision of a Tool whose active
    revision pins tool_id at active_version, and it must not pin tool_id at all.

    An entry of a Tool that does not depend on the retiring one is refused: a retirement is
    no way to approve unrelated revisions. The caller runs the reverse dependency gate after.
    """
    if not plan.binding_ids:
        return []
    if active_version is None:
        raise input_invalid("repinBindingIds: the Tool has no active revision to retire")
    found = await lineage_rows.select_pinning_dependents(conn, ctx.host_id, tool_id, active_version)
    dependents = {dependent.tool_id for dependent in found}
    for binding_id in plan.binding_ids:
        reviewed = await _lock_repin(conn, ctx, binding_id, tool_id, None)
        if reviewed.revision.tool_id not in dependents:
            raise _conflict(
                f"repinBindingIds: {binding_id} is of a Tool that does not pin the retiring one"
            )
        await revalidate(conn, ctx, reviewed, plan.policy, plan.parallelism_ceiling)
        await approve_reviewed(conn, ctx, reviewed, plan.comment, plan.operation_id)
    return list(plan.binding_ids)
