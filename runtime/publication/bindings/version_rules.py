"""The rules that read a binding's pinned definition version.

The sync task kinds, the effect matrix and pinned dependencies, the static fit against the
binding's bounds and deadline, the service's parallelism ceiling, and the data-flow checker.
These rules read stored state (the version), not only the request, so their rejections carry
no request evidence.

The data-flow checker runs again on the pinned version because versions published before it
existed were never checked; a proved bug's pointer is the task in the definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generated.models import PublicationWarning, RuntimeBounds, ToolBinding
from runtime.binding_reach import UNANNOTATED, Annotations, Reach, annotations_of, dependency_for
from runtime.engine import DefinitionError, ExpressionError, parse_definition
from runtime.engine.check import (
    MAX_WARNINGS,
    WriteTask,
    data_flow_report,
    fork_widths,
    static_requirements,
    warning_entry,
    write_tasks,
)
from runtime.engine.check.service_identity import service_identity_problems
from runtime.engine.check.stage_marker import STAGE_MARKER, STAGE_POINTER, stage_of
from runtime.engine.model import McpCallSpec, WorkflowDefinition, walk_tasks
from runtime.publication.bindings.binding_problems import BindingProblem
from runtime.publication.bindings.field_rules import DIGEST_PATTERN

# Task kinds a bounded, headless sync run may contain; the parser already refuses human,
# agent and runner tasks, and this list keeps the matrix closed if the profile grows.
SYNC_TASK_KINDS = frozenset(
    {"set", "switch", "assert", "http", "mcp", "fork", "for", "try", "raise", "wait", "do"}
)


def pinned_definition_problems(
    document: Any,
) -> tuple[WorkflowDefinition | None, list[BindingProblem]]:
    """Parse the stored document of a pinned version; every reason it cannot run as a sync Tool."""
    try:
        return parse_definition(document), []
    except DefinitionError as error:
        reasons = [(p.pointer, p.message) for p in error.problems]
    except ExpressionError as error:
        reasons = [("", error.message)]
    return None, [
        BindingProblem(
            pointer,
            "pinned-definition",
            f"the pinned definition cannot run as a sync Tool: {message}",
        )
        for pointer, message in reasons
    ]


def _reached_annotations(
    definition: WorkflowDefinition, reach: Reach, found: list[BindingProblem]
) -> dict[str, Annotations]:
    reached: dict[str, Annotations] = {}
    for task in walk_tasks(definition.tasks):
        if task.kind not in SYNC_TASK_KINDS:
            message = f"task {task.qualified_name} of kind {task.kind} cannot run in a sync Tool"
            found.append(BindingProblem(task.pointer, "unsupported-task-kind", message))
        if not isinstance(task.spec, McpCallSpec):
            continue
        dependency = dependency_for(task.spec.tool, reach)
        if dependency is None:
            message = (
                f"task {task.qualified_name} calls {task.spec.tool}, which is not a pinned "
                "dependency of this binding"
            )
            found.append(BindingProblem("/dependencies", "undeclared-dependency", message))
            continue
        reached[task.spec.tool] = dependency.annotations or UNANNOTATED
    return reached


def _reached_tool_problems(
    tool: str, reached: Annotations, outer: Annotations, name: str
) -> list[BindingProblem]:
    found = []
    if reached.destructive and not outer.destructive:
        message = f"Tool {name} is not destructive but reaches the destructive Tool {tool}"
        found.append(
            BindingProblem("/binding/toolAnnotations/destructive", "effect-matrix", message)
        )
    if reached.human_approval_required and not outer.human_approval_required:
        message = f"Tool {name} does not require human approval but reaches {tool}, which does"
        pointer = "/binding/toolAnnotations/humanApprovalRequired"
        found.append(BindingProblem(pointer, "effect-matrix", message))
    return found


def _write_task_problems(task: WriteTask, outer: Annotations, name: str) -> list[BindingProblem]:
    found = []
    if outer.read_only:
        message = (
            f"read-only Tool {name} reaches the write task "
            f"{task.qualified_name} ({task.kind} {task.target})"
        )
        found.append(BindingProblem("/binding/toolAnnotations/readOnly", "effect-matrix", message))
    digest = task.approval_evidence_digest
    if digest is None or not DIGEST_PATTERN.match(digest):
        message = (
            f"write task {task.qualified_name} needs approvalEvidenceDigest metadata "
            "(sha256:<64 hex digits>)"
        )
        found.append(BindingProblem(task.pointer, "approval-evidence", message))
    return found


def effect_matrix_problems(
    definition: WorkflowDefinition, binding: ToolBinding, reach: Reach
) -> tuple[list[BindingProblem], tuple[WriteTask, ...]]:
    """Every task against the outer Tool's annotations: the problems and the write tasks.

    A read-only Tool may reach only reads. A write Tool needs approvalEvidenceDigest metadata on
    every write task. No Tool may reach a Tool whose annotations are stronger than its own.
    """
    found: list[BindingProblem] = []
    outer = annotations_of(binding.tool_annotations)
    reached = _reached_annotations(definition, reach, found)
    for tool, reached_tool in sorted(reached.items()):
        found.extend(_reached_tool_problems(tool, reached_tool, outer, binding.tool_name))
    read_only_tools = {tool for tool, flags in reached.items() if flags.read_only}
    writes = tuple(write_tasks(definition, read_only_tools))
    for task in writes:
        found.extend(_write_task_problems(task, outer, binding.tool_name))
    return found, writes


def stage_definition_problems(document: Any) -> list[BindingProblem]:
    """A development-feature stage definition never backs a Tool (issue 36, seed 004 F5): it
    runs only as a stage claimed by workflow_feature_stage_start."""
    stage = stage_of(document)
    if stage is None:
        return []
    message = (
        f"the pinned version is a development-feature stage definition ({STAGE_MARKER}: "
        f"{stage}); it runs only as a claimed stage (workflow_feature_stage_start), never as a Tool"
    )
    return [BindingProblem(STAGE_POINTER, "stage-definition", message)]


def service_identity_binding_problems(definition: WorkflowDefinition) -> list[BindingProblem]:
    """Every call of the pinned version acting as a service identity without approval evidence.

    Publish refuses such a version now; one published before that rule is refused here, so no
    new revision serves it (seed 001: service identity "only when the step has explicit
    publication-time approval evidence").
    """
    return [
        BindingProblem(problem.pointer, problem.rule, problem.message)
        for problem in service_identity_problems(definition)
    ]


def static_fit_findings(
    definition: WorkflowDefinition, bounds: RuntimeBounds, total_deadline_ms: int
) -> list[tuple[str, str]]:
    """Why the version cannot fit the binding's limits: (request pointer, message naming it)."""
    needs = static_requirements(definition, total_deadline_ms=total_deadline_ms)
    found: list[tuple[str, str]] = []
    bound, deadline = "/binding/runtimeBounds/", "/binding/totalDeadlineMs"
    width, nested = bounds.maximum_parallelism, bounds.maximum_nested_calls
    attempts = bounds.maximum_task_attempts
    if needs.max_fork_width > width:
        message = f"fork width {needs.max_fork_width} exceeds runtimeBounds.maximumParallelism"
        found.append((bound + "maximumParallelism", f"{message} {width}"))
    if needs.nested_calls > nested:
        message = f"{needs.nested_calls} declared nested calls exceed"
        message = f"{message} runtimeBounds.maximumNestedCalls {nested}"
        found.append((bound + "maximumNestedCalls", message))
    if needs.max_task_attempts > attempts:
        message = (
            f"{needs.max_task_attempts} worst-case dispatch attempts per run (calls times retry "
            f"attempts) exceed runtimeBounds.maximumTaskAttempts {attempts}"
        )
        found.append((bound + "maximumTaskAttempts", message))
    worst_time = needs.worst_case_time_ms
    if worst_time is not None and worst_time > total_deadline_ms:
        message = (
            f"worst-case run time {worst_time} ms (declared timeouts, waits and retry delays) "
            f"exceeds totalDeadlineMs {total_deadline_ms}"
        )
        found.append((deadline, message))
    envelope_ms = needs.worst_retry_delay_ms + needs.total_wait_ms
    if envelope_ms > total_deadline_ms:
        message = f"retry delays and waits of {envelope_ms} ms exceed totalDeadlineMs"
        found.append((deadline, f"{message} {total_deadline_ms}"))
    found.extend((deadline, f"totalDeadlineMs {total_deadline_ms}: {v}") for v in needs.violations)
    return found


def static_fit_problems(
    definition: WorkflowDefinition, bounds: RuntimeBounds, total_deadline_ms: int
) -> list[str]:
    """Why the version cannot fit the binding's limits; each message names the limit."""
    return [message for _, message in static_fit_findings(definition, bounds, total_deadline_ms)]


def binding_static_fit_problems(
    definition: WorkflowDefinition, binding: ToolBinding
) -> list[BindingProblem]:
    """The static-fit problems of a version against the binding's bounds and deadline."""
    findings = static_fit_findings(definition, binding.runtime_bounds, binding.total_deadline_ms)
    return [
        BindingProblem(
            pointer, "static-fit", f"the pinned version does not fit the binding: {message}"
        )
        for pointer, message in findings
    ]


def service_parallelism_problems(
    definition: WorkflowDefinition, ceiling: int | None
) -> list[BindingProblem]:
    """Every fork wider than the service's execution.maximum_parallelism.

    Seed 001: fork width is governed by the service setting, whatever the binding allows. It
    is runtime configuration, not the request, so the rejection carries no evidence.
    """
    if ceiling is None:
        return []
    return [
        BindingProblem(
            pointer,
            "service-parallelism",
            f"the pinned version does not fit the service: fork {pointer} has {width} "
            f"branches, over execution.maximum_parallelism {ceiling}",
        )
        for pointer, width in sorted(fork_widths(definition).items())
        if width > ceiling
    ]


@dataclass(frozen=True, slots=True)
class PinnedDataFlow:
    """What the checker proved on the pinned version: bugs as problems, and the warnings."""

    problems: list[BindingProblem]
    warnings: list[PublicationWarning]


def pinned_data_flow(definition: WorkflowDefinition, version: str) -> PinnedDataFlow:
    """Check the pinned version's data flow (both lists capped like the receipt's warnings)."""
    report = data_flow_report(definition)
    problems = [
        BindingProblem(
            error.pointer,
            error.code,
            f"the pinned definition version {version} has a data bug: {error.message}; "
            "publish a fixed version and bind to it",
        )
        for error in report.errors[:MAX_WARNINGS]
    ]
    warnings = [
        PublicationWarning(**warning_entry(warning)) for warning in report.warnings[:MAX_WARNINGS]
    ]
    return PinnedDataFlow(problems, warnings)
