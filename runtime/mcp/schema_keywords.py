"""JSON Schema keywords whose cost does not grow with hostile input, for listing refusals.

jsonschema's own implementations build each error message from the instance's repr (a 1 MB
array is printed in full for one wrong type), check uniqueItems pairwise, quadratic in the
array's length for objects (4,000 items took 20 s), and validate every item of an array far
over its maxItems (30,000 caller-policy clauses took 0.6 s). schema_problems writes its own
messages from the keyword and the schema, so these keep jsonschema's verdicts with a constant
message, check uniqueness through one canonical encoding per item, and examine at most
maxItems items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import jsonschema
import msgspec
from jsonschema import ValidationError
from jsonschema._utils import equal

Keyword = Callable[[Any, Any, Any, Any], Iterator[ValidationError]]


def _type(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    wanted = types if isinstance(types, list) else [types]
    if not any(validator.is_type(instance, kind) for kind in wanted):
        yield ValidationError("type")


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not any(equal(instance, allowed) for allowed in enums):
        yield ValidationError("enum")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not equal(instance, const):
        yield ValidationError("const")


def _sized(kind: str, too_small: bool) -> Keyword:
    def check(validator: Any, bound: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, kind) and (
            len(instance) < bound if too_small else len(instance) > bound
        ):
            yield ValidationError("size")

    return check


def _item_key(item: Any) -> bytes | None:
    try:
        return msgspec.json.encode(item, order="sorted")
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    # One key per item: linear. Numbers keep their JSON spelling, so 1 and 1.0 count as two
    # items here; the generated validator, not this list, decides whether a call is refused.
    keys = [_item_key(item) for item in instance]
    known = [key for key in keys if key is not None]
    if len(set(known)) != len(known):
        yield ValidationError("uniqueItems")


def _items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    # Items past maxItems are not examined: the array is refused for its length already, and
    # every catalog array has a bound, so a hostile 1 MB array costs what its bound allows.
    start = len(schema.get("prefixItems", ()))
    bound = schema.get("maxItems")
    end = bound if isinstance(bound, int) and not isinstance(bound, bool) else len(instance)
    for index in range(start, min(end, len(instance))):
        yield from validator.descend(instance[index], items, path=index)


BOUNDED_KEYWORDS: Final[dict[str, Keyword]] = {
    "items": _items,
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minLength": _sized("string", too_small=True),
    "maxLength": _sized("string", too_small=False),
    "minItems": _sized("array", too_small=True),
    "maxItems": _sized("array", too_small=False),
    "minProperties": _sized("object", too_small=True),
    "maxProperties": _sized("object", too_small=False),
    "uniqueItems": _unique_items,
}


def bounded(validator: jsonschema.protocols.Validator) -> jsonschema.protocols.Validator:
    """The same validator (schema, RE2 patterns) with the bounded keywords above."""
    cls = jsonschema.validators.extend(type(validator), BOUNDED_KEYWORDS)
    result: jsonschema.protocols.Validator = cls(validator.schema)
    return result
