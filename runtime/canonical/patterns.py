"""JSON Schema `pattern` and `patternProperties` on RE2, a linear-time regular expression engine.

Python's `re` backtracks: `^(a+)+$` against 28 `a`s and a `!` takes seconds, and a schema's
patterns run on caller input in the request path. RE2 runs every pattern in time linear in the
input, and a pattern it cannot compile (backreferences, lookaround) is refused when the schema
is published instead of being run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import jsonschema
import re2
from jsonschema import ValidationError

# Keywords whose value maps names to subschemas (the names are not keywords themselves).
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
# Keywords whose value is data, never a subschema: no pattern inside them runs.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
# The memory RE2 may use for one compiled pattern: a bound on what a hostile pattern costs.
_MAX_PATTERN_MEMORY = 8 * 1024 * 1024


class PatternError(ValueError):
    """A schema pattern that RE2 cannot compile; ``where`` is its JSON pointer in the schema."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"the pattern at {where} is not a supported regular expression: {reason}")
        self.where = where


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported to the caller, not to stderr
    options.max_mem = _MAX_PATTERN_MEMORY
    return options


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """The RE2 program for a pattern; raises ValueError when RE2 cannot compile it."""
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)[:120]) from None


def _patterns(schema: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every (pointer, pattern) a schema would run, in document order."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from _patterns(item, f"{where}/{index}")
        return
    if not isinstance(schema, Mapping):
        return
    for key, value in schema.items():
        here = f"{where}/{_escape(str(key))}"
        if key == "pattern" and isinstance(value, str):
            yield here, value
        elif key == "patternProperties" and isinstance(value, Mapping):
            for name, subschema in value.items():
                yield f"{here}/{_escape(str(name))}", str(name)
                yield from _patterns(subschema, f"{here}/{_escape(str(name))}")
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            for name, subschema in value.items():
                yield from _patterns(subschema, f"{here}/{_escape(str(name))}")
        elif key not in _DATA_KEYWORDS:
            yield from _patterns(value, here)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def check_schema_patterns(schema: Any) -> None:
    """Raise PatternError for the first pattern of the schema that RE2 cannot compile."""
    for where, pattern in _patterns(schema, ""):
        try:
            compile_pattern(pattern)
        except ValueError as exc:
            raise PatternError(where or "/", str(exc)) from None


def _search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        # The instance is caller data: the message names the rule, never the value.
        yield ValidationError(f"the value does not match {pattern[:80]!r}")


def _pattern_properties(
    validator: Any, pattern_properties: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        name
        for name in instance
        if name not in properties and not any(_search(p, name) for p in patterns)
    ]


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(f"additional properties are not allowed ({len(extras)} found)")


_RE2_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


@lru_cache(maxsize=8)
def _re2_class(base: Any) -> Any:
    return jsonschema.validators.extend(base, _RE2_KEYWORDS)


def re2_validator(schema: Any) -> jsonschema.protocols.Validator:
    """A validator for the schema's own draft (2020-12 by default) whose patterns run on RE2.

    Raises jsonschema.SchemaError for an invalid schema and PatternError for a pattern RE2
    cannot compile, so no pattern is ever first compiled on caller input.
    """
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    base.check_schema(schema)
    check_schema_patterns(schema)
    validator: jsonschema.protocols.Validator = _re2_class(base)(schema)
    return validator
