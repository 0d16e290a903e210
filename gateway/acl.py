"""Who may see and call what: the snapshot Tools' own roles, the relayed Workflow tools' lists.

Relayed tools take their role lists from the `security.tool_roles` section Workflow itself
uses (seed 000 "Operator setup": save and grants_sync for admin, host-admin, workflow-admin;
definition publish/retire also genai-admin; binding publish/retire admin, host-admin,
genai-admin; binding get/list/decide/revoke all four; the lifecycle tools admin, host-admin,
workflow-admin). workflow_invoke is internal to the Gateway: never listed, never relayed; a
tool the contract marks `gatewayPublication: false` (the host secret tools: a secret value has
no business passing through a router) is not relayed either. A tool Workflow checks by no role
(the task inbox: the caller's assignments decide what it sees) is relayed to every caller, as
Workflow itself serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.caller import Caller
from gateway.router import RoutedTool
from generated.routes import ROUTES, ToolRoute
from generated.tools import ToolName
from runtime.errors import WorkflowError, policy_denied
from runtime.mcp import declared_output_schema, describe_tool
from runtime.security import SecuritySettings


class RelayAcl:
    """The relayed Workflow tools (catalog order) and the roles each needs."""

    def __init__(self, security: SecuritySettings, routes: Mapping[ToolName, ToolRoute] = ROUTES):
        # None: no role check (every authenticated caller), as Workflow applies it.
        self._roles: dict[str, frozenset[str] | None] = {}
        self._described: dict[str, dict[str, Any]] = {}
        for name, route in routes.items():
            roles = security.roles_for(name)
            if is_internal(name):
                continue
            if not route.gateway_publication:
                continue  # the contract keeps it off the Gateway (the host secret tools)
            self._roles[name] = roles
            # The contract's own Tool object, exactly as Workflow lists it.
            self._described[name] = describe_tool(route)

    def is_relayed(self, name: str) -> bool:
        """Whether name is a Workflow tool this Gateway relays."""
        return name in self._roles

    def check(self, caller: Caller, name: str) -> None:
        """Refuse with WORKFLOW_POLICY_DENIED unless the caller holds a role for name."""
        allowed = self._roles[name]
        if allowed is not None and not caller.holds_any(allowed):
            raise policy_denied(
                f"the caller holds no role allowed to call {name}; allowed roles: "
                f"{', '.join(sorted(allowed))}"
            )

    def listed_for(self, caller: Caller) -> list[dict[str, Any]]:
        """The relayed Tool objects the caller's roles allow."""
        return [
            self._described[name]
            for name, roles in self._roles.items()
            if roles is None or caller.holds_any(roles)
        ]


def check_routed(caller: Caller, tool: RoutedTool) -> None:
    """Refuse with WORKFLOW_POLICY_DENIED unless the caller holds one of the Tool's roles."""
    if not caller.holds_any(tuple(tool.roles)):
        raise policy_denied(f"the caller holds no role allowed to call {tool.name}")


def is_internal(name: str) -> bool:
    """Whether name is workflow_invoke, which the Gateway calls itself and never relays."""
    internal: ToolName = "workflow_invoke"
    return name == internal


def refuse_internal() -> WorkflowError:
    """A client's direct workflow_invoke (seed 000: hidden from tools/list and refused)."""
    return policy_denied("workflow_invoke is internal to the Gateway")


def describe_routed(tool: RoutedTool) -> dict[str, Any]:
    """The MCP Tool object of a workflow-backed Tool."""
    described: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": dict(tool.input_schema),
    }
    if tool.output_schema is not None:
        # Workflow's refusals pass through as the error envelope (seed 000 Gateway Changes).
        described["outputSchema"] = declared_output_schema(tool.output_schema)
    if tool.annotations is not None:
        described["annotations"] = dict(tool.annotations)
    return described


def listed_routed(caller: Caller, tools: tuple[RoutedTool, ...]) -> list[dict[str, Any]]:
    """The snapshot's Tools the caller's roles allow, in snapshot order."""
    return [describe_routed(tool) for tool in tools if caller.holds_any(tuple(tool.roles))]
