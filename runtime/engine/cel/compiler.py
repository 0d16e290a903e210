"""Compiling CEL for the workflow profile: limits, allow-lists, references, the compile cache.

The evaluators (``runtime.engine.cel.evaluation``) run what this module compiled.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from runtime.engine.cel import celpy_seam as shim
from runtime.engine.cel.expression_error import ExpressionError
from runtime.engine.cel.json_values import CEL_VALUE_CONTRACT_VERSION

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
