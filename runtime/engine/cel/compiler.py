"""The shared CEL core: compile with limits and allow-lists, inspect references, evaluate.

Two adapters sit on the core: ``evaluate_predicate`` (a CEL bool, no truthiness) and
``evaluate_value`` (exactly one JSON value per the CEL value contract).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime.engine.cel import celpy_seam as shim
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.json_values import (
    CEL_VALUE_CONTRACT_VERSION,
    MISSING,
    cel_to_json,
    json_to_cel,
)
from runtime.engine.step_meter import StepMeter, StopRequested, current_meter

# Part of every compiled-program key so a profile change never reuses an old program.
PROFILE_VERSION: Final = f"cel-workflow-profile-1/cel-value-v{CEL_VALUE_CONTRACT_VERSION}"

GLOBAL_FUNCTIONS: Final = frozenset(
    {"has", "dyn", "size", "int", "uint", "double", "string", "bool", "bytes", "duration"}
    | {"timestamp", "type"}
)
# `matches` is left out: Python regexes backtrack, so their cost is not bounded by steps.
METHODS: Final = frozenset(
    {"size", "contains", "startsWith", "endsWith", "getDate", "getDayOfMonth", "getDayOfWeek"}
    | {"getDayOfYear", "getFullYear", "getMonth", "getHours", "getMilliseconds", "getMinutes"}
    | {"getSeconds"}
)
MACROS: Final = frozenset({"map", "filter", "all", "exists", "exists_one"})
RESERVED_WORDS: Final = frozenset(
    {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let"}
    | {"loop", "package", "namespace", "return", "var", "void", "while", "in", "true"}
    | {"false", "null"}
)
_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


@dataclass(frozen=True)
class CelLimits:
    """Static and evaluation limits of the CEL profile."""

    max_expression_chars: int = 4096
    max_nesting_depth: int = 32
    max_steps: int = 100_000
    max_result_bytes: int = 1_048_576
    # Bytes of values one evaluation may build (a task's own ceiling may bound it lower).
    max_built_bytes: int = 16 * 1024 * 1024


DEFAULT_LIMITS: Final = CelLimits()


@dataclass(frozen=True)
class CompiledExpression:
    """A parsed, checked expression with the root identifiers and functions it references."""

    text: str
    digest: str
    ast: shim.CelTree
    roots: frozenset[str]
    functions: frozenset[str]


_CACHE: OrderedDict[str, CompiledExpression] = OrderedDict()
_CACHE_SIZE: Final = 4096


def expression_digest(text: str) -> str:
    """sha256 over the profile version and the expression text: the compile-cache key."""
    raw = f"{PROFILE_VERSION}\n{text}".encode()
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def is_identifier(name: str) -> bool:
    """True when ``name`` can be bound as a top-level CEL variable."""
    return bool(_IDENTIFIER.match(name)) and name not in RESERVED_WORDS


def compile_expression(text: str, limits: CelLimits = DEFAULT_LIMITS) -> CompiledExpression:
    """Compile (or fetch from cache) one CEL expression, enforcing size, depth and allow-lists."""
    digest = expression_digest(text)
    cached = _CACHE.get(digest)
    if cached is not None:
        _CACHE.move_to_end(digest)
        return cached
    if len(text) > limits.max_expression_chars:
        raise ExpressionError(
            f"expression longer than {limits.max_expression_chars} characters",
            reason="limit",
            expression=text[:80],
        )
    try:
        ast = shim.parse(text)
    except shim.CelSyntaxError as exc:
        message = f"CEL syntax error: {exc}"
        raise ExpressionError(message, reason="syntax", expression=text) from None
    roots, functions, depth = _inspect(ast)
    if depth > limits.max_nesting_depth:
        raise ExpressionError(
            f"expression nests deeper than {limits.max_nesting_depth}",
            reason="limit",
            expression=text,
        )
    compiled = CompiledExpression(text, digest, ast, frozenset(roots), frozenset(functions))
    _CACHE[digest] = compiled
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return compiled


def referenced_roots(text: str) -> frozenset[str]:
    """The free top-level identifiers an expression reads (macro variables excluded)."""
    return compile_expression(text).roots


def _token(node: Any) -> str:
    return str(node)


def _args(node: shim.CelTree, index: int) -> list[Any]:
    if len(node.children) > index and isinstance(node.children[index], shim.TreeClass):
        return list(node.children[index].children)
    return []


def _inspect(ast: shim.CelTree) -> tuple[set[str], set[str], int]:
    """Walk the tree once: free roots, called functions, and `expr` nesting depth."""
    roots: set[str] = set()
    functions: set[str] = set()
    max_depth = 0
    stack: list[tuple[Any, frozenset[str], int]] = [(ast, frozenset(), 0)]
    while stack:
        node, bound, depth = stack.pop()
        if not isinstance(node, shim.TreeClass):
            continue
        kind = node.data
        if kind == "expr":
            depth += 1
            max_depth = max(max_depth, depth)
        if kind == "ident":
            name = _token(node.children[0])
            if name not in bound:
                roots.add(name)
            continue
        if kind == "dot_ident":
            roots.add(_token(node.children[0]))
            continue
        if kind in ("ident_arg", "dot_ident_arg"):
            name = _token(node.children[0])
            _check_function(name, GLOBAL_FUNCTIONS)
            functions.add(name)
            stack.extend((child, bound, depth) for child in _args(node, 1))
            continue
        if kind == "member_object":
            raise ExpressionError("message construction is not allowed", reason="function")
        if kind == "member_dot_arg":
            name = _token(node.children[1])
            stack.append((node.children[0], bound, depth))
            args = _args(node, 2)
            if name in MACROS:
                functions.add(name)
                variables = _macro_variables(args)
                if len(variables) != 1 or len(args) < 2:
                    raise ExpressionError(f"malformed macro {name}()", reason="syntax")
                inner = bound | variables
                stack.extend((child, inner, depth) for child in args[1:])
            else:
                _check_function(name, METHODS)
                functions.add(name)
                stack.extend((child, bound, depth) for child in args)
            continue
        stack.extend((child, bound, depth) for child in node.children)
    return roots, functions, max_depth


def _macro_variables(args: list[Any]) -> set[str]:
    if not args or not isinstance(args[0], shim.TreeClass):
        return set()
    return {_token(ident.children[0]) for ident in args[0].find_data("ident")}


def _check_function(name: str, allowed: frozenset[str]) -> None:
    if name not in allowed:
        raise ExpressionError(f"function {name}() is not allowed", reason="function")


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
