"""The shape lattice of the data-flow checker: what a JSON value can look like at a site.

A shape is ``unknown`` (anything: it never proves a problem), a scalar kind, an array of an
item shape, or an object whose known fields each carry a presence. A *closed* object has no
fields beyond the known ones, so reading another field is provably absent. Joining two shapes
(two paths into one task) keeps only what both paths guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Kind = Literal["unknown", "object", "array", "string", "number", "bool", "null"]
# always: present on every path; maybe: provably absent on some path; unsure: not known.
Presence = Literal["always", "maybe", "unsure"]
_PRESENCE_RANK: Final = {"always": 0, "unsure": 1, "maybe": 2}


@dataclass(frozen=True)
class Field:
    """A known object field: its value's shape and whether every path has it."""

    shape: Shape
    presence: Presence = "always"


@dataclass(frozen=True)
class Shape:
    """One node of the lattice; ``fields``/``closed`` for objects, ``item`` for arrays."""

    kind: Kind
    fields: Mapping[str, Field] = field(default_factory=dict)
    closed: bool = False
    item: Shape | None = None

    @property
    def is_object(self) -> bool:
        """True for an object shape."""
        return self.kind == "object"

    def field_names(self) -> list[str]:
        """The known field names, sorted."""
        return sorted(self.fields)


UNKNOWN: Final = Shape("unknown")
STRING: Final = Shape("string")
NUMBER: Final = Shape("number")
BOOL: Final = Shape("bool")
NULL: Final = Shape("null")
EMPTY_OBJECT: Final = Shape("object", {}, closed=True)


def obj(fields: Mapping[str, Field], *, closed: bool) -> Shape:
    """An object shape."""
    return Shape("object", dict(fields), closed=closed)


def array(item: Shape) -> Shape:
    """An array shape."""
    return Shape("array", item=item)


def join(left: Shape | None, right: Shape | None) -> Shape | None:
    """What two paths guarantee together; None is "no path" and joins as identity."""
    if left is None:
        return right
    if right is None:
        return left
    return join_shapes(left, right)


def join_shapes(left: Shape, right: Shape) -> Shape:
    """The least shape covering both (``unknown`` when the kinds differ)."""
    if left == right:
        return left
    if left.kind != right.kind or left.kind == "unknown":
        return UNKNOWN
    if left.kind == "array":
        return array(join_shapes(left.item or UNKNOWN, right.item or UNKNOWN))
    if left.kind != "object":
        return left
    fields: dict[str, Field] = {}
    for name in set(left.fields) | set(right.fields):
        fields[name] = _join_field(left.fields.get(name), left, right.fields.get(name), right)
    return obj(fields, closed=left.closed and right.closed)


def _join_field(a: Field | None, a_owner: Shape, b: Field | None, b_owner: Shape) -> Field:
    if a is not None and b is not None:
        presence = max(a.presence, b.presence, key=_PRESENCE_RANK.__getitem__)
        return Field(join_shapes(a.shape, b.shape), presence)
    present, missing_owner = (a, b_owner) if a is not None else (b, a_owner)
    assert present is not None
    if missing_owner.closed:
        return Field(present.shape, "maybe")
    absent: Presence = "maybe" if present.presence == "maybe" else "unsure"
    return Field(UNKNOWN, absent)


def merge_objects(base: Shape, overlay: Shape) -> Shape:
    """A shallow merge (the object-form export): overlay's keys overwrite base's."""
    if not (base.is_object and overlay.is_object):
        return UNKNOWN
    fields = dict(base.fields)
    for name, value in overlay.fields.items():
        previous = fields.get(name)
        if value.presence != "always" and previous is not None:
            # The overlay may leave the key out, so the old value may remain.
            value = Field(join_shapes(previous.shape, value.shape), previous.presence)
        fields[name] = value
    return obj(fields, closed=base.closed and overlay.closed)


def of_json(value: Any) -> Shape:
    """The shape of a literal JSON value (objects are closed)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int | float):
        return NUMBER
    if isinstance(value, str):
        return STRING
    if value is None:
        return NULL
    if isinstance(value, Mapping):
        return obj({str(k): Field(of_json(v)) for k, v in value.items()}, closed=True)
    if isinstance(value, list | tuple):
        item: Shape | None = None
        for element in value:
            item = join(item, of_json(element))
        return array(item or UNKNOWN)
    return UNKNOWN


_SCALARS: Final = {"string": STRING, "integer": NUMBER, "number": NUMBER, "boolean": BOOL}
_SCALARS_NULL: Final = {"null": NULL}


def of_schema(schema: Any) -> Shape:
    """The shape a JSON Schema guarantees; closed only with additionalProperties: false."""
    if not isinstance(schema, Mapping):
        return UNKNOWN
    if any(key in schema for key in ("$ref", "anyOf", "oneOf", "allOf", "not", "if")):
        return UNKNOWN
    kind = schema.get("type")
    if kind is None and ("properties" in schema or "required" in schema):
        kind = "object"
    if not isinstance(kind, str):
        return UNKNOWN
    if kind == "object":
        return _object_of_schema(schema)
    if kind == "array":
        return array(of_schema(schema.get("items")))
    return _SCALARS.get(kind) or _SCALARS_NULL.get(kind) or UNKNOWN


def _object_of_schema(schema: Mapping[str, Any]) -> Shape:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    fields = {
        str(name): Field(of_schema(sub), "always" if name in required else "maybe")
        for name, sub in properties.items()
    }
    for name in required - set(fields):
        fields[name] = Field(UNKNOWN, "always")
    closed = schema.get("additionalProperties") is False and "patternProperties" not in schema
    return obj(fields, closed=closed)


def describe(shape: Shape) -> str:
    """A short human name of a shape, for messages."""
    if shape.kind == "object":
        return "a map"
    if shape.kind == "array":
        return "a list"
    return {"string": "a string", "number": "a number", "bool": "a bool", "null": "null"}.get(
        shape.kind, "a value"
    )
