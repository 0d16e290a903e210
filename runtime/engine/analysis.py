"""Static analysis helpers for binding publication: write tasks, widths, calls, retry envelope."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime.engine.model import (
    ForkSpec,
    ForSpec,
    HttpCallSpec,
    McpCallSpec,
    Task,
    TaskList,
    TrySpec,
    WaitSpec,
    WorkflowDefinition,
    walk_tasks,
)

DEFAULT_ITERATION_CAP: Final = 100
_SIMPLE_PATH = re.compile(r"^(?:\.|input\.)?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")


@dataclass(frozen=True)
class WriteTask:
    """A task that may change data outside the run, keyed for task evidence and carry-over."""

    qualified_name: str
    pointer: str
    kind: str
    target: str  # the HTTP method or the MCP tool name
    approval_evidence_digest: str | None


@dataclass(frozen=True)
class RetryEnvelope:
    """Worst case of one retrying try task: attempts (first + retries) and total delay."""

    pointer: str
    attempts: int | None
    worst_delay_ms: int


@dataclass(frozen=True)
class StaticRequirements:
    """What a definition needs from a binding's runtime bounds, computed without running it."""

    max_fork_width: int
    nested_calls: int
    max_task_attempts: int
    worst_retry_delay_ms: int
    total_wait_ms: int
    max_timeout_ms: int
    write_tasks: tuple[WriteTask, ...]
    violations: tuple[str, ...]


def write_tasks(
    definition: WorkflowDefinition, read_only_tools: Collection[str] = ()
) -> list[WriteTask]:
    """Non-GET/HEAD HTTP calls and MCP calls to tools not known to be read-only.

    A call cannot declare itself read-only: the caller passes the tool names its pinned
    dependencies mark readOnly.
    """
    found: list[WriteTask] = []
    for task in walk_tasks(definition.tasks):
        spec = task.spec
        if isinstance(spec, HttpCallSpec) and spec.is_write:
            found.append(_write_task(task, spec.method))
        elif isinstance(spec, McpCallSpec) and spec.tool not in read_only_tools:
            found.append(_write_task(task, spec.tool))
    return found


def _write_task(task: Task, target: str) -> WriteTask:
    digest = task.metadata.get("approvalEvidenceDigest") if task.metadata else None
    return WriteTask(
        qualified_name=task.qualified_name,
        pointer=task.pointer,
        kind=task.kind,
        target=target,
        approval_evidence_digest=digest if isinstance(digest, str) else None,
    )


def fork_widths(definition: WorkflowDefinition) -> dict[str, int]:
    """Branch count of every fork task, by task pointer."""
    return {
        task.pointer: len(task.spec.branches.tasks)
        for task in walk_tasks(definition.tasks)
        if isinstance(task.spec, ForkSpec)
    }


def loop_bound(
    definition: WorkflowDefinition, spec: ForSpec, iteration_cap: int = DEFAULT_ITERATION_CAP
) -> int:
    """Static iteration bound: the input schema's maxItems for a plain path, else the cap."""
    match = _SIMPLE_PATH.match(spec.collection.strip())
    schema = definition.input_schema.document if definition.input_schema else None
    if match is None or not isinstance(schema, Mapping):
        return iteration_cap
    node: Any = schema
    for part in match.group(1).split("."):
        properties = node.get("properties") if isinstance(node, Mapping) else None
        if not isinstance(properties, Mapping) or part not in properties:
            return iteration_cap
        node = properties[part]
    max_items = node.get("maxItems") if isinstance(node, Mapping) else None
    if isinstance(max_items, int) and not isinstance(max_items, bool):
        return min(max_items, iteration_cap)
    return iteration_cap


def declared_nested_calls(
    definition: WorkflowDefinition, iteration_cap: int = DEFAULT_ITERATION_CAP
) -> int:
    """Worst-case MCP calls of one run: loops multiply by their bound, retries by attempts."""
    return _count_calls(definition, definition.tasks, iteration_cap)


def _count_calls(definition: WorkflowDefinition, tasks: TaskList, cap: int) -> int:
    total = 0
    for task in tasks.tasks:
        spec = task.spec
        if isinstance(spec, McpCallSpec):
            total += 1
        elif isinstance(spec, ForSpec):
            total += loop_bound(definition, spec, cap) * _count_calls(definition, spec.body, cap)
        elif isinstance(spec, TrySpec):
            retry = spec.catch.retry
            attempts = 1 if retry is None else (retry.attempt_count or 0) + 1
            total += attempts * _count_calls(definition, spec.body, cap)
            if spec.catch.body is not None:
                total += _count_calls(definition, spec.catch.body, cap)
        else:
            total += sum(_count_calls(definition, child, cap) for child in task.children())
    return total


def retry_envelope(definition: WorkflowDefinition) -> dict[str, RetryEnvelope]:
    """Worst-case attempts and retry delay of every try task that retries, by pointer."""
    envelopes: dict[str, RetryEnvelope] = {}
    for task in walk_tasks(definition.tasks):
        if not isinstance(task.spec, TrySpec) or task.spec.catch.retry is None:
            continue
        retry = task.spec.catch.retry
        if retry.attempt_count is None:
            envelopes[task.pointer] = RetryEnvelope(task.pointer, None, 0)
            continue
        delay = sum(
            retry.delay_before_retry_ms(n) + retry.jitter_to_ms
            for n in range(1, retry.attempt_count + 1)
        )
        if retry.limit_duration_ms is not None:
            delay = min(delay, retry.limit_duration_ms)
        envelopes[task.pointer] = RetryEnvelope(task.pointer, retry.attempt_count + 1, delay)
    return envelopes


def total_wait_ms(definition: WorkflowDefinition) -> int:
    """Sum of every literal wait (loops not multiplied: a wait in a loop is a violation)."""
    return sum(
        task.spec.duration_ms
        for task in walk_tasks(definition.tasks)
        if isinstance(task.spec, WaitSpec)
    )


def interactive_violations(
    definition: WorkflowDefinition, total_deadline_ms: int | None = None
) -> list[str]:
    """Reasons the definition cannot run as a sync interactive tool (empty when it can)."""
    violations: list[str] = []
    if definition.schedule is not None:
        violations.append("schedule: a scheduled workflow is not a headless interactive run")
    for pointer, envelope in retry_envelope(definition).items():
        if envelope.attempts is None:
            violations.append(f"{pointer}: retry without limit.attempt.count is unbounded")
    for task in walk_tasks(definition.tasks):
        if isinstance(task.spec, ForSpec) and any(
            isinstance(inner.spec, WaitSpec) for inner in walk_tasks(task.spec.body)
        ):
            violations.append(f"{task.pointer}: a wait inside a loop multiplies past the deadline")
    if total_deadline_ms is not None:
        waits = total_wait_ms(definition)
        if waits > total_deadline_ms:
            violations.append(f"waits total {waits} ms, beyond the {total_deadline_ms} ms deadline")
        delays = sum(e.worst_delay_ms for e in retry_envelope(definition).values())
        if delays > total_deadline_ms:
            violations.append(f"worst-case retry delays {delays} ms exceed the deadline")
    return violations


def static_requirements(
    definition: WorkflowDefinition,
    *,
    read_only_tools: Collection[str] = (),
    iteration_cap: int = DEFAULT_ITERATION_CAP,
    total_deadline_ms: int | None = None,
) -> StaticRequirements:
    """One summary for the static fit check against a binding's runtime bounds."""
    envelopes = retry_envelope(definition).values()
    timeouts = [t.timeout_ms for t in walk_tasks(definition.tasks) if t.timeout_ms is not None]
    if definition.timeout_ms is not None:
        timeouts.append(definition.timeout_ms)
    return StaticRequirements(
        max_fork_width=max(fork_widths(definition).values(), default=0),
        nested_calls=declared_nested_calls(definition, iteration_cap),
        max_task_attempts=max((e.attempts or 0 for e in envelopes), default=1),
        worst_retry_delay_ms=sum(e.worst_delay_ms for e in envelopes),
        total_wait_ms=total_wait_ms(definition),
        max_timeout_ms=max(timeouts, default=0),
        write_tasks=tuple(write_tasks(definition, read_only_tools)),
        violations=tuple(interactive_violations(definition, total_deadline_ms)),
    )
