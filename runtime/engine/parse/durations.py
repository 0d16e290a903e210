"""Literal DSL durations (ISO 8601 strings or unit maps) as whole milliseconds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

_ISO = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_UNIT_MS = {
    "days": 86_400_000,
    "hours": 3_600_000,
    "minutes": 60_000,
    "seconds": 1000,
    "milliseconds": 1,
}


class DurationError(ValueError):
    """Not a literal duration of this profile."""


def parse_duration_ms(value: Any) -> int:
    """Milliseconds of an ISO 8601 duration (PT0.5S) or a {days,...,milliseconds} map."""
    if isinstance(value, str):
        return _parse_iso(value)
    if isinstance(value, Mapping):
        return _parse_units(value)
    raise DurationError("a duration must be an ISO 8601 string or a unit map")


def _parse_iso(text: str) -> int:
    if text.strip().startswith("${"):
        raise DurationError("durations must be literal, not expressions")
    match = _ISO.match(text.strip())
    if match is None or text.strip() in ("P", "PT") or text.strip().endswith("T"):
        raise DurationError(f"invalid ISO 8601 duration {text!r}")
    total = Decimal(0)
    for unit, amount in match.groupdict().items():
        if amount is not None:
            total += Decimal(amount) * _UNIT_MS[unit]
    return int(total)


def _parse_units(value: Mapping[str, Any]) -> int:
    if not value or set(value) - set(_UNIT_MS):
        raise DurationError("a duration map uses only days, hours, minutes, seconds, milliseconds")
    total = 0
    for unit, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
            raise DurationError(f"duration {unit} must be a non-negative integer")
        total += amount * _UNIT_MS[unit]
    return total
