"""Evaluating compiled CEL, metered: the two adapters the engine's expression sites use.

``evaluate_predicate`` wants a CEL bool (no truthiness); ``evaluate_value`` gives exactly one
JSON value per the CEL value contract. Inside a task attempt each one is charged to its meter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.engine.cel import celpy_seam as shim
from runtime.engine.cel.compiler import (
    DEFAULT_LIMITS,
    CelLimits,
    CompiledExpression,
    compile_expression,
    is_identifier,
)
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.json_values import MISSING, cel_to_json, json_to_cel
from runtime.engine.step_meter import StepMeter, StopRequested, current_meter


def _compile_for_use(expression: CompiledExpression | str, limits: CelLimits) -> CompiledExpression:
    if isinstance(expression, CompiledExpression):
        return expression
    return compile_expression(expression, limits)


def build_activation(
    roots: Mapping[str, Any],
    subject: Any = None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Bind JSON roots first, then the subject's top-level keys, then unbound context keys."""
    names: dict[str, Any] = dict(roots)
    for layer in (subject, context):
        if isinstance(layer, Mapping):
            for key, value in layer.items():
                if key not in names and is_identifier(key):
                    names[key] = value
    return names


def _run(compiled: CompiledExpression, variables: Mapping[str, Any], limits: CelLimits) -> Any:
    needed = {name: json_to_cel(variables[name]) for name in compiled.roots if name in variables}
    task = current_meter()
    meter = _evaluation_meter(task, limits)
    try:
        value = shim.evaluate(compiled.ast, needed, meter)
    except (shim.BudgetError, shim.MemoryBudgetError) as exc:
        _charge(task, meter)  # raises when the task's own budget or ceiling bound it
        raise ExpressionError(str(exc), reason="cost", expression=compiled.text) from None
    except shim.EvaluationStopped:
        raise StopRequested() from None
    except shim.CelEvaluationError as exc:
        _charge(task, meter)
        reason = "missing" if exc.missing else "evaluate"
        raise ExpressionError(exc.message, reason=reason, expression=compiled.text) from None
    _charge(task, meter)
    return value


def _evaluation_meter(task: StepMeter | None, limits: CelLimits) -> shim.StepMeter:
    # One evaluation never runs past the task's budget: the task meter stops it at that step.
    if task is None:
        return shim.StepMeter(limits.max_steps, None, limits.max_built_bytes)
    remaining = task.remaining()
    budget = limits.max_steps if remaining is None else min(limits.max_steps, remaining)
    byte_budget = min(limits.max_built_bytes, task.remaining_bytes())
    return shim.StepMeter(budget, task.stop_event, byte_budget)


def _charge(task: StepMeter | None, meter: shim.StepMeter) -> None:
    if task is not None:
        task.charge_bytes(meter.bytes_built)
        task.charge(meter.steps)


def evaluate_predicate(
    expression: CompiledExpression | str,
    variables: Mapping[str, Any],
    limits: CelLimits = DEFAULT_LIMITS,
) -> bool:
    """Evaluate a predicate site: the result must be a CEL bool, never a truthy value."""
    compiled = _compile_for_use(expression, limits)
    value = _run(compiled, variables, limits)
    if not isinstance(value, shim.BoolType | bool):
        raise ExpressionError(
            f"a predicate must return bool, not {_cel_type_name(value)}",
            reason="type",
            expression=compiled.text,
        )
    return bool(value)


def evaluate_value(
    expression: CompiledExpression | str,
    variables: Mapping[str, Any],
    limits: CelLimits = DEFAULT_LIMITS,
    *,
    allow_omit: bool = False,
) -> Any:
    """Evaluate a value site to one JSON value; MISSING only when omission is allowed."""
    compiled = _compile_for_use(expression, limits)
    try:
        value = _run(compiled, variables, limits)
    except ExpressionError as exc:
        if allow_omit and exc.reason == "missing":
            return MISSING
        raise
    try:
        result = cel_to_json(value, max_depth=limits.max_nesting_depth * 2)
    except ExpressionError as exc:
        raise ExpressionError(exc.message, reason="convert", expression=compiled.text) from None
    check_result_size(result, limits, compiled.text)
    return result


def canonical_size(value: Any) -> int:
    """Bytes of the compact, key-sorted JSON form of a value."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8"))


def check_result_size(value: Any, limits: CelLimits, expression: str | None = None) -> None:
    """Reject a result whose canonical JSON exceeds the result-size limit."""
    if canonical_size(value) > limits.max_result_bytes:
        raise ExpressionError(
            f"result larger than {limits.max_result_bytes} bytes",
            reason="limit",
            expression=expression,
        )


def _cel_type_name(value: Any) -> str:
    if value is None:
        return "null"
    for name, cls in (
        ("int", shim.IntType),
        ("uint", shim.UintType),
        ("double", shim.DoubleType),
        ("string", shim.StringType),
        ("bytes", shim.BytesType),
        ("list", shim.ListType),
        ("map", shim.MapType),
    ):
        if isinstance(value, cls):
            return name
    return type(value).__name__
