"""Rows the authoring context reads: the active revisions of the selected Tools (issue 38)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from generated.models import CallerPolicy, ToolAnnotations
from runtime.publication.store import QUERIES, fetch_all
from runtime.store import Connection


class AuthoringTool(msgspec.Struct, frozen=True):
    """A selected Tool's active revision as the authoring context may see it."""

    tool_id: str
    tool_name: str
    tool_description: str | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    tool_annotations: ToolAnnotations
    caller_policy: CallerPolicy
    version_status: str


async def select_authoring_tools(
    conn: Connection, host_id: str, tool_ids: Sequence[str]
) -> list[AuthoringTool]:
    """The active revisions of tool_ids on host_id (a Tool with none is absent)."""
    params = {"host_id": host_id, "tool_ids": list(tool_ids)}
    return await fetch_all(conn, QUERIES["select_authoring_tools"], params, AuthoringTool)
