"""Dependency drift of active bindings: workflow_binding_get's drift section and the gauge."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest

from generated.models import BindingDrift, WorkflowBindingGetInput
from runtime.collaborators import Services
from runtime.publication import DestinationPolicy, sample_binding_drift
from runtime.publication.bindings import get_binding
from runtime.telemetry.metrics import REGISTRY
from tests.support.binding_builders import (
    HOST,
    OWNER,
    binding,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.invocation import Tool, ok, publish_tool, publish_version, revoke_args, save_head
from tests.support.mcp import McpTestClient
from tests.support.publication_builders import context
from tests.support.secret_backend import PARTNER_POLICY_DIGEST, api_key_definition

pytestmark = pytest.mark.requirement("001:Publication, Versioning, And Rollback")

CLAIMS = "https://api.example.com/claims"


def pin(inner: Tool, version: str) -> dict[str, Any]:
    """A dependency on the inner workflow-backed Tool at version."""
    return {
        "nestedToolId": inner.tool_id,
        "nestedToolVersion": version,
        "contractDigest": "sha256:" + "c" * 64,
        "authorizationToolName": "claims.inner",
        "dispatchTarget": "claims.inner",
        "toolAnnotations": {"readOnly": True, "destructive": False},
    }


async def _outer(owner: McpTestClient, inner: Tool) -> str:
    """A write Tool reading secret partnerKey, calling CLAIMS, pinning inner at 1.2.0."""
    put = {"hostId": HOST, "name": "partnerKey", "value": "pk_drift_1", "operationId": new_id()}
    ok(await owner.call_tool("workflow_secret_put", put))
    text = api_key_definition(CLAIMS)
    wf_def_id, tool_id = new_id(), new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    value = write_binding(wf_def_id, tool_id, text, toolName="claims.outer")
    args = publish_args(
        value,
        0,
        endpoint_targets=[endpoint_target(uri=CLAIMS, policy_digest=PARTNER_POLICY_DIGEST)],
        dependencies=[pin(inner, "1.2.0")],
    )
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return tool_id


async def _drift(owner: McpTestClient, tool_id: str) -> dict[str, Any]:
    got = ok(await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id}))
    return dict(got["drift"])


def _gauge(kind: str) -> float:
    value = REGISTRY.get_sample_value("workflow_bindings_drifted", {"kind": kind})
    return 0.0 if value is None else value


async def test_a_drift_report_names_each_kind_of_drift(
    owner: McpTestClient,
    services: Services,
    admin: psycopg.AsyncConnection[Any],
    http: httpx.AsyncClient,
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    tool_id = await _outer(owner, inner)
    clean = await _drift(owner, tool_id)
    assert clean["drifted"] is False and clean["items"] == []
    # A revocation may break pinned calls on purpose (it is not gated): the pin drifts.
    ok(await owner.call_tool("workflow_binding_revoke", revoke_args(inner)))
    # What the guards keep from happening through the tools, an operator can still do in SQL.
    await admin.execute(
        "UPDATE workflow_secret_t SET deleted_ts = now(), key_id = NULL, nonce = NULL,"
        " ciphertext = NULL WHERE host_id = %s AND name = 'partnerKey'",
        (HOST,),
    )
    await admin.execute(
        "UPDATE wf_definition_version_t SET status = 'retired', retired_ts = now()"
        " WHERE host_id = %s AND wf_def_id = (SELECT wf_def_id FROM workflow_tool_binding_t"
        " WHERE host_id = %s AND tool_id = %s AND active)",
        (HOST, HOST, tool_id),
    )
    drift = await _drift(owner, tool_id)
    assert drift["drifted"] is True
    kinds = {item["kind"]: item for item in drift["items"]}
    assert set(kinds) == {"dependencyVersion", "secretDeleted", "definitionRetired"}
    assert kinds["dependencyVersion"]["subject"] == inner.tool_id
    assert kinds["dependencyVersion"]["pinned"] == "1.2.0"
    assert "current" not in kinds["dependencyVersion"]
    assert "no active revision" in kinds["dependencyVersion"]["message"]
    assert kinds["secretDeleted"]["subject"] == "partnerKey"
    assert kinds["definitionRetired"]["pinned"] == "1.2.0"
    # A destination policy tightened after publication: the stored target drifts.
    strict = DestinationPolicy(allowed_hosts=frozenset({"other.example.com"}))
    request = WorkflowBindingGetInput(host_id=HOST, tool_id=tool_id)
    got = await get_binding(services.database, context(user_id=OWNER), request, policy=strict)
    assert isinstance(got.drift, BindingDrift)
    endpoint = [item for item in got.drift.items if item.kind == "endpointTarget"]
    assert [item.subject for item in endpoint] == ["claims-api"]
    assert "destination policy" in endpoint[0].message
    await sample_binding_drift(services.database)
    exposition = (await http.get("/metrics")).text
    for kind in ("dependencyVersion", "secretDeleted", "definitionRetired"):
        assert _gauge(kind) >= 1, kind
        assert f'workflow_bindings_drifted{{kind="{kind}"}}' in exposition


async def test_a_pinned_version_that_is_not_the_promoted_one_is_drift_with_both_versions(
    owner: McpTestClient,
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    text = api_key_definition(CLAIMS)
    put = {"hostId": HOST, "name": "partnerKey", "value": "pk_drift_2", "operationId": new_id()}
    ok(await owner.call_tool("workflow_secret_put", put))
    wf_def_id, tool_id = new_id(), new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    value = write_binding(wf_def_id, tool_id, text, toolName="claims.outer")
    args = publish_args(
        value,
        0,
        endpoint_targets=[endpoint_target(uri=CLAIMS, policy_digest=PARTNER_POLICY_DIGEST)],
        dependencies=[pin(inner, "1.1.0")],
    )
    ok(await owner.call_tool("workflow_binding_publish", args))
    drift = await _drift(owner, tool_id)
    assert [(i["kind"], i["pinned"], i["current"]) for i in drift["items"]] == [
        ("dependencyVersion", "1.1.0", "1.2.0")
    ]


async def _moved_back(owner: McpTestClient, name: str, **contract: Any) -> Tool:
    """A Tool active at 1.2.0 whose 1.3.0 (with this contract) was promoted and rolled back."""
    inner = await publish_tool(owner, toolName=name)
    newer = await publish_tool(
        owner,
        toolName=name,
        version="1.3.0",
        tool_id=inner.tool_id,
        wf_def_id=inner.wf_def_id,
        expected_version=inner.aggregate_version,
        **contract,
    )
    rollback = {
        "hostId": HOST,
        "toolId": inner.tool_id,
        "expectedBindingDigest": newer.binding_digest,
        "comment": "back to 1.2.0",
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_binding_rollback", rollback))
    return inner


async def _pinning(owner: McpTestClient, inner: Tool, name: str) -> str:
    """An outer Tool whose active revision pins inner at 1.3.0."""
    outer = await publish_tool(owner, toolName=name)
    value = binding(outer.wf_def_id, outer.tool_id, outer.text, toolName=name, syncWaitMs=19000)
    args = publish_args(value, outer.aggregate_version, dependencies=[pin(inner, "1.3.0")])
    assert ok(await owner.call_tool("workflow_binding_publish", args))["status"] == "active"
    return outer.tool_id


async def test_a_pinned_tool_that_moved_compatibly_is_listed_as_compatible_and_is_no_drift(
    owner: McpTestClient,
) -> None:
    # 1.3.0 took an optional claimId; 1.2.0 (active again) takes any object: it accepts every
    # input 1.3.0 did, and both promise the same output.
    optional = {"type": "object", "properties": {"claimId": {"type": "string"}}}
    inner = await _moved_back(owner, "claims.inner", inputSchema=optional)
    drift = await _drift(owner, await _pinning(owner, inner, "claims.outer"))
    assert drift["drifted"] is False
    [item] = drift["items"]
    assert (item["kind"], item["pinned"], item["current"]) == (
        "dependencyVersion",
        "1.3.0",
        "1.2.0",
    )
    assert item["contractChange"] == "compatible"
    assert "compatible contract change" in item["message"]


async def test_a_pinned_tool_whose_output_lost_a_promised_field_is_breaking_drift(
    owner: McpTestClient,
) -> None:
    # 1.3.0 promised a summary; 1.2.0 (active again) promises nothing: an outer workflow
    # reading the summary breaks.
    promised = {
        "type": "object",
        "required": ["summary"],
        "properties": {"summary": {"type": "string"}},
    }
    inner = await _moved_back(owner, "claims.inner", outputSchema=promised)
    drift = await _drift(owner, await _pinning(owner, inner, "claims.outer"))
    assert drift["drifted"] is True
    [item] = drift["items"]
    assert item["kind"] == "dependencyVersion" and item["contractChange"] == "breaking"
