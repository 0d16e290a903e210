"""Runtime expressions (`${ ... }`), value trees and the leading-dot compatibility rewrite."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from runtime.engine.cel.compiler import CelLimits
from runtime.engine.cel.evaluation import check_result_size, evaluate_value

_RUNTIME_EXPRESSION = re.compile(r"^\s*\$\{(?P<body>.*)\}\s*$", re.DOTALL)


def expression_text(value: Any) -> str | None:
    """The CEL text when the whole trimmed string is `${ ... }`; None for a literal."""
    if not isinstance(value, str):
        return None
    match = _RUNTIME_EXPRESSION.match(value)
    return match.group("body").strip() if match else None


def site_expression(value: str) -> str:
    """CEL text of an always-expression field, where `${ }` may be left out."""
    inner = expression_text(value)
    return inner if inner is not None else value.strip()


def rewrite_leading_dot_leaves(tree: Any, warnings: list[str], where: str) -> Any:
    """Rewrite bare `.x` leaves of an object-form transform to `${ .x }` and warn."""
    if isinstance(tree, str):
        if tree.strip().startswith(".") and expression_text(tree) is None:
            warnings.append(f"{where}: bare leaf {tree!r} rewritten to '${{ {tree.strip()} }}'")
            return f"${{ {tree.strip()} }}"
        return tree
    if isinstance(tree, Mapping):
        return {k: rewrite_leading_dot_leaves(v, warnings, where) for k, v in tree.items()}
    if isinstance(tree, list):
        return [rewrite_leading_dot_leaves(v, warnings, where) for v in tree]
    return tree


def tree_expressions(tree: Any) -> Iterator[str]:
    """Every `${ }` expression text in a value tree."""
    if isinstance(tree, str):
        text = expression_text(tree)
        if text is not None:
            yield text
    elif isinstance(tree, Mapping):
        for value in tree.values():
            yield from tree_expressions(value)
    elif isinstance(tree, list | tuple):
        for value in tree:
            yield from tree_expressions(value)


def evaluate_tree(tree: Any, variables: Mapping[str, Any], limits: CelLimits) -> Any:
    """Evaluate a value tree: `${ }` leaves become JSON, other values stay literals.

    A leaf whose expression reads a missing field is the expression error, as everywhere in
    CEL (dsl-profile §1: "A failed evaluation is the expression error"): the entry is never
    dropped in silence, so a run cannot complete without a value its definition sets. Guard an
    optional field with has() to leave it out on purpose.
    """
    result = _evaluate_node(tree, variables, limits)
    check_result_size(result, limits)
    return result


def _evaluate_node(tree: Any, variables: Mapping[str, Any], limits: CelLimits) -> Any:
    if isinstance(tree, str):
        text = expression_text(tree)
        if text is None:
            return tree
        return evaluate_value(text, variables, limits)
    if isinstance(tree, Mapping):
        return {key: _evaluate_node(value, variables, limits) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return [_evaluate_node(v, variables, limits) for v in tree]
    return tree
