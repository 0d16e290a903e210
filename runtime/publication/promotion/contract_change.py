"""Whether a pinned Tool's contract changed compatibly between two versions (drift's kind).

A dependencyVersion drift is a pin on a version the nested Tool no longer has active. Whether
that strands the outer Tool depends on how the nested Tool's contract moved: if the active
version accepts every input the pinned one accepted, and promises every output the pinned one
promised, the outer workflow's calls and its reads of their results still hold (compatible);
anything else is breaking. JSON Schema inclusion is undecidable in general, so this proves
compatibility only for the changes a Tool's contract usually goes through, and calls every other
difference breaking (it never calls a breaking change compatible):

- input: a property made optional, a new optional property, an enum that grew, a maximum
  length, size or value that was raised (or a minimum lowered);
- output: a new property (unless the pinned schema closed the object), a property newly
  required, an optional property dropped, an enum that shrank, a bound that was tightened;
- in both: annotations (title, description, examples, $comment, default) changed.

Values are taken to carry only the properties their schema declares (callers send the pinned
input's properties, the Tool returns its output's): so a new optional input property does not
break a caller even where the pinned schema left the object open, and a property the pinned
input declared must stay declared (or be admitted by additionalProperties).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Change = Literal["compatible", "breaking"]

_ANNOTATIONS = frozenset({"title", "description", "examples", "$comment", "default"})
_UPPER = frozenset({"maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum"})
_LOWER = frozenset({"minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum"})
_OBJECT = frozenset({"properties", "required", "additionalProperties"})


def contract_change(pinned: tuple[Any, Any], current: tuple[Any, Any]) -> Change:
    """Classify the move from the pinned (input, output) schemas to the current ones."""
    widened = _covers(current[0], pinned[0])
    narrowed = _covers(pinned[1], current[1])
    return "compatible" if widened and narrowed else "breaking"


def _covers(wide: Any, narrow: Any) -> bool:
    """Whether every value schema `narrow` accepts is provably accepted by `wide`."""
    if wide == narrow or wide in ({}, True):
        return True
    if not isinstance(wide, Mapping) or not isinstance(narrow, Mapping):
        return False
    keys = (set(wide) | set(narrow)) - _ANNOTATIONS
    for key in keys:
        if key in _OBJECT:
            continue
        if not _keyword_covers(key, wide.get(key), narrow.get(key)):
            return False
    return _object_covers(wide, narrow)


def _keyword_covers(key: str, wide: Any, narrow: Any) -> bool:
    if wide == narrow:
        return True
    if key == "enum":
        return wide is None or (
            isinstance(narrow, list) and isinstance(wide, list) and all(v in wide for v in narrow)
        )
    if key == "items":
        return narrow is not None and _covers(wide if wide is not None else {}, narrow)
    if key in _UPPER:
        return wide is None or (_number(narrow) and _number(wide) and wide >= narrow)
    if key in _LOWER:
        return wide is None or (_number(narrow) and _number(wide) and wide <= narrow)
    return False  # type, format, pattern, const, anyOf, $ref, ... moved: not provable


def _object_covers(wide: Mapping[str, Any], narrow: Mapping[str, Any]) -> bool:
    wide_props = wide.get("properties") or {}
    narrow_props = narrow.get("properties") or {}
    if not isinstance(wide_props, Mapping) or not isinstance(narrow_props, Mapping):
        return False
    # Anything required by the wide schema must be required by the narrow one already.
    if not set(wide.get("required") or ()) <= set(narrow.get("required") or ()):
        return False
    for name, schema in narrow_props.items():
        if name in wide_props:
            if not _covers(wide_props[name], schema):
                return False
            continue
        # A property only the narrow schema declares goes to the wide one's extras.
        extra = wide.get("additionalProperties", True)
        if extra is False or (isinstance(extra, Mapping) and not _covers(extra, schema)):
            return False
    # Properties only the wide schema declares: values of the narrow one never carry them.
    return True


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
