"""workflow_tool_recovery from run state: the resolutions an execution has already made (E18)."""

from __future__ import annotations

from typing import Any

from runtime.receiver import store
from runtime.store import Database

# The reply's key: a joined tool exposes exactly one Promise (E15).
REPLY_KEY = "reply"


async def recover(db: Database, host_id: str, producer_workflow_id: str) -> dict[str, Any]:
    """A WorkflowToolRecoveryResult: {"resolutions": {"reply": ...}} once decided, else {}."""
    async with db.transaction(read_only=True) as conn:
        replies = await store.select_recovery(conn, host_id, producer_workflow_id)
    resolutions: dict[str, Any] = {}
    for reply in replies:
        if reply.resolution is not None and reply.reply_state in ("pending", "sent", "abandoned"):
            resolutions[REPLY_KEY] = reply.resolution
    return {"resolutions": resolutions}
