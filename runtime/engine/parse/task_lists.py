"""Parse task lists and the common task fields; per-kind specs live in task_specs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runtime.engine.cel.value_trees import site_expression
from runtime.engine.model import (
    FLOW_DIRECTIVES,
    SwitchSpec,
    Task,
    TaskKind,
    TaskList,
    Transform,
    freeze,
)
from runtime.engine.parse.compensation import parse_compensation
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.durations import DurationError
from runtime.engine.parse.parse_context import (
    ParseContext,
    parse_schema,
    parse_transform,
    reject_unknown,
    require_mapping,
)
from runtime.engine.parse.task_specs import parse_spec

_TASK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_COMMON = {"if", "input", "output", "export", "timeout", "then", "metadata", "compensate"}
# Kind detection order matters: `for` and `try` tasks also carry `do`/`catch`.
_KIND_FIELDS: tuple[tuple[str, TaskKind | None, set[str]], ...] = (
    ("for", "for", {"for", "while", "do"}),
    ("try", "try", {"try", "catch"}),
    ("call", None, {"call", "with"}),
    ("fork", "fork", {"fork"}),
    ("set", "set", {"set"}),
    ("switch", "switch", {"switch"}),
    ("assert", "assert", {"assert"}),
    ("raise", "raise", {"raise"}),
    ("wait", "wait", {"wait"}),
    ("do", "do", {"do"}),
    ("ask", "ask", {"ask"}),
)
_REJECTED_KINDS = {
    "listen": "listen waits for outside events for an unbounded time",
    "emit": "emit is a fire-and-forget side effect outside effect tracking",
    "run": "run (container, script, shell, workflow) executes arbitrary code; call a "
    "sub-workflow through `call: mcp` to a workflow-backed Tool instead",
    "agent": "agent tasks have unknown duration and reach; they cannot be bounded at publication",
}


def parse_task_list(value: Any, pointer: str, qualifier: str, ctx: ParseContext) -> TaskList:
    """Parse an ordered list of one-key task maps; validates names and `then` targets.

    A problem in one task is recorded in ``ctx`` and the rest of the list is still checked.
    """
    if not isinstance(value, list) or not value:
        raise DefinitionError(f"{pointer} must be a non-empty task list", pointer=pointer)
    tasks: list[Task] = []
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or len(item) != 1:
            message = f"{pointer}/{index} must be a map with exactly one task name"
            ctx.errors.append(DefinitionError(message, pointer=f"{pointer}/{index}"))
            continue
        ((name, body),) = item.items()
        task_pointer = f"{pointer}/{index}/{name}"
        with ctx.collecting(task_pointer):
            _check_name(name, names, task_pointer)
        names.append(str(name))
        qualified = f"{qualifier}/{name}" if qualifier else str(name)
        with ctx.collecting(task_pointer):
            task = _parse_task(str(name), body, task_pointer, qualified, ctx)
            if task is not None:
                tasks.append(task)
    task_list = TaskList(tuple(tasks))
    _check_jumps(task_list, names, ctx)
    return task_list


def _check_name(name: Any, seen: list[str], pointer: str) -> None:
    if not isinstance(name, str) or not _TASK_NAME.match(name):
        raise DefinitionError("invalid task name", task=pointer)
    if name in FLOW_DIRECTIVES:
        raise DefinitionError(f"a task cannot be named {name!r}", task=pointer)
    if name in seen:
        raise DefinitionError(f"duplicate task name {name!r}", task=pointer)


def _check_jumps(task_list: TaskList, names: list[str], ctx: ParseContext) -> None:
    # `names` holds every declared name, also of tasks that failed to parse, so a jump to a
    # task with its own problem is not reported twice.
    for task in task_list.tasks:
        position = names.index(task.name)
        targets = [task.then]
        if isinstance(task.spec, SwitchSpec):
            targets.extend(case.then for case in task.spec.cases)
        for target in targets:
            if target in FLOW_DIRECTIVES:
                continue
            if target not in names:
                message = f"then target {target!r} is not a task in the same list"
                ctx.errors.append(DefinitionError(message, task=task.pointer, rule="flow"))
            elif names.index(target) <= position:
                message = f"then target {target!r} jumps backward: an unbounded loop"
                ctx.errors.append(DefinitionError(message, task=task.pointer, rule="flow"))


def _detect_kind(body: Mapping[str, Any], pointer: str) -> tuple[str, set[str]]:
    for key, reason in _REJECTED_KINDS.items():
        if key in body:
            raise DefinitionError(
                f"task kind `{key}` is not supported: {reason}",
                task=pointer,
                rule="unsupported-task-kind",
            )
    for key, _kind, fields in _KIND_FIELDS:
        if key in body:
            return key, fields
    written = ", ".join(sorted(map(str, set(body) - _COMMON))) or "none"
    kinds = ", ".join(key for key, _kind, _fields in _KIND_FIELDS)
    raise DefinitionError(
        f"unknown task kind (fields: {written}); a task is one of: {kinds}",
        task=pointer,
        rule="unsupported-task-kind",
    )


def _parse_task(
    name: str, body: Any, pointer: str, qualified: str, ctx: ParseContext
) -> Task | None:
    """One task, or None when it has problems (recorded in ``ctx``, or raised)."""
    node = require_mapping(body, "a task", pointer)
    key, fields = _detect_kind(node, pointer)
    recorded = len(ctx.errors)
    with ctx.collecting(pointer):
        reject_unknown(node, fields | _COMMON, f"a {key} task", pointer)
    common: dict[str, Any] = {}
    with ctx.collecting(pointer):
        common = _parse_common(node, pointer, ctx)
    kind, spec = parse_spec(key, node, pointer, qualified, ctx)
    if "compensate" in node:
        with ctx.collecting(pointer):
            common["compensate"] = parse_compensation(
                node["compensate"], spec, pointer, qualified, ctx
            )
    if len(ctx.errors) > recorded:
        return None
    if kind == "ask" and "timeout_ms" in common:
        # A parked run has no in-process scope to time; the answer's deadline is ask.timeout.
        ctx.errors.append(DefinitionError("an ask task's timeout is ask.timeout", task=pointer))
        return None
    return Task(
        name=name, pointer=pointer, qualified_name=qualified, kind=kind, spec=spec, **common
    )


def _parse_common(node: Any, pointer: str, ctx: ParseContext) -> dict[str, Any]:
    common: dict[str, Any] = {}
    if "if" in node:
        if not isinstance(node["if"], str):
            raise DefinitionError("`if` must be an expression string", task=pointer)
        common["if_"] = site_expression(node["if"])
    for field, key, names in (
        ("input", "from", ("input_from", "input_schema")),
        ("output", "as", ("output_as", "output_schema")),
        ("export", "as", ("export_as", "export_schema")),
    ):
        if field not in node:
            continue
        section = require_mapping(node[field], f"`{field}`", pointer)
        reject_unknown(section, {key, "schema"}, f"`{field}`", pointer)
        try:
            common[names[1]] = parse_schema(section, f"{pointer}/{field}")
        except DefinitionError as exc:
            raise DefinitionError(exc.message, task=pointer) from None
        if key in section:
            where = f"{pointer}/{field}/{key}"
            common[names[0]] = _transform(section, key, where, pointer, ctx)
    if "timeout" in node:
        try:
            common["timeout_ms"] = ctx.timeout_ms(node["timeout"])
        except DurationError as exc:
            raise DefinitionError(f"timeout: {exc}", task=pointer) from None
    if "then" in node:
        if not isinstance(node["then"], str):
            raise DefinitionError("`then` must be a string", task=pointer)
        common["then"] = node["then"]
    if "metadata" in node:
        common["metadata"] = freeze(require_mapping(node["metadata"], "metadata", pointer))
    return common


def _transform(section: Any, key: str, where: str, pointer: str, ctx: ParseContext) -> Transform:
    try:
        return parse_transform(section[key], where, ctx.warnings, section, key)
    except DefinitionError as exc:
        raise DefinitionError(exc.message, task=pointer) from None
