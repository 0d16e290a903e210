"""Build mcp-router.yml from the receipts (seed 000 "Publish ordering", step 3).

- a Tool whose binding receipt is active is (re)written with the receipt's bindingDigest and
  definitionDigest;
- a Tool whose publish is pending or failed keeps its previous entry, or stays out;
- every other Tool of the previous snapshot is kept as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.router import RoutedTool, RouterSnapshot
from publisher.spec import DEFAULT_RUNTIME_BOUNDS, Tool


@dataclass(frozen=True)
class ActiveReceipt:
    """The digests of an active binding receipt."""

    binding_digest: str
    definition_digest: str
    workflow_version: str


def _annotations(tool: Tool, binding: dict[str, Any]) -> dict[str, Any]:
    effects = binding["toolAnnotations"]
    hints: dict[str, Any] = {
        "readOnlyHint": bool(effects["readOnly"]),
        "destructiveHint": bool(effects["destructive"]),
    }
    if "idempotent" in effects:
        hints["idempotentHint"] = bool(effects["idempotent"])
    return hints


def routed_tool(tool: Tool, binding: dict[str, Any], receipt: ActiveReceipt) -> RoutedTool:
    """The Gateway entry of a Tool with an active receipt."""
    bounds = binding.get("runtimeBounds") or {}
    return RoutedTool(
        name=tool.name,
        stable_tool_ref=tool.tool_id,
        workflow_definition_id=tool.definition.wf_def_id,
        workflow_version=receipt.workflow_version,
        definition_digest=receipt.definition_digest,
        binding_digest=receipt.binding_digest,
        description=tool.spec.description,
        input_schema=tool.definition.input_schema,
        output_schema=tool.definition.output_schema,
        invocation_mode="sync",
        sync_wait_ms=int(binding["syncWaitMs"]),
        result_text_mode=binding["resultTextMode"],
        maximum_request_bytes=int(
            bounds.get("maximumRequestBytes", DEFAULT_RUNTIME_BOUNDS["maximumRequestBytes"])
        ),
        roles=tuple(tool.roles),
        annotations=_annotations(tool, binding),
    )


def merge(previous: RouterSnapshot, active: dict[str, RoutedTool]) -> RouterSnapshot:
    """The new snapshot: previous entries in their order, active ones replaced or appended.

    Tools without an active receipt are not in `active`, so their previous entry (if any)
    stays untouched and a new one never appears.
    """
    tools: list[RoutedTool] = []
    seen: set[str] = set()
    for entry in previous.tools:
        tools.append(active.get(entry.name, entry))
        seen.add(entry.name)
    tools.extend(entry for name, entry in active.items() if name not in seen)
    # The operator's task-started routes stay as they are.
    return RouterSnapshot(tools=tuple(tools), starts=previous.starts)
