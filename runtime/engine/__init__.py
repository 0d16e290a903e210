"""Workflow definition model, CEL adapters and the pure interpreter."""

from __future__ import annotations

from runtime.engine.errors import DefinitionError, ExpressionError
from runtime.engine.model import WorkflowDefinition
from runtime.engine.parser import parse_definition

__all__ = ["DefinitionError", "ExpressionError", "WorkflowDefinition", "parse_definition"]
