"""generated/routes.py (the tool route table), generated/tools.py (the tool name type) and
generated/errors.py (the error code enum and Literal)."""

from __future__ import annotations

import re
from typing import Any

from codegen.catalog import BundledCatalog, ToolSpec, declared_error_schema
from codegen.contracts import ContractError
from codegen.render_models import input_model_name, output_model_name
from codegen.render_validators import validator_function_name

ERROR_RESULT_ID = "workflow_error_result"

ROUTE_CLASS = '''

@dataclass(frozen=True)
class ToolRoute:
    """Everything the transport needs to list, validate and dispatch one tool."""

    name: ToolName
    title: str
    description: str
    annotations: Mapping[str, Any]
    permission: str
    side_effect: str
    gateway_publication: bool
    identity_source: str
    publisher_token: bool
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    input_model: type[Struct]
    output_model: type[Struct]
    validate_input: Callable[[Any], Any]
    validate_output: Callable[[Any], Any]
    # What a task-augmented call of the tool completes with (taskResultTool), or None.
    task_result_schema: Mapping[str, Any] | None = None

    @property
    def declared_output_schema(self) -> dict[str, Any]:
        """The outputSchema tools/list declares: the success shape or the error envelope.

        The rule of codegen.catalog.declared_output_schema, which catalog.json shows.
        """
        branches = [dict(self.output_schema), dict(DECLARED_ERROR_RESULT_SCHEMA)]
        if self.task_result_schema is not None:
            branches.insert(1, dict(self.task_result_schema))
        return {"type": "object", "anyOf": branches}
'''


def input_validator_id(tool_name: str) -> str:
    """The schema id (and validator name stem) of a tool's input schema."""
    return f"{tool_name}_input"


def output_validator_id(tool_name: str) -> str:
    """The schema id (and validator name stem) of a tool's output schema."""
    return f"{tool_name}_output"


def sorted_deep(value: Any) -> Any:
    """A copy with every object's keys sorted, so rendered literals are stable."""
    if isinstance(value, dict):
        return {key: sorted_deep(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sorted_deep(item) for item in value]
    return value


def _literal(value: Any) -> str:
    return repr(sorted_deep(value))


def _route(tool: ToolSpec) -> str:
    entry = tool.entry
    fields = {
        "name": repr(tool.name),
        "title": repr(str(entry.get("title", ""))),
        "description": repr(str(entry.get("description", ""))),
        "annotations": _literal(entry.get("annotations", {})),
        "permission": repr(str(entry.get("permission", ""))),
        "side_effect": repr(str(entry.get("sideEffect", ""))),
        "gateway_publication": repr(bool(entry.get("gatewayPublication", False))),
        "identity_source": repr(str(entry.get("identitySource", ""))),
        "publisher_token": repr(bool(entry.get("publisherToken", False))),
        "input_schema": _literal(tool.input_schema),
        "output_schema": _literal(tool.output_schema),
        "input_model": f"models.{input_model_name(tool.name)}",
        "output_model": f"models.{output_model_name(tool.name)}",
        "validate_input": f"validators.{validator_function_name(input_validator_id(tool.name))}",
        "validate_output": f"validators.{validator_function_name(output_validator_id(tool.name))}",
    }
    if tool.task_result_schema is not None:
        fields["task_result_schema"] = _literal(tool.task_result_schema)
    arguments = "".join(f"        {key}={value},\n" for key, value in fields.items())
    return f"    {tool.name!r}: ToolRoute(\n{arguments}    ),\n"


def render_routes(catalog: BundledCatalog, header: str) -> str:
    """The route table module."""
    lines = [
        header,
        '"""The tool route table: one ToolRoute per catalog tool, in catalog order."""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Callable, Mapping",
        "from dataclasses import dataclass",
        "from typing import Any",
        "",
        "from msgspec import Struct",
        "",
        "from generated import models, validators",
        "from generated.tools import ToolName",
        ROUTE_CLASS,
        "",
        f"ERROR_RESULT_SCHEMA: Mapping[str, Any] = {_literal(catalog.error_result_schema)}",
        "# The envelope as outputSchemas declare it (codegen.catalog.declared_error_schema).",
        "DECLARED_ERROR_RESULT_SCHEMA: Mapping[str, Any] = "
        f"{_literal(declared_error_schema(catalog.error_result_schema))}",
        "ERROR_RESULT_MODEL: type[Struct] = models.WorkflowErrorResult",
        f"validate_error_result = validators.{validator_function_name(ERROR_RESULT_ID)}",
        "",
        "ROUTES: dict[ToolName, ToolRoute] = {",
    ]
    body = "".join(_route(tool) for tool in catalog.tools)
    return "\n".join(lines) + "\n" + body + "}\n"


def _literal_lines(name: str, values: list[str]) -> list[str]:
    """A `name = Literal[...]` alias of values, one per line."""
    return [f"{name} = Literal[", *(f"    {value!r}," for value in values), "]"]


def render_tool_names(catalog: BundledCatalog, header: str) -> str:
    """The tool name module: every catalog tool name as one Literal type, in catalog order."""
    names = [tool.name for tool in catalog.tools]
    lines = [
        header,
        '"""The catalog tool names: the Literal type ToolName and TOOL_NAMES, in order."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Final, Literal",
        "",
        *_literal_lines("ToolName", names),
        "",
        "TOOL_NAMES: Final[tuple[ToolName, ...]] = (",
        *(f"    {name!r}," for name in names),
        ")",
    ]
    return "\n".join(lines) + "\n"


def _member_name(code: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", code).upper()
    return name if name[:1].isalpha() else f"E_{name}"


def render_errors(errors: list[dict[str, Any]], header: str) -> str:
    """The error code enum module, in registry order."""
    members: list[tuple[str, dict[str, Any]]] = []
    for entry in errors:
        valid = isinstance(entry.get("code"), str) and isinstance(entry.get("retryable"), bool)
        if not valid or not isinstance(entry.get("meaning"), str):
            raise ContractError(f"errors.json: malformed entry {entry!r:.80}")
        members.append((_member_name(entry["code"]), entry))
    if len({name for name, _ in members}) != len(members):
        raise ContractError("errors.json: duplicate error codes")
    lines = [
        header,
        '"""The stable error registry (contracts errors.json) as an enum and a Literal type."""',
        "",
        "from __future__ import annotations",
        "",
        "from enum import StrEnum",
        "from typing import Literal",
        "",
        "# The codes as strings: what WorkflowError accepts beside an ErrorCode member.",
        *_literal_lines("ErrorCodeName", [str(entry["code"]) for _, entry in members]),
        "",
        "",
        "class ErrorCode(StrEnum):",
        '    """A stable workflow error code."""',
        "",
    ]
    lines += [f"    {name} = {str(entry['code'])!r}" for name, entry in members]
    lines += [
        "",
        "    @property",
        "    def retryable(self) -> bool:",
        '        """The registry\'s default retryable flag."""',
        "        return DEFAULT_RETRYABLE[self]",
        "",
        "    @property",
        "    def meaning(self) -> str:",
        '        """What the code means, from the registry."""',
        "        return MEANINGS[self]",
        "",
        "",
        "DEFAULT_RETRYABLE: dict[ErrorCode, bool] = {",
    ]
    lines += [f"    ErrorCode.{name}: {bool(entry['retryable'])!r}," for name, entry in members]
    lines += ["}", "", "MEANINGS: dict[ErrorCode, str] = {"]
    lines += [f"    ErrorCode.{name}: {str(entry['meaning'])!r}," for name, entry in members]
    lines.append("}")
    return "\n".join(lines) + "\n"
