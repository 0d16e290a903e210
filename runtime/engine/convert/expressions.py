"""light-workflow expressions rewritten as CEL that reads what light-workflow would read.

The rules are light-workflow's (../shared/design/light-workflow-semantics.md): a text not
starting with `.` is CEL over the context's keys when it compiles and names only known keys;
otherwise a comparison is split at its first operator and each side is a path, a literal or,
for any other word, the string itself (`premium`); `${ }` inside other text is interpolated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from runtime.engine.cel import ExpressionError
from runtime.engine.cel.compiler import referenced_roots
from runtime.engine.convert.scope import PROFILE_ROOTS, Scope

PATH = re.compile(r"^\.[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*$")
# light-workflow looks for each operator in this order and splits at the first found.
_OPERATORS = ("<=", ">=", "==", "!=", "<", ">")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_QUOTED = re.compile(r"""^(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")$""", re.DOTALL)
_TOKEN = re.compile(
    r"""(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    r"|(?P<path>\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)"
    r"|(?P<ident>[A-Za-z_]\w*)"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_CEL_WORDS = frozenset({"true", "false", "null", "in"})
# After these a `.name` continues a value (member access); anywhere else it starts a path.
_VALUE_ENDS = re.compile(r"[\w)\]'\"]$")


def convert_expression(text: str, scope: Scope) -> str:
    """One light-workflow expression (no `${ }`) as CEL in our profile."""
    body = text.strip()
    if not body.startswith(".") and _is_cel(body, scope):
        return rewrite_cel(body, scope)
    for operator in _OPERATORS:
        if operator in body:
            left, _, right = body.partition(operator)
            return f"{_operand(left, scope)} {operator} {_operand(right, scope)}"
    return _operand(body, scope)


def convert_string(value: str, scope: Scope) -> str:
    """A value-tree string: `${ e }` converted, `${ }` inside text made one CEL concatenation."""
    parts = list(template_parts(value))
    if not any(is_expression for is_expression, _ in parts):
        return value
    if len(parts) == 1:
        return f"${{ {convert_expression(parts[0][1], scope)} }}"
    terms = [
        f"string({convert_expression(text, scope)})" if is_expression else cel_string(text)
        for is_expression, text in parts
    ]
    return "${ " + " + ".join(terms) + " }"


def template_parts(value: str) -> Iterator[tuple[bool, str]]:
    """The text and `${ e }` (or `${{ e }}`) pieces of a string, in order; whitespace-only
    text around a single expression is dropped, as light-workflow trims it."""
    pieces: list[tuple[bool, str]] = []
    position = 0
    while (start := value.find("${", position)) >= 0:
        end = _closing_brace(value, start + 1)
        if end < 0:
            break
        if start > position:
            pieces.append((False, value[position:start]))
        inner = value[start + 2 : end]
        if inner.startswith("{") and inner.endswith("}"):
            inner = inner[1:-1]  # the `${{ e }}` spelling
        pieces.append((True, inner.strip()))
        position = end + 1
    if position < len(value):
        pieces.append((False, value[position:]))
    expressions = [piece for piece in pieces if piece[0]]
    if len(expressions) == 1 and all(piece[1].strip() == "" for piece in pieces if not piece[0]):
        pieces = expressions
    yield from pieces


def rewrite_cel(text: str, scope: Scope) -> str:
    """CEL text with each leading-dot path and each bare context-key variable resolved."""
    out: list[str] = []
    tokens = [(match.lastgroup or "", match.group()) for match in _TOKEN.finditer(text)]
    for position, (kind, token) in enumerate(tokens):
        previous = "".join(out).rstrip()
        if kind == "path" and not _VALUE_ENDS.search(previous):
            out.append(scope.resolve(token[1:].split(".")))
        elif kind == "ident" and _is_variable(token, tokens[position + 1 :], previous, scope):
            out.append(scope.resolve([token]))
        else:
            out.append(token)
    return "".join(out)


def cel_string(text: str) -> str:
    """A CEL string literal of text."""
    return json.dumps(text, ensure_ascii=False)


def _operand(text: str, scope: Scope) -> str:
    word = text.strip()
    if PATH.match(word):
        return scope.resolve(word[1:].split("."))
    if word.lower() in ("true", "false", "null"):
        return word.lower()
    if _NUMBER.match(word) or _QUOTED.match(word):
        return word
    if word.startswith(".") or (word and _is_cel(word, scope)):
        return rewrite_cel(word, scope)
    return cel_string(word)  # light-workflow reads any other word as that string


def _is_cel(text: str, scope: Scope) -> bool:
    """Whether light-workflow would evaluate text as CEL: it compiles and names known keys."""
    try:
        roots = referenced_roots(text)
    except ExpressionError:
        return False
    return roots <= scope.known() | PROFILE_ROOTS


def _is_variable(token: str, rest: list[tuple[str, str]], previous: str, scope: Scope) -> bool:
    if token in _CEL_WORDS or token in PROFILE_ROOTS or token not in scope.known():
        return False
    # A member, a function call or a map key is not a variable.
    return not (previous.endswith(".") or _next_significant(rest) in ("(", ":"))


def _next_significant(rest: list[tuple[str, str]]) -> str:
    return next((token for kind, token in rest if kind != "space"), "")


def _closing_brace(value: str, opening: int) -> int:
    depth, quote, position = 0, "", opening
    while position < len(value):
        char = value[position]
        if quote:
            if char == "\\":
                position += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return position
        position += 1
    return -1
