"""Definition parsing: a YAML-loaded document checked against the profile into the model.

``definition`` parses the top-level sections and hands task lists to ``task_lists``, which
parses the fields every task shares and hands the kind-specific part to ``task_specs`` (calls
to ``call_specs``). ``expression_checks`` then compiles every expression of the parsed
definition and checks its identifiers. Every problem found is one ``DefinitionError``.
"""

from __future__ import annotations

from runtime.engine.parse.definition import parse_definition
from runtime.engine.parse.definition_errors import DefinitionError, Problem
from runtime.engine.parse.expression_checks import ExpressionSite, expression_sites

__all__ = ["DefinitionError", "ExpressionSite", "Problem", "expression_sites", "parse_definition"]
