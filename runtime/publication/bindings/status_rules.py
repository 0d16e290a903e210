"""Status rules: which status a new binding revision gets, and who may decide on one.

The definition owner's own revision is active at once (selfApprove); otherwise the approval of
the Tool's active revision carries over to it (carryOver) when nothing the owner approved
changed, else it waits for the owner (pendingApproval). The carry-over conditions are checked
in the specification's order and the first that fails becomes carryOverDeniedReason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from generated import models
from runtime.binding_reach import Reach
from runtime.engine.check import WriteTask
from runtime.errors import WorkflowError, policy_denied
from runtime.publication.store import binding_rows, definition_rows
from runtime.publication.store.definition_rows import Owner
from runtime.security import InvocationContext
from runtime.store import Connection

WriteTaskKey = tuple[str, str, str]
# carryOverDeniedReason's longest form in the contract (and its column).
REASON_MAX = 1024


@dataclass(frozen=True, slots=True)
class ApprovedBasis:
    """What carry-over compares on the Tool's active revision."""

    binding_id: str
    wf_def_id: str
    owner: Owner
    approval_digest: str
    dependency_keys: frozenset[tuple[str, str, str, str]]
    target_keys: frozenset[tuple[str, str, tuple[str, ...]]]
    write_task_keys: frozenset[WriteTaskKey]


@dataclass(frozen=True, slots=True)
class Candidate:
    """What carry-over compares on the new revision."""

    wf_def_id: str
    approval_digest: str
    reach: Reach
    write_tasks: Sequence[WriteTask]
    binding_approval: models.BindingApproval  # of the pinned version
    # Who published the pinned version: only the owner's own version may carry approval.
    published_by: str
    # The specification's static-fit condition. Publish refuses a version that does not fit
    # before the status rules run, so from publish this is always empty.
    static_fit_problems: Sequence[str] = ()


def write_task_key(task: WriteTask) -> WriteTaskKey:
    """Write tasks are keyed by qualified task name, kind, and method or Tool."""
    return (task.qualified_name, task.kind, task.target)


def stored_write_task(task: WriteTask) -> models.WriteTask:
    """A write task as stored on the revision and returned by workflow_binding_get."""
    # The effect matrix refuses a write task without evidence before anything is stored.
    assert task.approval_evidence_digest is not None
    kind: Literal["http", "mcp"] = "http" if task.kind == "http" else "mcp"
    return models.WriteTask(
        task_name=task.qualified_name,
        kind=kind,
        approval_evidence_digest=task.approval_evidence_digest,
        method=task.target if kind == "http" else msgspec.UNSET,
        tool_name=task.target if kind == "mcp" else msgspec.UNSET,
    )


def stored_write_task_key(task: models.WriteTask) -> WriteTaskKey:
    """The carry-over key of a stored write task."""
    target = task.method if task.kind == "http" else task.tool_name
    return (task.task_name, task.kind, str(target))


def _first_missing(candidates: Iterable[Any], allowed: frozenset[Any]) -> Any | None:
    for key in sorted(candidates, key=repr):
        if key not in allowed:
            return key
    return None


def carry_over_denied_reason(
    basis: ApprovedBasis | None, candidate: Candidate, current_owner: Owner
) -> str | None:
    """None when the active revision's approval carries over, else the first failed condition."""
    if basis is None:
        return "the Tool has no active revision whose approval could carry over"
    if basis.wf_def_id != candidate.wf_def_id:
        return "the active revision pins another workflow definition"
    if basis.owner != current_owner:
        return "the definition owner changed since the active revision was approved"
    if candidate.published_by != current_owner.user_id:
        # New logic the owner has not seen: only the owner's own version may carry approval.
        return "the definition version was published by someone other than the definition owner"
    if basis.approval_digest != candidate.approval_digest:
        return "approvalDigest differs from the active revision's"
    missing_dep = _first_missing(
        (dep.carry_over_key for dep in candidate.reach.dependencies), basis.dependency_keys
    )
    if missing_dep is not None:
        return f"dependency {missing_dep[3]} ({missing_dep[0]} {missing_dep[1]}) is new reach"
    missing_target = _first_missing(
        (target.carry_over_key for target in candidate.reach.endpoint_targets), basis.target_keys
    )
    if missing_target is not None:
        return f"endpoint target {missing_target[0]} is new or changed reach"
    missing_write = _first_missing(
        (write_task_key(task) for task in candidate.write_tasks), basis.write_task_keys
    )
    if missing_write is not None:
        return f"write task {missing_write[0]} ({missing_write[1]} {missing_write[2]}) is new"
    if candidate.static_fit_problems:
        return f"the version does not fit: {candidate.static_fit_problems[0]}"
    if candidate.binding_approval != "carryOver":
        return "the definition version was published with bindingApproval reapprove"
    return None


def is_owner(ctx: InvocationContext, owner: Owner) -> bool:
    """The caller is the owner by user id, or holds the owner position in the verified token."""
    if ctx.user_id == owner.user_id:
        return True
    return owner.position_id is not None and owner.position_id in ctx.positions


def require_owner(ctx: InvocationContext, owner: Owner) -> None:
    """Refuse anyone but Workflow's stored definition owner."""
    if not is_owner(ctx, owner):
        raise policy_denied("only the workflow definition owner may do this")


NO_SAVED_HEAD = "the definition has no saved head; save it first"


async def current_owner(conn: Connection, host_id: str, wf_def_id: str) -> Owner:
    """The owner Workflow stored with the saved head; refused when no head was saved.

    A published version's owner comes from the publisher's own payload, so it never decides
    who may approve: only save changes ownership (seed 000 "Ownership").
    """
    owner = await definition_rows.lock_owner(conn, host_id, wf_def_id)
    if owner is None:
        raise WorkflowError("WORKFLOW_STATE_CONFLICT", NO_SAVED_HEAD)
    return owner


async def approved_basis(conn: Connection, host_id: str, binding_id: str) -> ApprovedBasis:
    """What carry-over compares on the Tool's active revision."""
    revision = await binding_rows.select_revision(conn, host_id, binding_id)
    assert revision is not None  # the head points at it
    reach = await binding_rows.read_reach(conn, host_id, binding_id)
    return ApprovedBasis(
        binding_id=binding_id,
        wf_def_id=revision.wf_def_id,
        owner=revision.owner,
        approval_digest=revision.approval_digest,
        dependency_keys=frozenset(dep.carry_over_key for dep in reach.dependencies),
        target_keys=frozenset(target.carry_over_key for target in reach.endpoint_targets),
        write_task_keys=frozenset(stored_write_task_key(task) for task in revision.write_tasks),
    )


@dataclass(frozen=True, slots=True)
class StatusDecision:
    """Which status a new revision gets, by which action, on which basis."""

    active: bool
    action: Literal["selfApprove", "carryOver"] | None  # None: pendingApproval
    approved_by: str | None
    basis_id: str | None
    denied_reason: str | None


async def decide_status(
    conn: Connection,
    ctx: InvocationContext,
    head: binding_rows.PublicationHead,
    candidate: Candidate,
    owner: Owner,
) -> StatusDecision:
    """Status rules: selfApprove, else carryOver from the active revision, else pending."""
    if is_owner(ctx, owner):
        return StatusDecision(True, "selfApprove", ctx.user_id, None, None)
    basis = None
    if head.active_binding_id is not None:
        basis = await approved_basis(conn, ctx.host_id, head.active_binding_id)
    reason = carry_over_denied_reason(basis, candidate, owner)
    if reason is None:
        assert basis is not None
        return StatusDecision(True, "carryOver", owner.user_id, basis.binding_id, None)
    return StatusDecision(False, None, None, None, reason[:REASON_MAX])
