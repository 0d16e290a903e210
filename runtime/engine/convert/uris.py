"""`${ }` inside an HTTP endpoint: path values become URI-template placeholders, query values
become `with.query` entries.

light-workflow substitutes expression values into the URI text. Our profile never
interpolates an endpoint (no expression may decide the scheme or host) and allows placeholders
only in the path, filled from the task input's top-level fields; so each path value is routed
through the task's `input.from` and each query value through `with.query`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from runtime.engine.convert.expressions import convert_expression, convert_string, template_parts
from runtime.engine.convert.scope import Scope

_ORIGIN = re.compile(r"^(?P<origin>[A-Za-z][A-Za-z0-9+.-]*://[^/?#$]+)(?P<rest>.*)$", re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UriNotConvertible(ValueError):
    """The endpoint's scheme or host is computed: no profile form keeps its meaning."""


@dataclass
class TemplatedUri:
    """The converted endpoint: its template, the placeholders' values and the query entries."""

    template: str
    placeholders: dict[str, str] = field(default_factory=dict)
    query: dict[str, Any] = field(default_factory=dict)


def convert_uri(uri: str, scope: Scope) -> TemplatedUri:
    """Rewrite one endpoint with `${ }` inside it, or raise UriNotConvertible."""
    match = _ORIGIN.match(uri)
    if match is None or "${" in match.group("origin"):
        raise UriNotConvertible("the scheme or host is computed by an expression")
    path, question, query = match.group("rest").partition("?")
    result = TemplatedUri(template="")
    template_path = (
        "".join(_path_piece(is_expr, text, scope, result) for is_expr, text in template_parts(path))
        if path
        else ""
    )
    if question:
        for key, value in parse_qsl(query, keep_blank_values=True):
            if "${" in key:
                raise UriNotConvertible("a query parameter name is computed by an expression")
            converted = convert_string(value, scope)
            result.query[key] = converted if converted == value else _stringified(converted)
    result.template = match.group("origin") + template_path
    return result


def _path_piece(is_expression: bool, text: str, scope: Scope, result: TemplatedUri) -> str:
    if not is_expression:
        return text
    name = _placeholder_name(text, result.placeholders)
    result.placeholders[name] = f"${{ {convert_expression(text, scope)} }}"
    return "{" + name + "}"


def _placeholder_name(text: str, taken: dict[str, str]) -> str:
    words = _NAME.findall(text)
    base = words[-1] if words else "value"
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}{suffix}", suffix + 1
    return name


def _stringified(converted: str) -> str:
    """A query value is text: wrap a lone expression in string() (interpolations already are)."""
    body = converted.strip()[2:-1].strip()
    return converted if body.startswith("string(") or "+" in body else f"${{ string({body}) }}"
