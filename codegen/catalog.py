"""The bundled tool catalog: every tool with self-contained input and output schemas."""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from codegen.bundle import Bundler
from codegen.contracts import SCHEMAS_FILE, TOOLS_FILE, ContractError, ContractSet

ERROR_RESULT_DEF = "WorkflowErrorResult"
ERROR_RESULT_REF = f"{SCHEMAS_FILE}#/$defs/{ERROR_RESULT_DEF}"


@dataclass(frozen=True)
class ToolSpec:
    """One tool of the catalog, with its bundled schemas."""

    index: int
    entry: dict[str, Any]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    # The output of the tool named by taskResultTool: what a task-augmented call completes with.
    task_result_schema: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        """The tool name."""
        return str(self.entry["name"])

    def served(self, error_result_schema: dict[str, Any]) -> dict[str, Any]:
        """The tool entry as served: every metadata key, schemas bundled, the declared output."""
        served = dict(self.entry)
        served["inputSchema"] = self.input_schema
        served["outputSchema"] = declared_output_schema(
            self.output_schema, declared_error_schema(error_result_schema), self.task_result_schema
        )
        return served


def declared_output_schema(
    success_schema: dict[str, Any],
    error_result_schema: dict[str, Any],
    task_result_schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The outputSchema a tool declares: its success shape or the error envelope.

    An isError result carries seed 000's error envelope as structuredContent, and MCP requires
    structuredContent to conform to the declared outputSchema (clients check it on errors too),
    so the contract's success shape alone would make every refusal look malformed. The rule is
    applied here, to every tool alike: a tool's contract entry declares its success shape only.

    A tool a client may call as an MCP task (its entry names a taskResultTool) completes that
    task with the named tool's result (workflow_start's task ends with workflow_get_result's
    document), which the declared schema admits as well.
    """
    branches = [success_schema, error_result_schema]
    if task_result_schema is not None:
        branches.insert(1, task_result_schema)
    return {"type": "object", "anyOf": branches}


def declared_error_schema(error_result_schema: dict[str, Any]) -> dict[str, Any]:
    """The error envelope as every tool declares it: error.details left an open object.

    The contract's envelope spells out each code's details (compensation, the request-validation
    evidence shapes); repeated in all outputSchemas it was half of tools/list's bytes, which every
    client downloads and parses. A client validating structuredContent needs only the envelope's
    frame: status, the error's code, message and flags, and details as an object (its members'
    descriptions are the contract's too). The full shape stays in the contract, the generated
    models and validators, which check every answer we send.
    """
    declared = copy.deepcopy(error_result_schema)
    error = declared["properties"]["error"]
    error["properties"]["details"] = {"type": "object", "additionalProperties": True}
    for member in (*declared["properties"].values(), *error["properties"].values()):
        member.pop("description", None)
    return declared


@dataclass(frozen=True)
class BundledCatalog:
    """All tools in catalog order and the bundled WorkflowErrorResult schema."""

    tools: list[ToolSpec]
    error_result_schema: dict[str, Any]


def pascal_case(name: str) -> str:
    """PascalCase of a snake_case or camelCase name."""
    parts = re.split(r"[^0-9A-Za-z]+", name)
    return "".join(part[:1].upper() + part[1:] for part in parts if part)


def bundle_catalog(contracts: ContractSet) -> BundledCatalog:
    """Bundle every tool's input and output schema, and the error result schema."""
    bundler = Bundler(contracts.documents)
    tools: list[ToolSpec] = []
    for index, entry in enumerate(contracts.tools):
        name = entry.get("name")
        if not isinstance(name, str):
            raise ContractError(f"tool #{index} has no string name")
        for key in ("inputSchema", "outputSchema"):
            if not isinstance(entry.get(key), dict):
                raise ContractError(f"{name}: {key} must be a schema object")
        tools.append(
            ToolSpec(
                index=index,
                entry=entry,
                input_schema=bundler.bundle(entry["inputSchema"], TOOLS_FILE),
                output_schema=bundler.bundle(entry["outputSchema"], TOOLS_FILE),
            )
        )
    error_result = bundler.bundle({"$ref": ERROR_RESULT_REF}, TOOLS_FILE)
    if not isinstance(error_result, dict):
        raise ContractError(f"{ERROR_RESULT_REF} must be a schema object")
    return BundledCatalog(tools=_with_task_results(tools), error_result_schema=error_result)


def _with_task_results(tools: list[ToolSpec]) -> list[ToolSpec]:
    """Each tool naming a taskResultTool, given that tool's output schema."""
    outputs = {tool.name: tool.output_schema for tool in tools}
    resolved = []
    for tool in tools:
        target = tool.entry.get("taskResultTool")
        if target is not None:
            if target not in outputs or target == tool.name:
                raise ContractError(f"{tool.name}: taskResultTool must name another tool")
            tool = dataclasses.replace(tool, task_result_schema=outputs[target])
        resolved.append(tool)
    return resolved
