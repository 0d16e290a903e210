"""The authorization-filtered catalog of an author: the selected Tools they may call, as the
authoring model may see them (seed 001 Phase 3).

Only Tools with an active revision on the caller's host whose caller policy admits the caller
are read; any other selected Tool refuses the whole request (never silently dropped). What is
sent is an allow-list of each Tool's metadata (name, description, input and output schemas,
effect annotations), never its endpoints, dispatch targets, caller policy or grants; schema
samples (default, examples) and vendor extensions are withheld, secret-bearing properties are
removed, and credential-like text is redacted. Every withheld field is reported by pointer.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from msgspec import UNSET

from generated.models import CallerPolicy
from runtime.canonical import canonical_digest
from runtime.errors import WorkflowError, policy_denied
from runtime.publication.authoring.credential_text import credential_kinds, redacted
from runtime.publication.store.authoring_rows import AuthoringTool, select_authoring_tools
from runtime.security import InvocationContext
from runtime.store import Connection

# Schema keywords whose values are samples of real data: they never enter the context.
_SAMPLE_KEYWORDS: Final = frozenset({"default", "examples", "example"})
_SECRET_NAME_PARTS: Final = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "authorization",
    "credential",
    "privatekey",
    "private_key",
    "cookie",
    "session",
)


@dataclass(frozen=True)
class CatalogTool:
    """One selected Tool as the authoring context carries it."""

    tool_id: str
    tool_name: str
    metadata: dict[str, Any]
    schema_digest: str
    stripped: tuple[str, ...]


def caller_may_call(ctx: InvocationContext, policy: CallerPolicy) -> bool:
    """Whether the verified caller meets the Tool's caller policy ({} admits everyone).

    The same rule workflow_invoke applies (runtime.invocation.rules.check_caller_policy),
    answered as a boolean here because authoring sits below invocation.
    """
    roles = [] if policy.any_role is UNSET else policy.any_role
    clauses = [] if policy.require_any_of is UNSET else policy.require_any_of
    if not roles and not clauses:
        return True
    if any(role in ctx.roles for role in roles):
        return True
    return any(
        clause.value in (ctx.roles if clause.claim == "role" else ctx.positions)
        for clause in clauses
    )


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _is_secret_bearing(name: str, schema: Any) -> bool:
    lowered = name.lower().replace("-", "").replace("_", "")
    if any(part.replace("-", "").replace("_", "") in lowered for part in _SECRET_NAME_PARTS):
        return True
    if isinstance(schema, Mapping):
        return schema.get("writeOnly") is True or schema.get("format") == "password"
    return False


def _clean(value: Any, pointer: str, stripped: list[str]) -> Any:
    """value with samples, extensions and secret-bearing properties removed; text redacted."""
    if isinstance(value, str):
        if credential_kinds(value):
            stripped.append(pointer)
            return redacted(value)
        return value
    if isinstance(value, list):
        return [_clean(item, f"{pointer}/{index}", stripped) for index, item in enumerate(value)]
    if not isinstance(value, Mapping):
        return value
    cleaned: dict[str, Any] = {}
    for key, item in value.items():
        where = f"{pointer}/{_escape(str(key))}"
        if key in _SAMPLE_KEYWORDS or str(key).startswith("x-"):
            stripped.append(where)
            continue
        if key == "properties" and isinstance(item, Mapping):
            cleaned[key] = _clean_properties(item, where, stripped)
            continue
        cleaned[key] = _clean(item, where, stripped)
    if isinstance(cleaned.get("required"), list) and isinstance(cleaned.get("properties"), dict):
        kept = cleaned["properties"]
        cleaned["required"] = [name for name in cleaned["required"] if name in kept]
    return cleaned


def _clean_properties(
    properties: Mapping[str, Any], pointer: str, stripped: list[str]
) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for name, schema in properties.items():
        where = f"{pointer}/{_escape(str(name))}"
        if _is_secret_bearing(str(name), schema):
            stripped.append(where)
            continue
        kept[name] = _clean(schema, where, stripped)
    return kept


def context_tool(tool: AuthoringTool) -> CatalogTool:
    """The metadata of one Tool that may enter the authoring context, and what was withheld."""
    stripped: list[str] = []
    annotations = tool.tool_annotations
    raw: dict[str, Any] = {
        "name": tool.tool_name,
        "description": tool.tool_description or "",
        "inputSchema": copy.deepcopy(tool.input_schema) if tool.input_schema else {},
        "outputSchema": copy.deepcopy(tool.output_schema) if tool.output_schema else {},
        "annotations": {"readOnly": annotations.read_only, "destructive": annotations.destructive},
    }
    metadata = _clean(raw, "", stripped)
    return CatalogTool(
        tool_id=tool.tool_id,
        tool_name=tool.tool_name,
        metadata=metadata,
        schema_digest=canonical_digest(metadata),
        stripped=tuple(stripped),
    )


async def selected_tools(
    conn: Connection, ctx: InvocationContext, tool_ids: Sequence[str]
) -> list[CatalogTool]:
    """The selected Tools the caller may call on their host, in toolId order.

    Refuses the request when any selected Tool has no serving revision on the host
    (WORKFLOW_NOT_FOUND) or does not admit the caller (WORKFLOW_POLICY_DENIED): a partial
    selection would draft something the author did not ask for.
    """
    wanted = sorted(set(tool_ids))
    rows = await select_authoring_tools(conn, ctx.host_id, wanted)
    serving = {row.tool_id: row for row in rows if row.version_status == "active"}
    unknown = [tool_id for tool_id in wanted if tool_id not in serving]
    if unknown:
        raise WorkflowError(
            "WORKFLOW_NOT_FOUND",
            "selected Tools have no active revision on the caller's host: " + ", ".join(unknown),
            details={"toolIds": unknown},
        )
    denied = [
        tool_id for tool_id in wanted if not caller_may_call(ctx, serving[tool_id].caller_policy)
    ]
    if denied:
        raise policy_denied(
            "the caller may not call these selected Tools, so they cannot enter a draft: "
            + ", ".join(denied)
        )
    return [context_tool(serving[tool_id]) for tool_id in wanted]
