"""Static analysis helpers for binding publication: write tasks, widths, calls, retry envelope."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime.engine.model import (
    AskSpec,
    ForkSpec,
    ForSpec,
    HttpCallSpec,
    McpCallSpec,
    RetryPolicy,
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
    # Worst-case dispatches of one run: maximumTaskAttempts is a per-run budget of dispatch
    # attempts (every HTTP/MCP dispatch, retries included, reserves one).
    max_task_attempts: int
    worst_retry_delay_ms: int
    total_wait_ms: int
    max_timeout_ms: int
    worst_case_time_ms: int | None  # None when some dispatch has no declared timeout
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


@dataclass(frozen=True)
class HttpCall:
    """One `call: http` task: the method and endpoint a binding's endpoint target must allow."""

    qualified_name: str
    pointer: str
    method: str
    endpoint: str  # a literal URI or a path-only URI template ({name} segments)
    is_write: bool


@dataclass(frozen=True)
class McpCall:
    """One `call: mcp` task: the tool a binding's dependencies must pin."""

    qualified_name: str
    pointer: str
    tool: str
    endpoint: str


def http_calls(definition: WorkflowDefinition) -> list[HttpCall]:
    """Every HTTP call of the definition, in document order."""
    return [
        HttpCall(task.qualified_name, task.pointer, spec.method, spec.endpoint, spec.is_write)
        for task in walk_tasks(definition.tasks)
        if isinstance(spec := task.spec, HttpCallSpec)
    ]


def mcp_calls(definition: WorkflowDefinition) -> list[McpCall]:
    """Every MCP tools/call of the definition, in document order."""
    return [
        McpCall(task.qualified_name, task.pointer, spec.tool, spec.endpoint)
        for task in walk_tasks(definition.tasks)
        if isinstance(spec := task.spec, McpCallSpec)
    ]


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


def _attempts(retry: RetryPolicy | None) -> int:
    return 1 if retry is None else (retry.attempt_count or 0) + 1


def worst_case_dispatches(
    definition: WorkflowDefinition, iteration_cap: int = DEFAULT_ITERATION_CAP
) -> int:
    """Worst-case HTTP and MCP dispatches of one run: every call times the attempts of each
    enclosing retrying try, times loop bounds; every fork branch counts."""
    return _count_dispatches(definition, definition.tasks, iteration_cap)


def _count_dispatches(definition: WorkflowDefinition, tasks: TaskList, cap: int) -> int:
    total = 0
    for task in tasks.tasks:
        spec = task.spec
        if isinstance(spec, HttpCallSpec | McpCallSpec):
            total += 1
        elif isinstance(spec, ForSpec):
            total += loop_bound(definition, spec, cap) * _count_dispatches(
                definition, spec.body, cap
            )
        elif isinstance(spec, TrySpec):
            total += _attempts(spec.catch.retry) * _count_dispatches(definition, spec.body, cap)
            if spec.catch.body is not None:
                total += _count_dispatches(definition, spec.catch.body, cap)
        else:
            total += sum(_count_dispatches(definition, child, cap) for child in task.children())
    return total


def worst_case_time_ms(
    definition: WorkflowDefinition, iteration_cap: int = DEFAULT_ITERATION_CAP
) -> int | None:
    """Worst-case run time from declared timeouts, waits and retry delays along the worst path
    (fork branches run side by side); None when a dispatch has no declared timeout."""
    total = _list_time(definition, definition.tasks, iteration_cap)
    if definition.timeout_ms is not None:
        return definition.timeout_ms if total is None else min(total, definition.timeout_ms)
    return total


def _list_time(definition: WorkflowDefinition, tasks: TaskList, cap: int) -> int | None:
    total = 0
    for task in tasks.tasks:
        own = _task_time(definition, task, cap)
        if task.timeout_ms is not None:
            own = task.timeout_ms if own is None else min(own, task.timeout_ms)
        if own is None:
            return None
        total += own
    return total


def _task_time(definition: WorkflowDefinition, task: Task, cap: int) -> int | None:
    spec = task.spec
    if isinstance(spec, HttpCallSpec | McpCallSpec):
        return None  # bounded only by a declared timeout on it or around it
    if isinstance(spec, WaitSpec):
        return spec.duration_ms
    if isinstance(spec, AskSpec):
        return spec.timeout_ms  # a person's answer: the worst case is its timeout, or none
    if isinstance(spec, ForSpec):
        body = _list_time(definition, spec.body, cap)
        return None if body is None else loop_bound(definition, spec, cap) * body
    if isinstance(spec, ForkSpec):
        branches = [_task_time_bounded(definition, branch, cap) for branch in spec.branches.tasks]
        return None if None in branches else max((b or 0 for b in branches), default=0)
    if isinstance(spec, TrySpec):
        return _try_time(definition, spec, cap)
    times = [_list_time(definition, child, cap) for child in task.children()]
    return None if None in times else sum(t or 0 for t in times)


def _task_time_bounded(definition: WorkflowDefinition, task: Task, cap: int) -> int | None:
    own = _task_time(definition, task, cap)
    if task.timeout_ms is not None:
        return task.timeout_ms if own is None else min(own, task.timeout_ms)
    return own


def _try_time(definition: WorkflowDefinition, spec: TrySpec, cap: int) -> int | None:
    attempt = _list_time(definition, spec.body, cap)
    retry = spec.catch.retry
    if retry is not None and retry.attempt_duration_ms is not None:
        attempt = (
            retry.attempt_duration_ms
            if attempt is None
            else min(attempt, retry.attempt_duration_ms)
        )
    catch = 0 if spec.catch.body is None else _list_time(definition, spec.catch.body, cap)
    if attempt is None or catch is None:
        return None
    if retry is None:
        return attempt + catch
    if retry.attempt_count is None:
        return None
    delays = sum(
        retry.delay_before_retry_ms(n) + retry.jitter_to_ms
        for n in range(1, retry.attempt_count + 1)
    )
    retrying = (retry.attempt_count + 1) * attempt + delays
    if retry.limit_duration_ms is not None:
        retrying = min(retrying, retry.limit_duration_ms + attempt)
    return retrying + catch


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
        max_task_attempts=worst_case_dispatches(definition, iteration_cap),
        worst_retry_delay_ms=sum(e.worst_delay_ms for e in envelopes),
        total_wait_ms=total_wait_ms(definition),
        max_timeout_ms=max(timeouts, default=0),
        worst_case_time_ms=worst_case_time_ms(definition, iteration_cap),
        write_tasks=tuple(write_tasks(definition, read_only_tools)),
        violations=tuple(interactive_violations(definition, total_deadline_ms)),
    )
