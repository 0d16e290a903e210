"""Workflow definition model, CEL adapters and the pure interpreter."""

from __future__ import annotations

from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.errors import DefinitionError
from runtime.engine.model import WorkflowDefinition
from runtime.engine.parser import parse_definition

__all__ = ["DefinitionError", "ExpressionError", "WorkflowDefinition", "parse_definition"]
