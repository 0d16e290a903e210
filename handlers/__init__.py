"""The handler table: each tool name (a generated route) to the hand-written code serving it.

`handlers/<tool_name>.py` holds one tool's `handle` (and `refuse` where a contract rule
classifies a validator refusal). The composition (runtime/composition) hands HANDLERS to the app;
tests/unit/test_handlers.py keeps it and generated.routes.ROUTES equal, both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from generated.tools import ToolName
from handlers import (
    workflow_binding_decide,
    workflow_binding_get,
    workflow_binding_list,
    workflow_binding_publish,
    workflow_binding_retire,
    workflow_binding_revoke,
    workflow_binding_rollback,
    workflow_cancel,
    workflow_definition_draft,
    workflow_definition_grants_sync,
    workflow_definition_publish,
    workflow_definition_retire,
    workflow_definition_save,
    workflow_emission_deliver,
    workflow_feature_cancel,
    workflow_feature_create,
    workflow_feature_decide,
    workflow_feature_get,
    workflow_feature_stage_accept,
    workflow_feature_stage_start,
    workflow_get_result,
    workflow_get_status,
    workflow_invoke,
    workflow_secret_delete,
    workflow_secret_list,
    workflow_secret_put,
    workflow_start,
    workflow_task_complete,
    workflow_task_get,
    workflow_task_list,
    workflow_wait_result,
)
from runtime.mcp.call import ToolHandler

# In catalog order.
HANDLERS: Final[Mapping[ToolName, ToolHandler]] = {
    "workflow_definition_save": ToolHandler(workflow_definition_save.handle),
    "workflow_definition_publish": ToolHandler(workflow_definition_publish.handle),
    "workflow_definition_retire": ToolHandler(workflow_definition_retire.handle),
    "workflow_definition_grants_sync": ToolHandler(workflow_definition_grants_sync.handle),
    "workflow_binding_publish": ToolHandler(
        workflow_binding_publish.handle, workflow_binding_publish.refuse
    ),
    "workflow_binding_retire": ToolHandler(workflow_binding_retire.handle),
    "workflow_binding_get": ToolHandler(workflow_binding_get.handle),
    "workflow_binding_list": ToolHandler(workflow_binding_list.handle),
    "workflow_binding_decide": ToolHandler(workflow_binding_decide.handle),
    "workflow_binding_revoke": ToolHandler(workflow_binding_revoke.handle),
    "workflow_binding_rollback": ToolHandler(workflow_binding_rollback.handle),
    "workflow_invoke": ToolHandler(workflow_invoke.handle),
    "workflow_start": ToolHandler(workflow_start.handle),
    "workflow_wait_result": ToolHandler(workflow_wait_result.handle),
    "workflow_get_status": ToolHandler(workflow_get_status.handle),
    "workflow_get_result": ToolHandler(workflow_get_result.handle),
    "workflow_cancel": ToolHandler(workflow_cancel.handle),
    "workflow_secret_put": ToolHandler(workflow_secret_put.handle),
    "workflow_secret_list": ToolHandler(workflow_secret_list.handle),
    "workflow_secret_delete": ToolHandler(workflow_secret_delete.handle),
    "workflow_task_list": ToolHandler(workflow_task_list.handle),
    "workflow_task_get": ToolHandler(workflow_task_get.handle),
    "workflow_task_complete": ToolHandler(workflow_task_complete.handle),
    "workflow_emission_deliver": ToolHandler(workflow_emission_deliver.handle),
    "workflow_feature_create": ToolHandler(workflow_feature_create.handle),
    "workflow_feature_get": ToolHandler(workflow_feature_get.handle),
    "workflow_feature_stage_start": ToolHandler(workflow_feature_stage_start.handle),
    "workflow_feature_stage_accept": ToolHandler(workflow_feature_stage_accept.handle),
    "workflow_feature_decide": ToolHandler(workflow_feature_decide.handle),
    "workflow_feature_cancel": ToolHandler(workflow_feature_cancel.handle),
    "workflow_definition_draft": ToolHandler(workflow_definition_draft.handle),
}
