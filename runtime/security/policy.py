"""Authorization checks on a verified invocation context: host assertion, roles, positions."""

from __future__ import annotations

from generated.tools import ToolName
from runtime.errors import policy_denied
from runtime.security.authenticator import normalize_host_id
from runtime.security.context import InvocationContext
from runtime.security.settings import SecuritySettings


def check_host_assertion(ctx: InvocationContext, host_id_argument: object) -> None:
    """Refuse with WORKFLOW_POLICY_DENIED unless hostId names the caller's verified host."""
    if normalize_host_id(host_id_argument) != ctx.host_id:
        raise policy_denied("hostId does not match the caller's host")


def authorize_roles(
    ctx: InvocationContext, tool_name: ToolName, settings: SecuritySettings
) -> None:
    """Refuse with WORKFLOW_POLICY_DENIED unless the user holds a role allowed for tool_name."""
    allowed = settings.roles_for(tool_name)
    if allowed is None:
        return  # no role list: the tool itself is the capability (workflow_invoke)
    if not ctx.has_any_role(allowed):
        # Role names are configuration, not secrets: naming them tells the user whom to ask.
        raise policy_denied(
            f"the caller holds no role allowed to call {tool_name}; allowed roles: "
            f"{', '.join(sorted(allowed))} (security.tool_roles)"
        )


def is_position_holder(ctx: InvocationContext, position_id: str) -> bool:
    """True when the verified user token lists position_id among the user's positions."""
    return position_id in ctx.positions
