"""Workflow definition model, CEL adapters and the pure interpreter."""

from __future__ import annotations

from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.model import WorkflowDefinition
from runtime.engine.parse.definition import parse_definition
from runtime.engine.parse.definition_errors import DefinitionError

__all__ = ["DefinitionError", "ExpressionError", "WorkflowDefinition", "parse_definition"]
