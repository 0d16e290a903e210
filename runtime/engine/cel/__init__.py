"""CEL for the workflow profile: compile under limits and allow-lists, evaluate, JSON <-> CEL.

``celpy_seam`` is the only module that touches cel-python; ``value_trees`` handles the DSL's
`${ }` strings and object-form value trees on top of the evaluators.
"""

from __future__ import annotations

from runtime.engine.cel.celpy_seam import prepare as prepare_parser
from runtime.engine.cel.compiler import (
    DEFAULT_LIMITS,
    CelLimits,
    CompiledExpression,
    compile_expression,
    is_identifier,
)
from runtime.engine.cel.evaluation import (
    build_activation,
    canonical_size,
    check_result_size,
    evaluate_predicate,
    evaluate_value,
)
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.json_values import MISSING, cel_to_json, json_to_cel
from runtime.engine.cel.value_trees import evaluate_tree, expression_text, site_expression

__all__ = [
    "DEFAULT_LIMITS",
    "MISSING",
    "CelLimits",
    "CompiledExpression",
    "ExpressionError",
    "build_activation",
    "canonical_size",
    "cel_to_json",
    "check_result_size",
    "compile_expression",
    "evaluate_predicate",
    "evaluate_tree",
    "evaluate_value",
    "expression_text",
    "is_identifier",
    "json_to_cel",
    "prepare_parser",
    "site_expression",
]
