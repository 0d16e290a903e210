"""The sourceRevision rules shared by definition saves and grant syncs (seed 000)."""

from __future__ import annotations

from typing import Any, Literal

from runtime.errors import WorkflowError

Verdict = Literal["stale", "unchanged", "apply"]


def judge_revision(
    incoming_revision: int,
    incoming_content: str | None,
    stored_revision: int,
    stored_content: str | None,
    *,
    conflict: str,
    details: dict[str, Any],
) -> Verdict:
    """Lower is stale; equal with equal content is unchanged; equal otherwise conflicts.

    A delayed older delivery can therefore never restore older state, and an equal revision
    carrying other content is WORKFLOW_IDEMPOTENCY_CONFLICT with the stored state in details.
    """
    if incoming_revision < stored_revision:
        return "stale"
    if incoming_revision == stored_revision:
        if incoming_content == stored_content:
            return "unchanged"
        raise WorkflowError("WORKFLOW_IDEMPOTENCY_CONFLICT", conflict, details=details)
    return "apply"
