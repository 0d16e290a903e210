"""The sync effect matrix, pinned-dependency checks and the static fit of a pinned version.

These rules read the pinned definition version, so their rejections carry no request
evidence (they depend on stored state, not only on the request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.binding_reach import dependency_for as dependency_for
from runtime.engine.analysis import WriteTask, fork_widths, static_requirements, write_tasks
from runtime.engine.errors import DefinitionError, ExpressionError
from runtime.engine.model import McpCallSpec, WorkflowDefinition, walk_tasks
from runtime.engine.parser import parse_definition
from runtime.publication.bindings.errors import BindingRuleViolation
from runtime.publication.bindings.fields import DIGEST_PATTERN, UNANNOTATED, Annotations, Binding
from runtime.publication.bindings.reach import Reach

# Task kinds a bounded, headless sync run may contain; the parser already refuses human,
# agent and runner tasks, and this list keeps the matrix closed if the profile grows.
SYNC_TASK_KINDS = frozenset(
    {"set", "switch", "assert", "http", "mcp", "fork", "for", "try", "raise", "wait", "do"}
)


@dataclass(frozen=True, slots=True)
class PinnedVersionFit:
    """What publication learns from the pinned version: the parsed definition, its write tasks."""

    definition: WorkflowDefinition
    write_tasks: tuple[WriteTask, ...]


def parse_pinned_definition(document: Any) -> WorkflowDefinition:
    """Parse the stored document of a pinned version; human/agent/runner tasks are refused."""
    try:
        return parse_definition(document)
    except (DefinitionError, ExpressionError) as error:
        raise BindingRuleViolation(
            f"the pinned definition cannot run as a sync Tool: {error.message}"
        ) from error


def _reached_annotations(definition: WorkflowDefinition, reach: Reach) -> dict[str, Annotations]:
    reached: dict[str, Annotations] = {}
    for task in walk_tasks(definition.tasks):
        if task.kind not in SYNC_TASK_KINDS:
            raise BindingRuleViolation(
                f"task {task.qualified_name} of kind {task.kind} cannot run in a sync Tool"
            )
        if not isinstance(task.spec, McpCallSpec):
            continue
        dependency = dependency_for(task.spec.tool, reach)
        if dependency is None:
            raise BindingRuleViolation(
                f"task {task.qualified_name} calls {task.spec.tool}, which is not a pinned "
                "dependency of this binding"
            )
        reached[task.spec.tool] = dependency.annotations or UNANNOTATED
    return reached


def _check_reached_tool(tool: str, reached: Annotations, outer: Annotations, name: str) -> None:
    if reached.destructive and not outer.destructive:
        raise BindingRuleViolation(
            f"Tool {name} is not destructive but reaches the destructive Tool {tool}"
        )
    if reached.human_approval_required and not outer.human_approval_required:
        raise BindingRuleViolation(
            f"Tool {name} does not require human approval but reaches {tool}, which does"
        )


def check_effect_matrix(
    definition: WorkflowDefinition, binding: Binding, reach: Reach
) -> tuple[WriteTask, ...]:
    """Check every task against the outer Tool's annotations; returns the write tasks.

    A read-only Tool may reach only reads. A write Tool needs approvalEvidenceDigest metadata on
    every write task. No Tool may reach a Tool whose annotations are stronger than its own.
    """
    outer = binding.annotations
    reached = _reached_annotations(definition, reach)
    for tool, reached_tool in sorted(reached.items()):
        _check_reached_tool(tool, reached_tool, outer, binding.tool_name)
    read_only_tools = {tool for tool, flags in reached.items() if flags.read_only}
    writes = tuple(write_tasks(definition, read_only_tools))
    for task in writes:
        if outer.read_only:
            raise BindingRuleViolation(
                f"read-only Tool {binding.tool_name} reaches the write task "
                f"{task.qualified_name} ({task.kind} {task.target})"
            )
        digest = task.approval_evidence_digest
        if digest is None or not DIGEST_PATTERN.match(digest):
            raise BindingRuleViolation(
                f"write task {task.qualified_name} needs approvalEvidenceDigest metadata "
                "(sha256:<64 hex digits>)"
            )
    return writes


def static_fit_problems(
    definition: WorkflowDefinition, bounds: Mapping[str, int], total_deadline_ms: int
) -> list[str]:
    """Why the version cannot fit the binding's limits; each message names the limit."""
    needs = static_requirements(definition, total_deadline_ms=total_deadline_ms)
    problems: list[str] = []
    if needs.max_fork_width > bounds["maximumParallelism"]:
        problems.append(
            f"fork width {needs.max_fork_width} exceeds runtimeBounds.maximumParallelism "
            f"{bounds['maximumParallelism']}"
        )
    if needs.nested_calls > bounds["maximumNestedCalls"]:
        problems.append(
            f"{needs.nested_calls} declared nested calls exceed runtimeBounds.maximumNestedCalls "
            f"{bounds['maximumNestedCalls']}"
        )
    if needs.max_task_attempts > bounds["maximumTaskAttempts"]:
        problems.append(
            f"{needs.max_task_attempts} worst-case dispatch attempts per run (calls times retry "
            f"attempts) exceed runtimeBounds.maximumTaskAttempts {bounds['maximumTaskAttempts']}"
        )
    worst_time = needs.worst_case_time_ms
    if worst_time is not None and worst_time > total_deadline_ms:
        problems.append(
            f"worst-case run time {worst_time} ms (declared timeouts, waits and retry delays) "
            f"exceeds totalDeadlineMs {total_deadline_ms}"
        )
    envelope_ms = needs.worst_retry_delay_ms + needs.total_wait_ms
    if envelope_ms > total_deadline_ms:
        problems.append(
            f"retry delays and waits of {envelope_ms} ms exceed totalDeadlineMs {total_deadline_ms}"
        )
    problems.extend(f"totalDeadlineMs {total_deadline_ms}: {v}" for v in needs.violations)
    return problems


def check_static_fit(definition: WorkflowDefinition, binding: Binding) -> None:
    """Reject a version that cannot fit the binding's runtime bounds and deadline."""
    problems = static_fit_problems(definition, binding.runtime_bounds, binding.total_deadline_ms)
    if problems:
        raise BindingRuleViolation(f"the pinned version does not fit the binding: {problems[0]}")


def check_service_parallelism(definition: WorkflowDefinition, ceiling: int | None) -> None:
    """Reject a fork wider than the service's execution.maximum_parallelism.

    Seed 001: fork width is governed by the service setting, whatever the binding allows. It
    is runtime configuration, not the request, so the rejection carries no evidence.
    """
    if ceiling is None:
        return
    for pointer, width in sorted(fork_widths(definition).items()):
        if width > ceiling:
            raise BindingRuleViolation(
                f"the pinned version does not fit the service: fork {pointer} has {width} "
                f"branches, over execution.maximum_parallelism {ceiling}"
            )


def check_pinned_version(
    document: Any, binding: Binding, reach: Reach, *, parallelism_ceiling: int | None = None
) -> PinnedVersionFit:
    """Parse the pinned version, run the effect matrix, the static fit and service ceilings."""
    definition = parse_pinned_definition(document)
    writes = check_effect_matrix(definition, binding, reach)
    check_static_fit(definition, binding)
    check_service_parallelism(definition, parallelism_ceiling)
    return PinnedVersionFit(definition=definition, write_tasks=writes)
