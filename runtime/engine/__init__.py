"""Workflow definition model, CEL adapters, static analysis and the pure interpreter.

Parts, each importing only the ones below it (tests/unit/test_engine_imports.py):

- ``run``: the interpreter, its task kinds, deadlines, faults, ports and engine threads;
- ``check``: static analysis of a parsed definition (runtime requirements, data flow);
- ``parse``: a definition document checked against the profile into the model;
- ``cel``: CEL compiled under limits, evaluated to JSON, and the DSL's `${ }` value trees;
- ``model`` (the definition's typed nodes) and ``step_meter`` (a task attempt's step budget).

Here are the entry points most callers need; each part's package exports the rest.
"""

from __future__ import annotations

from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.check import mcp_calls, static_requirements
from runtime.engine.model import HttpCallSpec, WorkflowDefinition, walk_tasks
from runtime.engine.parse.definition import parse_definition
from runtime.engine.parse.definition_errors import DefinitionError

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
