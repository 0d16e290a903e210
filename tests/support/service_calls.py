"""Publication tools called through the real dispatcher, for service-level tests.

Each helper takes the raw argument dict a client would send and a verified caller context, and
runs the tool through runtime.mcp.dispatch.ToolDispatcher with the served handler table (hostId
assertion, roles, every schema problem, conversion, the handler, output validation), past
authentication only: the context stands for a verified bearer. It returns the receipt as a
JSON-shaped dict and raises the WorkflowError a client would see as an isError result.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fastjsonschema import JsonSchemaValueException

from generated import models
from generated.routes import ROUTES
from handlers import HANDLERS
from runtime import publication
from runtime.addresses import LOOPBACK_NETWORKS
from runtime.binding_reach import Reach
from runtime.collaborators import Services
from runtime.mcp.dispatch import ToolDispatcher
from runtime.mcp.tools import ToolRegistry
from runtime.publication import bindings
from runtime.publication.bindings.binding_problems import ordered
from runtime.publication.bindings.field_rules import binding_field_problems
from runtime.publication.bindings.reach_rules import reach_of, reach_problems
from runtime.security import InvocationContext, Keyring
from runtime.security.keyring import new_keyring_document
from runtime.settings import Settings
from runtime.store import Database


class _Verified:
    """An authenticator whose caller is already verified: the test's context."""

    def __init__(self, ctx: InvocationContext) -> None:
        self.ctx = ctx

    def authenticate(self, authorization: str | None, scope_token: str | None) -> InvocationContext:
        """The verified context, whatever the headers."""
        return self.ctx


_REGISTRY = ToolRegistry(ROUTES, HANDLERS)


async def _run(
    tool: str,
    ctx: InvocationContext,
    args: dict[str, Any],
    db: Database,
    *,
    local_backends: bool = False,
) -> dict[str, Any]:
    """The tool's receipt through the dispatcher, or the WorkflowError it answers with."""
    settings = Settings()
    if local_backends:
        settings.publication.destinations.allowed_schemes = ["http", "https"]
        settings.publication.destinations.allowed_networks = list(LOOPBACK_NETWORKS)
    # The context's roles are the ones configured for the tool: role checks are proven at the
    # endpoint (tests/integration/mcp), these tests are about the publication services.
    settings.security.tool_roles[tool] = sorted(ctx.roles)
    services = Services(
        settings=settings,
        database=db,
        authenticator=_Verified(ctx),  # type: ignore[arg-type]
        keyring=Keyring.from_document(new_keyring_document("k1")),
        # No resolver, as the service's default DestinationPolicy: names are checked at connect.
        resolver=None,  # type: ignore[arg-type]
    )
    served = _REGISTRY.get(tool)
    assert served is not None, tool
    # _run is the dispatcher after authentication; it raises what call() turns into isError.
    outcome = await ToolDispatcher(_REGISTRY, services)._run(served, ctx, args)
    output: dict[str, Any] = outcome.structured
    return output


async def save_definition(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_definition_save."""
    return await _run("workflow_definition_save", ctx, args, db)


async def publish_definition(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_definition_publish."""
    return await _run("workflow_definition_publish", ctx, args, db)


async def retire_definition(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_definition_retire."""
    return await _run("workflow_definition_retire", ctx, args, db)


async def sync_definition_grants(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_definition_grants_sync."""
    return await _run("workflow_definition_grants_sync", ctx, args, db)


async def publish_binding(
    db: Database, ctx: InvocationContext, args: dict[str, Any], *, local_backends: bool = False
) -> dict[str, Any]:
    """workflow_binding_publish, including the stored refusal of a schema-invalid section.

    local_backends: endpoint targets on loopback over http are allowed (tests/hostile shows the
    default refusal), as `make run` configures it.
    """
    return await _run("workflow_binding_publish", ctx, args, db, local_backends=local_backends)


async def decide_binding(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_binding_decide."""
    return await _run("workflow_binding_decide", ctx, args, db)


async def revoke_binding(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_binding_revoke."""
    return await _run("workflow_binding_revoke", ctx, args, db)


async def retire_binding(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_binding_retire."""
    return await _run("workflow_binding_retire", ctx, args, db)


async def get_binding(db: Database, ctx: InvocationContext, args: dict[str, Any]) -> dict[str, Any]:
    """workflow_binding_get."""
    return await _run("workflow_binding_get", ctx, args, db)


async def list_bindings(
    db: Database, ctx: InvocationContext, args: dict[str, Any]
) -> dict[str, Any]:
    """workflow_binding_list."""
    return await _run("workflow_binding_list", ctx, args, db)


def validate_binding(binding: models.ToolBinding) -> models.ToolBinding:
    """Workflow's rules on a schema-valid binding: InvalidBindingRequest(section binding) naming
    the first problem in the order a publish refusal lists them."""
    found = binding_field_problems(binding)
    if found:
        raise bindings.InvalidBindingRequest("binding", ordered(found)[0].message)
    return binding


def normalize_reach(
    dependencies: list[models.BindingDependency], endpoint_targets: list[models.EndpointTarget]
) -> Reach:
    """The ordered reach; InvalidBindingRequest(section reach) naming its first problem."""
    found = reach_problems(dependencies, endpoint_targets)
    if found:
        raise bindings.InvalidBindingRequest("reach", ordered(found)[0].message)
    return reach_of(dependencies, endpoint_targets)


def checked_binding(value: dict[str, Any]) -> models.ToolBinding:
    """Workflow's binding rules on a binding document that passes the catalog schema."""
    return validate_binding(msgspec.convert(value, models.ToolBinding, strict=False))


def checked_reach(dependencies: list[Any], targets: list[Any]) -> Reach:
    """Workflow's reach rules on schema-valid dependencies and endpointTargets."""
    return normalize_reach(
        msgspec.convert(dependencies, list[models.BindingDependency], strict=False),
        msgspec.convert(targets, list[models.EndpointTarget], strict=False),
    )


def publish_rejection_section(args: dict[str, Any]) -> str | None:
    """The evidence section a publish request is refused under (None: no request-only rejection).

    The catalog validator's failure is classified by its path, as the handler does; a
    schema-valid request goes through Workflow's own binding and reach rules.
    """
    route = ROUTES["workflow_binding_publish"]
    try:
        route.validate_input(args)
    except JsonSchemaValueException as exc:
        return bindings.failed_section(tuple(exc.path), exc.rule)
    typed = msgspec.convert(args, models.WorkflowBindingPublishInput, strict=False)
    try:
        validate_binding(typed.binding)
        normalize_reach(typed.dependencies, typed.endpoint_targets)
    except bindings.InvalidBindingRequest as rejection:
        return rejection.section
    return None


async def sync_grants_outside_the_contract(
    db: Database, ctx: InvocationContext, wf_def_id: str, grant_id: str, tool_name: str
) -> None:
    """Execution fixtures only: a grant naming an MCP tool by name, for every environment.

    Execution matches live grants by MCP tool name, while the catalog types grant toolId as a
    Tool UUID with at least one environment; so this grant is built without the validator.
    """
    grant = models.Grant(
        grant_id=grant_id,
        tool_id=tool_name,
        tool_version="1.0.0",
        lightapi_digest="sha256:" + "a" * 64,
        allowed_environments=[],
    )
    request = models.WorkflowDefinitionGrantsSyncInput(
        host_id=ctx.host_id, wf_def_id=wf_def_id, source_revision=1, actor="steve", grants=[grant]
    )
    await publication.sync_definition_grants(db, ctx, request)
