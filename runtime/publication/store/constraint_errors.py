"""The publication tables' named constraints whose violations become typed errors.

Registered once, when the store package is imported (``runtime.store.translate_error``).
"""

from __future__ import annotations

from typing import Any

from runtime.errors import WorkflowError
from runtime.store import register_constraint_error

DEFINITION_VERSION_IMMUTABLE = "wf_definition_version_immutable"
DEFINITION_VERSION_RETIRED_TERMINAL = "wf_definition_version_retired_terminal"
GRANT_PK = "workflow_tool_grant_pk"
AI_AUTHORED_PRIVATE = "wf_definition_ai_authored_private"


def _version_immutable(_: Any) -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_DEFINITION_MISMATCH", "a published definition version cannot be changed"
    )


def _version_retired(_: Any) -> WorkflowError:
    return WorkflowError("WORKFLOW_DEFINITION_RETIRED", "the definition version is retired")


def _duplicate_grant(_: Any) -> WorkflowError:
    return WorkflowError("WORKFLOW_INPUT_INVALID", "a grantId appears twice in the grant set")


def _ai_authored_private(_: Any) -> WorkflowError:
    # The head was AI-authored once (the mark is sticky): saving it visible is refused even
    # when the new text no longer carries the provenance.
    return WorkflowError(
        "WORKFLOW_INPUT_INVALID",
        "an AI-authored definition stays private (catalogVisible: false); production exposure "
        "is the separate Tool binding promotion under the normal gates",
        details={
            "problems": [
                {
                    "pointer": "/catalogVisible",
                    "rule": "ai-authored-private-first",
                    "message": "this definition was AI-authored: it is never saved visible",
                }
            ]
        },
    )


register_constraint_error(AI_AUTHORED_PRIVATE, _ai_authored_private)
register_constraint_error(DEFINITION_VERSION_IMMUTABLE, _version_immutable)
register_constraint_error(DEFINITION_VERSION_RETIRED_TERMINAL, _version_retired)
register_constraint_error(GRANT_PK, _duplicate_grant)
