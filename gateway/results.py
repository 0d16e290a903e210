"""Tool results at the Gateway: Workflow's passed through, a workflow-backed Tool's rendered.

Seed 000 "Error envelopes": Workflow's isError results reach the client unchanged
(structuredContent and text). Seed 001 "MCP Result Envelope": on success structuredContent is
the workflow's output object, validated against the Tool's outputSchema, and the text block is
rendered per resultTextMode: compact-json is the output's compact JSON; summary is the output's
own `summary` string (a short fixed line naming the instance when the output has none).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
import msgspec

from gateway.router import RoutedTool
from runtime.canonical import PatternError, re2_validator
from runtime.errors import WorkflowError
from runtime.mcp import ToolOutcome

META_PREFIX = "io.lightapi.workflow/"
INSTANCE_KEY = f"{META_PREFIX}workflowInstanceId"
DIGEST_KEY = f"{META_PREFIX}definitionDigest"


@dataclass(frozen=True)
class GatewayOutcome(ToolOutcome):
    """A result with its own content blocks (Workflow's, kept as sent) and _meta."""

    content: tuple[dict[str, Any], ...] = ()
    meta: Mapping[str, Any] | None = None

    def to_call_result(self) -> dict[str, Any]:
        """The MCP CallToolResult body."""
        result = super().to_call_result()
        if self.content:
            result["content"] = [dict(block) for block in self.content]
        if self.meta:
            result["_meta"] = dict(self.meta)
        return result


def passed_through(result: Mapping[str, Any]) -> GatewayOutcome:
    """Workflow's CallToolResult as it was sent (its era-specific fields left behind)."""
    structured = result.get("structuredContent")
    blocks = result.get("content")
    content = (
        tuple(block for block in blocks if isinstance(block, dict))
        if isinstance(blocks, list)
        else ()
    )
    text = next((str(b.get("text", "")) for b in content if b.get("type") == "text"), "")
    return GatewayOutcome(
        structured if isinstance(structured, dict) else {},
        bool(result.get("isError")),
        text,
        content=content,
    )


def error_meta(structured: Mapping[str, Any]) -> dict[str, Any]:
    """The bounded _meta of a failed workflow-backed call: code, instance, state, retryable."""
    error = structured.get("error")
    error = error if isinstance(error, dict) else {}
    meta = {
        f"{META_PREFIX}errorCode": error.get("code"),
        f"{META_PREFIX}status": structured.get("status"),
        f"{META_PREFIX}retryable": error.get("retryable"),
        INSTANCE_KEY: structured.get("workflowInstanceId"),
    }
    return {key: value for key, value in meta.items() if value is not None}


def with_error_meta(outcome: ToolOutcome) -> ToolOutcome:
    """An isError outcome with error_meta added (its content and structure unchanged)."""
    if not outcome.is_error:
        return outcome
    content = outcome.content if isinstance(outcome, GatewayOutcome) else ()
    return GatewayOutcome(
        outcome.structured,
        True,
        outcome.text,
        content=content,
        meta=error_meta(outcome.structured),
    )


def rendered_success(tool: RoutedTool, structured: Mapping[str, Any]) -> GatewayOutcome:
    """The Tool result of workflow_invoke's completed answer, checked against the snapshot."""
    instance = structured.get("workflowInstanceId")
    instance_id = instance if isinstance(instance, str) else None
    digest = structured.get("definitionDigest")
    if digest != tool.definition_digest:
        # Seed 001: a different workflow digest than the published one fails closed.
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            f"Workflow ran definition {digest} but the Gateway snapshot pins "
            f"{tool.definition_digest} for {tool.name}: republish this Tool",
            status="failed",
            workflow_instance_id=instance_id,
        )
    output = structured.get("output")
    if structured.get("status") != "completed" or not isinstance(output, dict):
        raise _output_invalid(tool, "Workflow answered without an output object", instance_id)
    if tool.output_schema is not None:
        _check_output(tool, output, instance_id)
    meta = {INSTANCE_KEY: instance_id, DIGEST_KEY: digest}
    return GatewayOutcome(output, False, _text(tool, output, instance_id), meta=meta)


def _text(tool: RoutedTool, output: dict[str, Any], instance_id: str | None) -> str:
    if tool.result_text_mode == "summary":
        summary = output.get("summary")
        if isinstance(summary, str):
            return summary
        return f"{tool.name} completed (workflow instance {instance_id})"
    return msgspec.json.encode(output).decode()


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    # The service's schema machinery: the schema's own draft, patterns on RE2.
    return re2_validator(json.loads(schema_json))


def _check_output(tool: RoutedTool, output: dict[str, Any], instance_id: str | None) -> None:
    try:
        validator = _validator(json.dumps(tool.output_schema, sort_keys=True))
    except (PatternError, jsonschema.SchemaError):
        raise _output_invalid(tool, "the Tool's outputSchema cannot be used", instance_id) from None
    error = jsonschema.exceptions.best_match(validator.iter_errors(output))
    if error is not None:
        # Path and rule only: a message would echo output values.
        raise _output_invalid(
            tool,
            f"the workflow output does not match the Tool's outputSchema at {error.json_path} "
            f"(rule {error.validator})",
            instance_id,
        )


def _output_invalid(tool: RoutedTool, message: str, instance_id: str | None) -> WorkflowError:
    annotations = tool.annotations or {}
    read_only = annotations.get("readOnlyHint") is True or annotations.get("readOnly") is True
    # A completed run of a Tool that may write has had its effects: say so, do not invite a retry.
    return WorkflowError(
        "WORKFLOW_OUTPUT_INVALID" if read_only else "WORKFLOW_OUTPUT_INVALID_AFTER_EFFECT",
        message,
        status="failed",
        after_effect=not read_only,
        workflow_instance_id=instance_id,
    )
