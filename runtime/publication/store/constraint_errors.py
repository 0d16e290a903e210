"""Named constraints of the publication tables and the errors their violations become."""

from __future__ import annotations

from typing import Any

from runtime.errors import WorkflowError
from runtime.store import register_constraint_error

DEFINITION_PK = "wf_definition_pk"
DEFINITION_VERSION_PK = "wf_definition_version_pk"
DEFINITION_VERSION_IMMUTABLE = "wf_definition_version_immutable"
DEFINITION_VERSION_RETIRED_TERMINAL = "wf_definition_version_retired_terminal"
DEFINITION_VERSION_STATUS_CHECK = "wf_definition_version_status_check"
DEFINITION_VERSION_BINDING_APPROVAL_CHECK = "wf_definition_version_binding_approval_check"
GRANT_SYNC_PK = "workflow_definition_grant_sync_pk"
GRANT_PK = "workflow_tool_grant_pk"
GRANT_SYNC_FK = "workflow_tool_grant_sync_fk"
OPERATION_PK = "workflow_publication_operation_pk"


def _version_immutable(_: Any) -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_DEFINITION_MISMATCH", "a published definition version cannot be changed"
    )


def _version_retired(_: Any) -> WorkflowError:
    return WorkflowError("WORKFLOW_DEFINITION_RETIRED", "the definition version is retired")


def _duplicate_grant(_: Any) -> WorkflowError:
    return WorkflowError("WORKFLOW_INPUT_INVALID", "a grantId appears twice in the grant set")


register_constraint_error(DEFINITION_VERSION_IMMUTABLE, _version_immutable)
register_constraint_error(DEFINITION_VERSION_RETIRED_TERMINAL, _version_retired)
register_constraint_error(GRANT_PK, _duplicate_grant)
