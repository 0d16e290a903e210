"""The arguments of each publication call, built from a PublishDir and the acting user."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from publisher.spec import (
    DEFAULT_ADMISSION_LIMITS,
    DEFAULT_ENVIRONMENTS,
    DEFAULT_RUNTIME_BOUNDS,
    WRITE_REPLAY_MS,
    Definition,
    Owner,
    Tool,
    derived_id,
    http_targets,
)
from runtime.canonical import canonical_digest

_REF_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Actor:
    """The acting user: who the token names and which host it asserts."""

    host_id: str
    user_id: str


def owner_document(owner: Owner | None, actor: Actor) -> dict[str, str]:
    """The owner object of save and publish (the acting user when the spec names none)."""
    if owner is None:
        return {"userId": actor.user_id}
    document = {"userId": owner.user_id}
    if owner.position_id is not None:
        document["positionId"] = owner.position_id
    return document


def save_content(definition: Definition, owner: dict[str, str]) -> dict[str, Any]:
    """The saved head's fields that make its content (everything but revision and actor)."""
    return {
        "namespace": definition.namespace,
        "name": definition.name,
        "version": definition.version,
        "definition": definition.text,
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": owner,
        "active": True,
    }


def save_arguments(
    actor: Actor, definition: Definition, content: dict[str, Any], revision: int
) -> dict[str, Any]:
    """workflow_definition_save arguments."""
    return {
        "hostId": actor.host_id,
        "wfDefId": definition.wf_def_id,
        "sourceRevision": revision,
        "actor": actor.user_id,
        **content,
    }


def publish_arguments(
    actor: Actor, definition: Definition, owner: dict[str, str]
) -> dict[str, Any]:
    """workflow_definition_publish arguments without operationId (the ledger adds it)."""
    return {
        "hostId": actor.host_id,
        "wfDefId": definition.wf_def_id,
        "namespace": definition.namespace,
        "name": definition.name,
        "version": definition.version,
        "definition": definition.text,
        "expectedDefinitionDigest": definition.definition_digest,
        "bindingApproval": "carryOver",
        "owner": owner,
    }


def grant_set(tools: list[Tool], key: str) -> list[dict[str, Any]]:
    """The full grant set of a definition: every grant its Tools list, deduplicated."""
    grants: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if tool.definition.key != key:
            continue
        for grant in tool.spec.grants:
            grant_id = derived_id("grant", f"{key}|{grant.tool_id}|{grant.tool_version}")
            grants[grant_id] = {
                "grantId": grant_id,
                "toolId": grant.tool_id,
                "toolVersion": grant.tool_version,
                "lightapiDigest": grant.lightapi_digest,
                "allowedEnvironments": sorted(set(grant.allowed_environments)),
            }
    return [grants[k] for k in sorted(grants)]


def grants_arguments(
    actor: Actor, wf_def_id: str, grants: list[dict[str, Any]], revision: int
) -> dict[str, Any]:
    """workflow_definition_grants_sync arguments."""
    return {
        "hostId": actor.host_id,
        "wfDefId": wf_def_id,
        "sourceRevision": revision,
        "actor": actor.user_id,
        "grants": grants,
    }


def _endpoint_ref(uri: str, taken: set[str]) -> str:
    base = _REF_CHARS.sub("-", uri.split("://", 1)[-1]).strip("-")[:100] or "endpoint"
    ref, suffix = base, 2
    while ref in taken:
        ref, suffix = f"{base}-{suffix}", suffix + 1
    taken.add(ref)
    return ref


def derived_targets(tool: Tool) -> list[dict[str, Any]]:
    """One endpoint target per distinct endpoint the workflow calls, allowing its methods.

    authorizationPolicyDigest is the canonical digest of the authentication policy the calls
    name (`{"authentication": null}` for unauthenticated calls), so a changed policy changes
    the binding digest.
    """
    methods: dict[str, set[str]] = {}
    policies: dict[str, set[str]] = {}
    for method, endpoint, authentication in http_targets(tool.definition):
        methods.setdefault(endpoint, set()).add(method)
        policies.setdefault(endpoint, set()).add(authentication or "")
    environments = sorted(set(tool.spec.environments or DEFAULT_ENVIRONMENTS))
    taken: set[str] = set()
    targets = []
    for endpoint in sorted(methods):
        policy = sorted(policies[endpoint])
        targets.append(
            {
                "endpointRef": _endpoint_ref(endpoint, taken),
                "endpointUri": endpoint,
                "allowedMethods": sorted(methods[endpoint]),
                "environments": environments,
                "authorizationPolicyDigest": canonical_digest(
                    {"authentication": [p or None for p in policy]}
                ),
            }
        )
    return targets


def endpoint_targets(tool: Tool) -> list[dict[str, Any]]:
    """The spec's endpointTargets when it gives them, else the derived ones."""
    if tool.spec.endpoint_targets is not None:
        return [dict(target) for target in tool.spec.endpoint_targets]
    return derived_targets(tool)


def binding_document(tool: Tool) -> dict[str, Any]:
    """The normalized binding: the spec's values over the documented defaults."""
    spec = tool.spec
    definition = tool.definition
    writes = tool.writes
    replay = spec.result_replay_ms
    if replay is None:
        replay = WRITE_REPLAY_MS if writes else 0
    annotations: dict[str, Any] = {
        "readOnly": (not writes)
        if spec.annotations.read_only is None
        else spec.annotations.read_only,
        "destructive": spec.annotations.destructive,
    }
    if spec.annotations.human_approval_required is not None:
        annotations["humanApprovalRequired"] = spec.annotations.human_approval_required
    if spec.annotations.idempotent is not None:
        annotations["idempotent"] = spec.annotations.idempotent
    binding: dict[str, Any] = {
        "sourceBindingId": tool.source_binding_id,
        "toolId": tool.tool_id,
        "toolName": tool.name,
        "wfDefId": definition.wf_def_id,
        "workflowVersion": definition.version,
        "definitionDigest": definition.definition_digest,
        "schemaDigest": definition.schema_digest,
        "invocationMode": "sync",
        "syncWaitMs": spec.sync_wait_ms,
        "totalDeadlineMs": spec.total_deadline_ms,
        "executionClass": "interactive",
        "resultTextMode": spec.result_text_mode,
        "cancellationPolicy": spec.cancellation_policy,
        "idempotencyPolicy": {"kind": spec.idempotency_kind, "resultReplayMs": replay},
        "delegationPolicy": {"maximumDelegationDepth": spec.maximum_delegation_depth},
        "runtimeBounds": {**DEFAULT_RUNTIME_BOUNDS, **spec.runtime_bounds},
        "admissionLimits": {**DEFAULT_ADMISSION_LIMITS, **spec.admission_limits},
        "callerPolicy": dict(spec.caller_policy),
        "toolAnnotations": annotations,
        "inputSchema": definition.input_schema,
    }
    if spec.description:
        binding["toolDescription"] = spec.description
    output = definition.output_schema
    if output is not None:
        binding["outputSchema"] = output
    if spec.policy_digest is not None:
        binding["policyDigest"] = spec.policy_digest
    if spec.response_policy_digest is not None:
        binding["responsePolicyDigest"] = spec.response_policy_digest
    if spec.lightspeed is not None:
        binding["lightspeedReceiver"] = msgspec.to_builtins(spec.lightspeed)
    return binding


def binding_arguments(actor: Actor, tool: Tool) -> dict[str, Any]:
    """workflow_binding_publish arguments without expectedAggregateVersion and operationId."""
    return {
        "hostId": actor.host_id,
        "binding": binding_document(tool),
        "dependencies": [dict(d) for d in tool.spec.dependencies],
        "endpointTargets": endpoint_targets(tool),
    }


def request_digest(arguments: dict[str, Any]) -> str:
    """The canonical digest of a request without operationId and expectedAggregateVersion."""
    kept = {
        k: v for k, v in arguments.items() if k not in ("operationId", "expectedAggregateVersion")
    }
    return canonical_digest(kept)
