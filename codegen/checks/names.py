"""The tool names and identity rules the contract fixes."""

from __future__ import annotations

import re

PUBLICATION_TOOLS = (
    "workflow_definition_save",
    "workflow_definition_publish",
    "workflow_definition_retire",
    "workflow_definition_grants_sync",
    "workflow_binding_publish",
    "workflow_binding_retire",
    "workflow_binding_get",
    "workflow_binding_list",
    "workflow_binding_decide",
    "workflow_binding_revoke",
    "workflow_binding_rollback",
)
# The host secret store (issue 24): publication-shaped tools (hostId, publisher bearer).
SECRET_TOOLS = (
    "workflow_secret_put",
    "workflow_secret_list",
    "workflow_secret_delete",
)
OPERATION_TOOLS = (
    "workflow_definition_publish",
    "workflow_definition_retire",
    "workflow_binding_publish",
    "workflow_binding_retire",
    "workflow_binding_decide",
    "workflow_binding_revoke",
    "workflow_binding_rollback",
    "workflow_secret_put",
    "workflow_secret_delete",
)
RUNTIME_TOOLS = (
    "workflow_invoke",
    "workflow_start",
    "workflow_get_status",
    "workflow_get_result",
    "workflow_wait_result",
    "workflow_cancel",
)
# The human-task inbox (issue 22): an assignee's tasks, by the verified token.
INBOX_TOOLS = (
    "workflow_task_list",
    "workflow_task_get",
    "workflow_task_complete",
)
# AI-assisted authoring (issue 38): a draft-only query, host-asserting like publication.
AUTHORING_TOOLS = ("workflow_definition_draft",)
# The Lightspeed receiver bridge (issue 37): seed 003's emissions delivered to this service.
LIGHTSPEED_TOOLS = ("workflow_emission_deliver",)
# The development-feature stage ledger (issue 36, seed 004): operations on the caller's host.
FEATURE_TOOLS = (
    "workflow_feature_create",
    "workflow_feature_get",
    "workflow_feature_stage_start",
    "workflow_feature_stage_accept",
    "workflow_feature_decide",
    "workflow_feature_cancel",
)
ALL_TOOLS = (
    PUBLICATION_TOOLS
    + RUNTIME_TOOLS
    + SECRET_TOOLS
    + INBOX_TOOLS
    + LIGHTSPEED_TOOLS
    + FEATURE_TOOLS
    + AUTHORING_TOOLS
)
# Tools that carry hostId and the publisher's bearer.
HOST_ASSERTING_TOOLS = PUBLICATION_TOOLS + SECRET_TOOLS + AUTHORING_TOOLS

# The only identity-looking input paths the contract allows, per tool.
IDENTITY_EXCEPTIONS: dict[str, frozenset[str]] = {
    name: frozenset({"/hostId"}) for name in HOST_ASSERTING_TOOLS
}
IDENTITY_EXCEPTIONS["workflow_definition_save"] = frozenset({"/hostId", "/owner"})
IDENTITY_EXCEPTIONS["workflow_definition_publish"] = frozenset({"/hostId", "/owner"})
IDENTITY_EXCEPTIONS["workflow_binding_list"] = frozenset({"/hostId", "/role"})

_IDENTITY_NAMES = frozenset(
    {
        "host",
        "hostid",
        "hostids",
        "tenant",
        "tenantid",
        "tenantids",
        "owner",
        "owners",
        "ownerid",
        "ownerids",
        "role",
        "roles",
        "rolename",
        "rolenames",
        "authorization",
        "authorisation",
        "authz",
        "authn",
    }
)
_IDENTITY_SUFFIXES = ("hostid", "tenantid", "ownerid")
# Spellings a patternProperties regex must not admit.
IDENTITY_SPELLINGS = (
    "hostId",
    "host_id",
    "hostID",
    "HostId",
    "tenantId",
    "owner",
    "ownerId",
    "role",
    "roles",
    "authorization",
    "Authorization",
    "authz",
)

UUID_EXAMPLE = "01964b05-552a-7c4b-9184-6857e7f3dc5f"
NOT_UUIDS = ("not-a-uuid", UUID_EXAMPLE[:-1], UUID_EXAMPLE + "\n", f"{{{UUID_EXAMPLE}}}")
DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"
MALFORMED_DIGESTS = (
    "sha256:xyz",
    "sha256:" + "0" * 63,
    "sha256:" + "0" * 64 + "\n",
    "SHA256:" + "0" * 64,
    "sha512:" + "0" * 64,
)
EXTRA_PROPERTY = "unexpectedProbeProperty"


def normalize_name(name: str) -> str:
    """Lower case with separators removed (host_id, hostID and host-id all become hostid)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def is_identity_name(name: str) -> bool:
    """Whether a property name looks like caller identity or authority."""
    normalized = normalize_name(name)
    return normalized in _IDENTITY_NAMES or normalized.endswith(_IDENTITY_SUFFIXES)
