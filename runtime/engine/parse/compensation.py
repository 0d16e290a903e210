"""`compensate:` of a write task: a task or a `do:` list the runtime runs to undo its effect.

Allowed only on a task that writes (`call: http` other than GET/HEAD, or `call: mcp`, whose
Tool may write; a read-only Tool's call is never ledgered, so its compensation never runs).
The body is a plain sequence: no `ask` (nobody waits on a failed run), no `wait`, `fork` or
`for` (a compensation is short, ordered and bounded), no nested `compensate`.
"""

from __future__ import annotations

from typing import Any

from runtime.engine.model import (
    Compensation,
    HttpCallSpec,
    McpCallSpec,
    TaskList,
    TaskSpec,
    walk_tasks,
)
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.parse_context import ParseContext, reject_unknown, require_mapping
from runtime.engine.parse.task_specs import parse_retry

RULE = "compensation"
_OWN_FIELDS = {"when", "retry"}
_REFUSED_KINDS = {
    "ask": "nobody answers a question while a failed run is being compensated",
    "wait": "a compensation runs at once, it does not wait",
    "fork": "compensations run one after the other, in reverse order of the effects",
    "for": "a compensation is a bounded sequence of tasks",
}


def parse_compensation(
    value: Any, spec: TaskSpec, pointer: str, qualified: str, ctx: ParseContext
) -> Compensation:
    """Parse `compensate:` of the task at pointer whose own spec is spec."""
    where = f"{pointer}/compensate"
    if not _writes(spec):
        raise DefinitionError(
            "`compensate` belongs on a task that writes (call: http other than GET/HEAD, or "
            "call: mcp)",
            task=pointer,
            rule=RULE,
        )
    node = require_mapping(value, "`compensate`", pointer)
    when = node.get("when", "confirmed")
    if when not in ("confirmed", "possible"):
        raise DefinitionError("compensate.when is confirmed or possible", task=pointer, rule=RULE)
    retry = parse_retry(node["retry"], where, ctx) if "retry" in node else None
    if "do" in node:
        reject_unknown(node, _OWN_FIELDS | {"do"}, "`compensate`", pointer)
        body = ctx.task_list(node["do"], f"{where}/do", f"{qualified}/compensate")
    else:
        # One task: its fields beside when/retry, named `compensate`.
        task = {key: item for key, item in node.items() if key not in _OWN_FIELDS}
        if not task:
            raise DefinitionError("`compensate` needs a task or a do list", task=pointer, rule=RULE)
        body = ctx.task_list([{"compensate": task}], where, qualified)
    _check_body(body)
    return Compensation(body=body, when=when, retry=retry)


def _writes(spec: TaskSpec) -> bool:
    if isinstance(spec, HttpCallSpec):
        return spec.is_write
    return isinstance(spec, McpCallSpec)


def _check_body(body: TaskList) -> None:
    for task in walk_tasks(body):
        reason = _REFUSED_KINDS.get(task.kind)
        if reason is not None:
            raise DefinitionError(
                f"a {task.kind} task cannot run inside `compensate`: {reason}",
                task=task.pointer,
                rule=RULE,
            )
        if task.compensate is not None:
            raise DefinitionError(
                "a task inside `compensate` cannot have its own `compensate`",
                task=task.pointer,
                rule=RULE,
            )
