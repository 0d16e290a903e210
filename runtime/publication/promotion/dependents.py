"""The reverse dependency gate: moving a Tool's active version must not strand Tools pinning it.

Seed 001 "Publication, Versioning, And Rollback": before an inner Tool's active version moves
(promotion, rollback) or goes away (retirement), the reverse index of pinned dependencies is
read; active revisions of other Tools that pin the version being replaced refuse the change,
and the refusal lists every one of them. Nothing here locks the other Tools' heads: a Tool
published concurrently with a pin on the replaced version shows up as dependency drift.
"""

from __future__ import annotations

from runtime.errors import WorkflowError
from runtime.publication.store import lineage_rows
from runtime.store import Connection


async def refuse_stranding(
    conn: Connection,
    host_id: str,
    tool_id: str,
    *,
    current_version: str | None,
    next_version: str | None,
    doing: str,
) -> None:
    """Refuse when active revisions of other Tools pin current_version and it stops serving.

    next_version None: the Tool will have no active revision (retirement). The refusal is
    WORKFLOW_STATE_CONFLICT with details.affectedTools (toolId, toolName, bindingId,
    pinnedVersion) of each affected Tool; it changes nothing.
    """
    if current_version is None or current_version == next_version:
        return
    found = await lineage_rows.select_pinning_dependents(conn, host_id, tool_id, current_version)
    if not found:
        return
    names = ", ".join(dependent.tool_name for dependent in found)
    raise WorkflowError(
        "WORKFLOW_STATE_CONFLICT",
        f"{doing} would strand {len(found)} Tool(s) whose active binding pins version "
        f"{current_version} of this Tool: {names}; repin them first",
        details={
            "affectedTools": [
                {
                    "toolId": dependent.tool_id,
                    "toolName": dependent.tool_name,
                    "bindingId": dependent.binding_id,
                    "pinnedVersion": dependent.pinned_version,
                }
                for dependent in found
            ]
        },
    )
