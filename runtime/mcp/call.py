"""What a handler receives besides its typed input."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.security import InvocationContext
    from runtime.services import Services


@dataclass(frozen=True)
class ToolCall:
    """One authenticated, validated tool call: its name, caller, arguments and services."""

    tool_name: str
    context: InvocationContext
    services: Services
    arguments: Mapping[str, Any]
