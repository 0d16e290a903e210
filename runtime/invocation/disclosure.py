"""The disclosure ceiling: what a run may show its owner, now and at most as at acceptance.

Seed 001 "Asynchronous Tools": the accepted instance stores a maximum disclosure ceiling, and
every lifecycle read shows the intersection of the reader's current authorization and that
ceiling, so a later widening of the caller's rights never widens what an old run discloses.

A run discloses two parts: its status (state, timestamps, effect state, error, open human
tasks) and its result (the output). The caller's authorization to see each is the role list
of the tools that read it (security.tool_roles): workflow_get_status for the status,
workflow_get_result or workflow_wait_result for the result. The ceiling is that decision as it
was at acceptance (the parts, not the roles), so neither a role the caller gains later nor a
role list an operator widens later can broaden it.
"""

from __future__ import annotations

from typing import Final

from generated.tools import ToolName
from runtime.security import InvocationContext
from runtime.security.settings import SecuritySettings

STATUS: Final = "status"
RESULT: Final = "result"
# The tools whose role lists authorize each part.
_READERS: Final[dict[str, tuple[ToolName, ...]]] = {
    STATUS: ("workflow_get_status",),
    RESULT: ("workflow_get_result", "workflow_wait_result"),
}


def allowed_parts(ctx: InvocationContext, security: SecuritySettings | None) -> frozenset[str]:
    """The parts the caller's current authorization lets it see (no settings: every part)."""
    if security is None:
        return frozenset(_READERS)
    parts: set[str] = set()
    for part, tools in _READERS.items():
        for tool in tools:
            roles = security.roles_for(tool)
            if roles is None or ctx.has_any_role(roles):
                parts.add(part)
    return frozenset(parts)


def ceiling(ctx: InvocationContext, security: SecuritySettings) -> list[str]:
    """The ceiling a run accepted now stores: the parts the caller may see, sorted."""
    return sorted(allowed_parts(ctx, security))


def visible_parts(stored: list[str] | None, current: frozenset[str]) -> frozenset[str]:
    """The intersection of the current decision and the stored ceiling (None: none stored,
    a run accepted before ceilings were kept, for which the current decision alone holds)."""
    return current if stored is None else current & frozenset(stored)
