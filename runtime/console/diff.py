"""What changed between two binding revisions, field by field (JSON pointers to leaf values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

_ABSENT = object()


@dataclass(frozen=True)
class Change:
    """One field: its pointer, and its value before and after (None when absent), as JSON."""

    pointer: str
    before: str | None
    after: str | None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def flatten(value: Any, pointer: str = "") -> dict[str, Any]:
    """Every leaf of value by its JSON pointer; an empty object or list is a leaf."""
    if isinstance(value, dict) and value:
        leaves: dict[str, Any] = {}
        for key, item in value.items():
            leaves.update(flatten(item, f"{pointer}/{_escape(str(key))}"))
        return leaves
    if isinstance(value, list) and value:
        leaves = {}
        for index, item in enumerate(value):
            leaves.update(flatten(item, f"{pointer}/{index}"))
        return leaves
    return {pointer or "/": value}


def _shown(value: Any) -> str | None:
    return None if value is _ABSENT else msgspec.json.encode(value).decode()


def changes(before: Any, after: Any) -> list[Change]:
    """The fields whose values differ, in pointer order (before None: everything is new)."""
    old = flatten(before) if before is not None else {}
    new = flatten(after)
    return [
        Change(pointer, _shown(old.get(pointer, _ABSENT)), _shown(new.get(pointer, _ABSENT)))
        for pointer in sorted(old.keys() | new.keys())
        if old.get(pointer, _ABSENT) != new.get(pointer, _ABSENT)
    ]
