"""The reference validator: jsonschema Draft 2020-12 with ECMA-262 end-of-input anchors.

JSON Schema patterns are ECMA-262 regexes, where `$` matches only at the end of the input.
Python's `$` also matches before a final newline, so plain jsonschema would accept
"sha256:<hex>\\n" while fastjsonschema (which rewrites `$` to `\\Z`) rejects it. The reference
applies the same rewrite so the two validators agree and a trailing newline never passes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from codegen.contracts import SCHEMAS_FILE, ContractSet

# The same rewrite fastjsonschema applies (any unescaped `$`, including inside [] sets).
_DOLLAR = re.compile(r"(?<!\\)\$")


@functools.lru_cache(maxsize=512)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """The compiled form of a schema pattern with `$` meaning end of input."""
    return re.compile(_DOLLAR.sub(r"\\Z", pattern))


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


ReferenceValidator: Any = jsonschema.validators.extend(Draft202012Validator, {"pattern": _pattern})


def contracts_registry(contracts: ContractSet) -> Registry[Any]:
    """A referencing registry holding schemas.json under its file name."""
    resource = Resource.from_contents(contracts.schemas_document, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(SCHEMAS_FILE, resource)
    return registry


def reference_validator(schema: Any, registry: Registry[Any] | None = None) -> Any:
    """A Draft 2020-12 validator for schema (refs resolved through registry, if given)."""
    if registry is None:
        return ReferenceValidator(schema)
    return ReferenceValidator(schema, registry=registry)


def is_valid(schema: Any, instance: Any) -> bool:
    """Whether the reference validator accepts instance under a bundled schema."""
    return bool(ReferenceValidator(schema).is_valid(instance))


def first_error(validator: Any, instance: Any) -> str | None:
    """The best-match error message of an instance, or None when it is valid."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    where = "/" + "/".join(str(part) for part in error.absolute_path)
    return f"at {where}: {error.message}"
