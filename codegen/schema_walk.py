"""Keyword-aware traversal of JSON Schema documents (subschemas versus plain data)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

# Keywords whose value maps names to subschemas.
MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords whose value is one subschema.
SINGLE_KEYWORDS = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
# Keywords whose value is a list of subschemas.
LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")


def escape_pointer_token(token: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_pointer_token(token: str) -> str:
    """Undo escape_pointer_token."""
    return token.replace("~1", "/").replace("~0", "~")


def map_subschemas(schema: Any, transform: Callable[[Any, str], Any], pointer: str = "") -> Any:
    """Copy one schema node, applying transform(subschema, pointer) to each direct subschema."""
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for keyword, value in schema.items():
        here = f"{pointer}/{escape_pointer_token(keyword)}"
        if keyword in MAP_KEYWORDS and isinstance(value, dict):
            result[keyword] = {
                name: transform(sub, f"{here}/{escape_pointer_token(name)}")
                for name, sub in value.items()
            }
        elif keyword in SINGLE_KEYWORDS and isinstance(value, (dict, bool)):
            result[keyword] = transform(value, here)
        elif keyword in LIST_KEYWORDS and isinstance(value, list):
            result[keyword] = [transform(sub, f"{here}/{i}") for i, sub in enumerate(value)]
        else:
            result[keyword] = value
    return result


def iter_subschemas(schema: Any, pointer: str = "") -> Iterator[tuple[str, str, Any]]:
    """Yield (pointer, keyword, subschema) for every direct subschema of one node."""
    if not isinstance(schema, dict):
        return
    for keyword, value in schema.items():
        here = f"{pointer}/{escape_pointer_token(keyword)}"
        if keyword in MAP_KEYWORDS and isinstance(value, dict):
            for name, sub in value.items():
                yield f"{here}/{escape_pointer_token(name)}", keyword, sub
        elif keyword in SINGLE_KEYWORDS and isinstance(value, (dict, bool)):
            yield here, keyword, value
        elif keyword in LIST_KEYWORDS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield f"{here}/{i}", keyword, sub


def walk_schema(schema: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (pointer, node) for the schema and every nested subschema object, depth first."""
    if not isinstance(schema, dict):
        return
    yield pointer, schema
    for sub_pointer, _keyword, sub in iter_subschemas(schema, pointer):
        yield from walk_schema(sub, sub_pointer)
