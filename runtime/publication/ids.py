"""Identifier normalization for lookups by ids that did not pass a tool's input validator."""

from __future__ import annotations

import uuid


def normalize_uuid(value: object) -> str | None:
    """The canonical lower-case form of a UUID string, or None when value is not one."""
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None
