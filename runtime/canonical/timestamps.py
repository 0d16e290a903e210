"""The contract's Timestamp: one written form for every time a tool answers with."""

from __future__ import annotations

from datetime import UTC, datetime


def timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with a Z suffix and always six fractional digits (the contract's
    Timestamp allows one to six; one fixed form makes equal times equal strings)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
