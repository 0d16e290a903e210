"""Shared builders for the publication tests (no tests here)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.canonical import definition_digest
from runtime.security import InvocationContext, SecretToken
from tests.support.publication import versioned

HOST = "01964b05-552a-7c4b-9184-6857e7f3dc5f"
OTHER_HOST = "01964b05-552a-7c4b-9184-000000000002"


def context(host_id: str = HOST, user_id: str = "steve") -> InvocationContext:
    """A verified caller context as runtime.security would build it."""
    return InvocationContext(
        host_id=host_id,
        user_id=user_id,
        subject=user_id,
        roles=frozenset({"workflow-admin"}),
        positions=frozenset(),
        caller_service_id="gateway",
        client_id="gateway",
        user_token=SecretToken("not-a-real-token"),
        user_token_expires_at=datetime.now(UTC) + timedelta(hours=1),
    )


def definition_text(marker: int = 1) -> str:
    """A small valid workflow definition; marker changes its digest."""
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
        "do:\n"
        "  - first:\n"
        "      set:\n"
        f"        marker: {marker}\n"
    )


def save_args(
    wf_def_id: str, revision: int, *, marker: int = 1, **overrides: Any
) -> dict[str, Any]:
    """workflow_definition_save arguments."""
    args: dict[str, Any] = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "sourceRevision": revision,
        "actor": "steve",
        "namespace": "claims",
        "name": "summarize-claim",
        "version": "1.2.0",
        "definition": definition_text(marker),
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": {"userId": "owner-1", "positionId": "pos-1"},
        "active": True,
    }
    args.update(overrides)
    return args


def publish_args(
    wf_def_id: str, version: str = "1.2.0", *, marker: int = 1, **overrides: Any
) -> dict[str, Any]:
    """workflow_definition_publish arguments with a fresh operationId."""
    text = versioned(definition_text(marker), version)
    args: dict[str, Any] = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": version,
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": "carryOver",
        "owner": {"userId": "owner-1", "positionId": "pos-1"},
        "operationId": str(uuid.uuid4()),
    }
    args.update(overrides)
    return args


def retire_args(wf_def_id: str, version: str = "1.2.0", **overrides: Any) -> dict[str, Any]:
    """workflow_definition_retire arguments with a fresh operationId."""
    args: dict[str, Any] = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "version": version,
        "operationId": str(uuid.uuid4()),
    }
    args.update(overrides)
    return args


def grants_args(wf_def_id: str, revision: int, grants: list[dict[str, Any]]) -> dict[str, Any]:
    """workflow_definition_grants_sync arguments."""
    return {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "sourceRevision": revision,
        "actor": "steve",
        "grants": grants,
    }


def named_uuid(name: str) -> str:
    """A stable UUID standing for a short test name (grant and Tool ids are UUIDs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"test:{name}"))


def grant(
    grant_id: str, tool_id: str = "tool-1", environments: list[str] | None = None
) -> dict[str, Any]:
    """One grant of a grant set; grant_id and tool_id are names turned into stable UUIDs."""
    return {
        "grantId": named_uuid(grant_id),
        "toolId": named_uuid(tool_id),
        "toolVersion": "1.0.0",
        "lightapiDigest": "sha256:" + "a" * 64,
        "allowedEnvironments": environments if environments is not None else ["dev"],
    }


def new_id() -> str:
    """A fresh lower-case UUID."""
    return str(uuid.uuid4())
