"""Shared builders for the binding publication tests (no tests here)."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from runtime.canonical import definition_digest, load_definition_yaml, schema_digest
from runtime.security import InvocationContext
from runtime.store import Database
from tests.support.publication import versioned
from tests.support.publication_builders import HOST, context
from tests.support.service_calls import publish_definition, save_definition

__all__ = ["HOST"]

OWNER = "owner-1"
OWNER_POSITION = "pos-1"
AUTHOR = "author-1"
EVIDENCE = "sha256:" + "e" * 64
POLICY_DIGEST = "sha256:" + "c" * 64
# A real human task (our profile's `ask`): a sync Tool cannot wait for a person.
ASK_TASK = (
    "  - approve:\n      ask:\n        prompt: ok\n        mode: approval\n"
    "        assignment:\n          roleId: approver\n"
    "        options:\n          - label: Yes\n            value: Y\n"
)


def owner_ctx() -> InvocationContext:
    """The definition owner."""
    return context(user_id=OWNER)


def author_ctx(user_id: str = AUTHOR) -> InvocationContext:
    """A Tool author who does not own the definition."""
    return context(user_id=user_id)


def definition_yaml(
    *,
    marker: int = 1,
    fork_width: int = 0,
    write: bool = False,
    evidence: bool = True,
    mcp_tool: str | None = None,
    extra_task: str = "",
    calls: tuple[tuple[str, str], ...] = (),
) -> str:
    """A valid definition; options add a fork, an HTTP write, an MCP call, HTTP calls given as
    (method, endpoint) pairs (writes carry evidence) or raw task YAML."""
    tasks = [f"  - first:\n      set:\n        marker: {marker}\n"]
    for index, (method, endpoint) in enumerate(calls):
        meta = f"      metadata:\n        approvalEvidenceDigest: {EVIDENCE}\n"
        tasks.append(
            f"  - call{index}:\n      call: http\n      with:\n        method: {method}\n"
            f"        endpoint: {endpoint}\n" + ("" if method in ("GET", "HEAD") else meta)
        )
    if write:
        meta = f"      metadata:\n        approvalEvidenceDigest: {EVIDENCE}\n" if evidence else ""
        tasks.append(
            "  - save:\n      call: http\n      with:\n        method: POST\n"
            "        endpoint: https://api.example.com/claims\n" + meta
        )
    if fork_width:
        branches = "".join(
            f"          - b{i}:\n              set:\n                v{i}: {i}\n"
            for i in range(fork_width)
        )
        tasks.append("  - fan:\n      fork:\n        branches:\n" + branches)
    if mcp_tool is not None:
        tasks.append(
            "  - lookup:\n      call: mcp\n      with:\n"
            "        endpoint: https://gateway.example.com/mcp\n"
            f"        tool: {mcp_tool}\n        arguments: {{}}\n"
        )
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: claims\n"
        "  name: summarize-claim\n"
        '  version: "1.2.0"\n'
        "input:\n"
        "  schema:\n"
        "    format: json\n"
        "    document:\n"
        "      type: object\n"
        "do:\n" + "".join(tasks) + extra_task
    )


async def save_owner(db: Database, wf_def_id: str, owner: str = OWNER, revision: int = 1) -> None:
    """Save the definition head with its owner (ownership comes from save)."""
    await save_definition(
        db,
        context(),
        {
            "hostId": HOST,
            "wfDefId": wf_def_id,
            "sourceRevision": revision,
            "actor": "steve",
            "namespace": "claims",
            "name": "summarize-claim",
            "version": "1.2.0",
            "definition": definition_yaml(),
            "lifecycleStatus": "PUBLISHED",
            "catalogVisible": False,
            "owner": {"userId": owner, "positionId": OWNER_POSITION},
            "active": True,
        },
    )


async def publish_version(
    db: Database,
    wf_def_id: str,
    version: str = "1.2.0",
    *,
    text: str | None = None,
    binding_approval: str = "carryOver",
    publisher: str = OWNER,
) -> dict[str, Any]:
    """Publish a definition version owned by OWNER (by OWNER unless publisher says otherwise:
    only the owner's own versions carry approval over); returns the version receipt."""
    text = versioned(text if text is not None else definition_yaml(), version)
    return await publish_definition(
        db,
        context(user_id=publisher),
        {
            "hostId": HOST,
            "wfDefId": wf_def_id,
            "namespace": "claims",
            "name": "summarize-claim",
            "version": version,
            "definition": text,
            "expectedDefinitionDigest": definition_digest(text),
            "bindingApproval": binding_approval,
            "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
            "operationId": str(uuid.uuid4()),
        },
    )


def binding(
    wf_def_id: str, tool_id: str, text: str, version: str = "1.2.0", **changes: Any
) -> dict[str, Any]:
    """A normalized read-only sync binding pinned to (wf_def_id, version) of text."""
    document = load_definition_yaml(text)
    value: dict[str, Any] = {
        "sourceBindingId": str(uuid.uuid4()),
        "toolId": tool_id,
        "toolName": "claims.summarize",
        "wfDefId": wf_def_id,
        "workflowVersion": version,
        "definitionDigest": definition_digest(text),
        "schemaDigest": schema_digest(document),
        "invocationMode": "sync",
        "syncWaitMs": 20000,
        "totalDeadlineMs": 30000,
        "executionClass": "interactive",
        "resultTextMode": "compact-json",
        "cancellationPolicy": "before-effects-only",
        "idempotencyPolicy": {"kind": "derived", "resultReplayMs": 0},
        "delegationPolicy": {"maximumDelegationDepth": 1},
        "runtimeBounds": {
            "maximumTaskAttempts": 8,
            "maximumNestedCalls": 4,
            "maximumParallelism": 4,
            "maximumRequestBytes": 65536,
            "maximumIntermediateBytes": 1048576,
            "maximumResultBytes": 65536,
            "maximumCostUnits": 100,
        },
        "admissionLimits": {
            "maximumConcurrentRuns": 20,
            "maximumConcurrentRunsPerUser": 2,
            "startsPerMinute": 120,
            "startsPerMinutePerUser": 10,
        },
        "callerPolicy": {},
        "toolAnnotations": {"readOnly": True, "destructive": False},
        "policyDigest": POLICY_DIGEST,
    }
    value.update(changes)
    return value


def write_binding(wf_def_id: str, tool_id: str, text: str, **changes: Any) -> dict[str, Any]:
    """A write Tool binding with a ten-minute replay window."""
    value = binding(wf_def_id, tool_id, text, **changes)
    value["toolAnnotations"] = {"readOnly": False, "destructive": False}
    value["idempotencyPolicy"] = {"kind": "derived", "resultReplayMs": 600000}
    value.update(changes)
    return value


def publish_args(
    value: dict[str, Any],
    expected: int,
    *,
    dependencies: list[dict[str, Any]] | None = None,
    endpoint_targets: list[dict[str, Any]] | None = None,
    operation_id: str | None = None,
) -> dict[str, Any]:
    """workflow_binding_publish arguments."""
    return {
        "hostId": HOST,
        "binding": copy.deepcopy(value),
        "dependencies": dependencies or [],
        "endpointTargets": endpoint_targets or [],
        "expectedAggregateVersion": expected,
        "operationId": operation_id or str(uuid.uuid4()),
    }


def endpoint_target(
    ref: str = "claims-api",
    uri: str = "https://api.example.com/claims",
    methods: tuple[str, ...] = ("post", "GET", "POST"),
    policy_digest: str = POLICY_DIGEST,
) -> dict[str, Any]:
    """One resolved endpoint target (the default covers definition_yaml(write=True)'s call)."""
    return {
        "endpointRef": ref,
        "endpointUri": uri,
        "allowedMethods": list(methods),
        "environments": ["prod", "dev"],
        "authorizationPolicyDigest": policy_digest,
    }


def dependency(name: str = "accounts.lookup", *, read_only: bool = True) -> dict[str, Any]:
    """One pinned nested Tool dependency."""
    return {
        "nestedToolId": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "nestedToolVersion": "1.0.0",
        "contractDigest": "sha256:" + "d" * 64,
        "authorizationToolName": name,
        "dispatchTarget": name,
        "toolAnnotations": {"readOnly": read_only, "destructive": False},
    }


def new_id() -> str:
    """A fresh lower-case UUID."""
    return str(uuid.uuid4())


async def insert_version_row(
    db: Database, wf_def_id: str, text: str, version: str = "1.2.0"
) -> None:
    """Store a version with SQL, bypassing definition validation (for definitions that publish
    would refuse, such as a human task)."""
    document = load_definition_yaml(text)
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO wf_definition_version_t (host_id, wf_def_id, version, namespace, name,"
            " definition, document, definition_digest, schema_digest, binding_approval,"
            " owner_user_id, owner_position_id, published_by) VALUES (%(host)s, %(wf)s,"
            " %(version)s, 'claims', 'summarize-claim', %(text)s, %(doc)s::jsonb, %(dd)s, %(sd)s,"
            " 'carryOver', %(owner)s, %(position)s, 'steve')",
            {
                "host": HOST,
                "wf": wf_def_id,
                "version": version,
                "text": text,
                "doc": json.dumps(document),
                "dd": definition_digest(text),
                "sd": schema_digest(document),
                "owner": OWNER,
                "position": OWNER_POSITION,
            },
        )
