"""Parse an `ask` task (a human task): prompt, mode, assignment, options, timeout, onTimeout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from runtime.engine.cel.value_trees import expression_text
from runtime.engine.model import AskOption, AskSpec, freeze
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.durations import DurationError, parse_duration_ms
from runtime.engine.parse.light_workflow_hints import ask_mode_hint
from runtime.engine.parse.parse_context import reject_unknown, require_mapping

_FIELDS = {"prompt", "mode", "assignment", "options", "required", "timeout", "onTimeout"}
ASSIGNEE_KEYS = ("roleId", "userId", "positionId")
_ASSIGNMENT_KEYS = {*ASSIGNEE_KEYS, "categoryCode", "reasonCode"}
_MAX_TEXT = 4096
_MAX_NAME = 128
_MAX_OPTIONS = 50


def parse_ask(value: Any, pointer: str) -> AskSpec:
    """The `ask` body (where it may stand is ask_placement's check)."""
    node = require_mapping(value, "`ask`", pointer)
    reject_unknown(node, _FIELDS, "`ask`", pointer)
    prompt = node.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > _MAX_TEXT:
        raise DefinitionError(
            f"ask.prompt must be a non-empty string (<= {_MAX_TEXT})", task=pointer
        )
    options = _options(node.get("options", []), pointer)
    mode = _mode(node.get("mode", "approval" if options else "input"), options, pointer)
    required = node.get("required", True)
    if not isinstance(required, bool):
        raise DefinitionError("ask.required must be a boolean", task=pointer)
    timeout_ms = _timeout(node.get("timeout"), pointer)
    action, default = _on_timeout(node.get("onTimeout"), timeout_ms, options, pointer)
    return AskSpec(
        prompt=prompt,
        mode=mode,
        assignment=freeze(_assignment(node.get("assignment"), pointer)),
        options=options,
        required=required,
        timeout_ms=timeout_ms,
        on_timeout=action,
        default=freeze(default),
    )


def _mode(value: Any, options: tuple[AskOption, ...], pointer: str) -> Literal["approval", "input"]:
    if value == "approval":
        if not options:
            raise DefinitionError("an approval ask needs options", task=pointer)
        return "approval"
    if value == "input":
        return "input"
    raise DefinitionError(f"ask.mode must be approval or input{ask_mode_hint(value)}", task=pointer)


def _assignment(value: Any, pointer: str) -> dict[str, str]:
    node = require_mapping(value, "ask.assignment", pointer)
    reject_unknown(node, _ASSIGNMENT_KEYS, "ask.assignment", pointer)
    for key, text in node.items():
        if isinstance(text, str) and expression_text(text) is not None and len(text) <= _MAX_TEXT:
            continue  # computed when the task opens (runtime.engine.run.human)
        if not isinstance(text, str) or not text or len(text) > _MAX_NAME or "${" in text:
            raise DefinitionError(
                f"ask.assignment.{key} must be a literal non-empty string (<= {_MAX_NAME}) "
                "or one `${ }` expression",
                task=pointer,
            )
    if not any(key in node for key in ASSIGNEE_KEYS):
        raise DefinitionError(
            "ask.assignment names nobody: give roleId, userId or positionId", task=pointer
        )
    return dict(node)


def _options(value: Any, pointer: str) -> tuple[AskOption, ...]:
    if not isinstance(value, list) or len(value) > _MAX_OPTIONS:
        raise DefinitionError(f"ask.options must be a list of <= {_MAX_OPTIONS}", task=pointer)
    options: list[AskOption] = []
    for index, item in enumerate(value):
        where = f"ask.options[{index}]"
        node = require_mapping(item, where, pointer)
        reject_unknown(node, {"label", "value", "description"}, where, pointer)
        label, description = node.get("label"), node.get("description")
        if not isinstance(label, str) or not label or len(label) > _MAX_NAME:
            raise DefinitionError(f"{where}.label must be a non-empty string", task=pointer)
        if description is not None and (
            not isinstance(description, str) or len(description) > _MAX_TEXT
        ):
            raise DefinitionError(f"{where}.description must be a string", task=pointer)
        option_value = node.get("value")
        if not isinstance(option_value, str) or not option_value or len(option_value) > _MAX_NAME:
            # Strings only: the inbox's answer is a string, compared with the options' values.
            raise DefinitionError(f"{where}.value must be a non-empty string", task=pointer)
        if any(option.value == option_value for option in options):
            raise DefinitionError(f"{where}.value {option_value!r} is not unique", task=pointer)
        options.append(AskOption(label, option_value, description))
    return tuple(options)


def _timeout(value: Any, pointer: str) -> int | None:
    if value is None:
        return None
    node = require_mapping(value, "ask.timeout", pointer)
    if set(node) != {"after"}:
        raise DefinitionError("ask.timeout is {after: duration}", task=pointer)
    try:
        milliseconds = parse_duration_ms(node["after"])
    except DurationError as exc:
        raise DefinitionError(f"ask.timeout: {exc}", task=pointer) from None
    if milliseconds <= 0:
        raise DefinitionError("ask.timeout.after must be positive", task=pointer)
    return milliseconds


def _on_timeout(
    value: Any, timeout_ms: int | None, options: tuple[AskOption, ...], pointer: str
) -> tuple[Literal["default", "fail"], Any]:
    if value is None:
        return "fail", None
    if timeout_ms is None:
        raise DefinitionError("ask.onTimeout needs ask.timeout", task=pointer)
    node: Mapping[str, Any] = require_mapping(value, "ask.onTimeout", pointer)
    action = node.get("action")
    if action == "fail":
        reject_unknown(node, {"action"}, "ask.onTimeout", pointer)
        return "fail", None
    if action != "default":
        raise DefinitionError("ask.onTimeout.action must be default or fail", task=pointer)
    reject_unknown(node, {"action", "default"}, "ask.onTimeout", pointer)
    if "default" not in node:
        raise DefinitionError("ask.onTimeout with action default needs a default", task=pointer)
    default = node["default"]
    if options and all(option.value != default for option in options):
        raise DefinitionError(
            "ask.onTimeout.default must be one of the options' values", task=pointer
        )
    return "default", default
