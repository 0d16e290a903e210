"""Typed requests of the invocation services (handlers map the generated inputs onto these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from msgspec import UnsetType

T = TypeVar("T")


def given(value: T | UnsetType) -> T | None:
    """An optional contract field as None when the caller left it out."""
    return None if isinstance(value, UnsetType) else value


@dataclass(frozen=True)
class InvokeRequest:
    """workflow_invoke: the Tool, the digests the Gateway pinned, the input and the keys."""

    stable_tool_ref: str
    input: dict[str, Any]
    expected_definition_digest: str
    expected_binding_digest: str | None = None
    idempotency_key: str | None = None
    parent_action_id: str | None = None
    # What the caller may see of the run (disclosure.ceiling); None: no ceiling stored.
    disclosure_ceiling: list[str] | None = None


@dataclass(frozen=True)
class StartRequest:
    """workflow_start: the saved definition, the input, an optional key and digest."""

    wf_def_id: str
    input: dict[str, Any]
    idempotency_key: str | None = None
    expected_definition_digest: str | None = None
    # What the caller may see of the run (disclosure.ceiling); None: no ceiling stored.
    disclosure_ceiling: list[str] | None = None
