"""Request builders for publication tests: valid arguments for the definition tools."""

from __future__ import annotations

import re
import uuid
from typing import Any

from runtime.canonical import definition_digest
from runtime.security.devtools import DEV_HOST_ID, DEV_USER_ID
from tests.support.shared import SET_EXPORT_ASSERT

SIMPLE_DEFINITION = SET_EXPORT_ASSERT.read_text(encoding="utf-8")


_DOCUMENT_VERSION = re.compile(r'^(  version: )"?[^"\n]*"?$', re.MULTILINE)


def versioned(text: str, version: str) -> str:
    """The definition text with document.version set to version (publish refuses others)."""
    return _DOCUMENT_VERSION.sub(lambda m: f'{m.group(1)}"{version}"', text, count=1)


def new_id() -> str:
    """A fresh UUID string."""
    return str(uuid.uuid4())


def save_args(
    wf_def_id: str,
    revision: int,
    *,
    definition: str = SIMPLE_DEFINITION,
    catalog_visible: bool = False,
    owner_user_id: str = DEV_USER_ID,
    host_id: str = DEV_HOST_ID,
    active: bool = True,
) -> dict[str, Any]:
    """Arguments of workflow_definition_save."""
    return {
        "hostId": host_id,
        "wfDefId": wf_def_id,
        "sourceRevision": revision,
        "actor": "steve",
        "namespace": "light-portal",
        "name": "simple-set-assert",
        "version": "1.0.0",
        "definition": definition,
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": catalog_visible,
        "owner": {"userId": owner_user_id, "positionId": "pos-1"},
        "active": active,
    }


def publish_args(
    wf_def_id: str,
    version: str = "1.0.0",
    *,
    definition: str = SIMPLE_DEFINITION,
    operation_id: str | None = None,
    host_id: str = DEV_HOST_ID,
    binding_approval: str = "carryOver",
) -> dict[str, Any]:
    """Arguments of workflow_definition_publish with the right expected digest."""
    definition = versioned(definition, version)
    return {
        "hostId": host_id,
        "wfDefId": wf_def_id,
        "namespace": "light-portal",
        "name": "simple-set-assert",
        "version": version,
        "definition": definition,
        "expectedDefinitionDigest": definition_digest(definition),
        "bindingApproval": binding_approval,
        "owner": {"userId": DEV_USER_ID, "positionId": "pos-1"},
        "operationId": operation_id or new_id(),
    }


def definition_text(marker: int = 1) -> str:
    """A small valid definition; marker changes its digest."""
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: light-portal\n"
        "  name: marker\n"
        '  version: "1.0.0"\n'
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


def grants_args(wf_def_id: str, revision: int, grant_ids: list[str]) -> dict[str, Any]:
    """Arguments of workflow_definition_grants_sync."""
    return {
        "hostId": DEV_HOST_ID,
        "wfDefId": wf_def_id,
        "sourceRevision": revision,
        "actor": "steve",
        "grants": [
            {
                "grantId": grant_id,
                "toolId": new_id(),
                "toolVersion": "1.0.0",
                "lightapiDigest": "sha256:" + "a" * 64,
                "allowedEnvironments": ["dev"],
            }
            for grant_id in grant_ids
        ],
    }
