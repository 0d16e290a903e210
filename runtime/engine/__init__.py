"""Workflow definition model, CEL adapters and the pure interpreter."""

from __future__ import annotations

from runtime.engine.analysis import mcp_calls, static_requirements
from runtime.engine.errors import DefinitionError, ExpressionError
from runtime.engine.model import HttpCallSpec, WorkflowDefinition, walk_tasks
from runtime.engine.parser import parse_definition

__all__ = [
    "DefinitionError",
    "ExpressionError",
    "HttpCallSpec",
    "WorkflowDefinition",
    "mcp_calls",
    "parse_definition",
    "static_requirements",
    "walk_tasks",
]
