"""The mcp-router.yml snapshot: the workflow-backed Tools a Gateway serves.

The publisher writes it from Workflow's receipts; the Gateway reads it. Seed 000 "Gateway
Changes" names what an entry carries; `bindingDigest` is optional in the parser because a Tool
published before binding revisions has none (the Gateway refuses that Tool alone).

`starts:` (issue 35) is the operator's own list beside the published Tools: each entry gives a
tool name to `workflow_start` of one definition, so a long-running or human-in-the-loop process
(which seed 000 keeps off the sync Tools) is served as an MCP task. The publisher keeps the
list as it finds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml

from generated.routes import ROUTES

SNAPSHOT_VERSION: Literal[1] = 1
# Workflow's own tools (the Gateway relays them or keeps them internal): a workflow-backed
# Tool may not take their names.
RESERVED_NAMES = frozenset(ROUTES)
DEFAULT_ROLES = ("admin", "host-admin", "genai-admin")

ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=128)]
Uuid = Annotated[
    str, msgspec.Meta(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
]
Digest = Annotated[str, msgspec.Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
Role = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]


class RouterError(ValueError):
    """A snapshot that cannot be served: the message names the entry and the field."""


class RoutedTool(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """One workflow-backed Tool as the Gateway serves it."""

    name: ToolName
    stable_tool_ref: Uuid
    workflow_definition_id: Uuid
    workflow_version: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    definition_digest: Digest
    input_schema: dict[str, Any]
    sync_wait_ms: Annotated[int, msgspec.Meta(ge=1, le=86_400_000)]
    binding_digest: Digest | None = None
    description: Annotated[str, msgspec.Meta(max_length=4096)] = ""
    invocation_mode: Literal["sync", "async"] = "sync"
    result_text_mode: Literal["compact-json", "summary"] = "compact-json"
    output_schema: dict[str, Any] | None = None
    maximum_request_bytes: Annotated[int, msgspec.Meta(ge=1)] | None = None
    roles: tuple[Role, ...] = DEFAULT_ROLES
    annotations: dict[str, Any] | None = None


class StartRoute(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """A task-started route: a tool name given to workflow_start of one definition.

    The run is the saved head of the definition, as workflow_start starts it; definitionDigest,
    when set, is workflow_start's expectedDefinitionDigest (a different head is refused).
    """

    name: ToolName
    workflow_definition_id: Uuid
    input_schema: dict[str, Any]
    # required: only a client declaring the tasks extension may call it (-32021 otherwise);
    # optional: without the extension the call is a plain workflow_start.
    task_support: Literal["required", "optional"]
    definition_digest: Digest | None = None
    description: Annotated[str, msgspec.Meta(max_length=4096)] = ""
    roles: tuple[Role, ...] = DEFAULT_ROLES


class RouterSnapshot(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The whole file: a format version and the Tools, in the order tools/list shows them."""

    version: Literal[1] = SNAPSHOT_VERSION
    tools: tuple[RoutedTool, ...] = ()
    # Task-started routes, listed after the Tools.
    starts: tuple[StartRoute, ...] = ()


def parse_snapshot(text: str) -> RouterSnapshot:
    """Parse and check mcp-router.yml text; RouterError says what is wrong."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise RouterError(f"mcp-router.yml is not YAML: {error}") from None
    if document is None:
        document = {}
    try:
        snapshot = msgspec.convert(document, RouterSnapshot)
    except msgspec.ValidationError as error:
        raise RouterError(f"mcp-router.yml: {error}") from None
    _check_names(snapshot)
    return snapshot


def _check_names(snapshot: RouterSnapshot) -> None:
    seen: set[str] = set()
    entries = [("tools", index, tool.name) for index, tool in enumerate(snapshot.tools)]
    entries += [("starts", index, start.name) for index, start in enumerate(snapshot.starts)]
    for section, index, name in entries:
        if name in RESERVED_NAMES:
            raise RouterError(f"mcp-router.yml: {section}[{index}].name {name!r} is reserved")
        if name in seen:
            raise RouterError(f"mcp-router.yml: {section}[{index}].name {name!r} is repeated")
        seen.add(name)
    for index, start in enumerate(snapshot.starts):
        if start.input_schema.get("type") != "object":
            raise RouterError(
                f"mcp-router.yml: starts[{index}].inputSchema must be an object schema "
                "(type: object): a tool's arguments are the run's input object"
            )


def load_snapshot(path: Path) -> RouterSnapshot:
    """Read and check a snapshot file (a missing file is an empty snapshot)."""
    if not path.exists():
        return RouterSnapshot()
    return parse_snapshot(path.read_text(encoding="utf-8"))


def render_snapshot(snapshot: RouterSnapshot) -> str:
    """The snapshot as YAML, stable for diffs (fields in declaration order)."""
    document = msgspec.to_builtins(snapshot)
    for section in ("tools", "starts"):
        document[section] = [
            {key: value for key, value in entry.items() if value is not None}
            for entry in document[section]
        ]
    if not document["starts"]:
        del document["starts"]  # a publisher-only snapshot stays as it always was
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def write_snapshot(path: Path, snapshot: RouterSnapshot) -> None:
    """Replace the file atomically, so a Gateway watching it never reads half a snapshot."""
    parse_snapshot(render_snapshot(snapshot))
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(render_snapshot(snapshot), encoding="utf-8")
    partial.replace(path)
