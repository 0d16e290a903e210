"""Every binding-publish rule in one pass: the request's own rules, then the pinned version's.

Binding publish, owner approval and ``workflow-mcp check --binding`` read the same lists, so a
publisher sees every problem at once (seed 001 asks publication to teach; issue 11 item 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from generated.models import PublicationWarning, ToolBinding, WorkflowBindingPublishInput
from runtime.binding_reach import EndpointTarget, Reach
from runtime.engine.check import WriteTask
from runtime.engine.model import WorkflowDefinition
from runtime.publication.authorization_policy import authorization_policy_problems
from runtime.publication.bindings.binding_problems import BindingProblem
from runtime.publication.bindings.destination_policy import DestinationPolicy, destination_problems
from runtime.publication.bindings.endpoint_coverage import coverage_problems
from runtime.publication.bindings.field_rules import binding_field_problems
from runtime.publication.bindings.reach_rules import (
    indexed_targets,
    reach_of,
    reach_problems,
    self_dependency_problems,
)
from runtime.publication.bindings.version_rules import (
    binding_static_fit_problems,
    effect_matrix_problems,
    pinned_data_flow,
    pinned_definition_problems,
    service_identity_binding_problems,
    service_parallelism_problems,
    stage_definition_problems,
)


@dataclass(frozen=True, slots=True)
class RequestCheck:
    """The request after its own rules: what later rules read, and the problems found."""

    binding: ToolBinding
    reach: Reach
    # Targets whose URI can be checked, with their index in the request (for pointers).
    targets: list[tuple[int, EndpointTarget]]
    problems: list[BindingProblem]


@dataclass(frozen=True, slots=True)
class PinnedCheck:
    """The pinned version against the binding: problems, write tasks, checker warnings."""

    problems: list[BindingProblem]
    definition: WorkflowDefinition | None = None
    write_tasks: tuple[WriteTask, ...] = ()
    warnings: list[PublicationWarning] = field(default_factory=list)


def check_request(request: WorkflowBindingPublishInput) -> RequestCheck:
    """bindingFields then bindingReach rules, every problem of both sections."""
    problems = [
        *binding_field_problems(request.binding),
        *reach_problems(request.dependencies, request.endpoint_targets),
        *self_dependency_problems(request.binding.tool_id, request.dependencies),
    ]
    return RequestCheck(
        binding=request.binding,
        reach=reach_of(request.dependencies, request.endpoint_targets),
        targets=indexed_targets(request.endpoint_targets),
        problems=problems,
    )


def check_revision(binding: ToolBinding, reach: Reach) -> RequestCheck:
    """A stored revision's binding and reach as the request rules leave them (owner approval).

    The stored reach is already in its canonical order (it passed bindingReach when published),
    so a target's pointer index is its place in that order.
    """
    return RequestCheck(
        binding=binding,
        reach=reach,
        targets=list(enumerate(reach.endpoint_targets)),
        problems=binding_field_problems(binding),
    )


def check_pinned(
    document: Any,
    request: RequestCheck,
    policy: DestinationPolicy,
    *,
    parallelism_ceiling: int | None = None,
    data_flow: bool = True,
) -> PinnedCheck:
    """Every rule that reads the pinned version or the service's policy (CPU-bound: off loop).

    data_flow=False leaves the checker out (``check`` reports it for the definition itself).
    """
    definition, problems = pinned_definition_problems(document)
    problems.extend(stage_definition_problems(document))
    targets = request.targets
    problems.extend(destination_problems(targets, policy))
    if definition is None:
        return PinnedCheck(problems)
    found, writes = effect_matrix_problems(definition, request.binding, request.reach)
    problems.extend(found)
    problems.extend(coverage_problems(definition, (target for _, target in targets)))
    problems.extend(authorization_policy_problems(definition, targets))
    problems.extend(service_identity_binding_problems(definition))
    problems.extend(binding_static_fit_problems(definition, request.binding))
    problems.extend(service_parallelism_problems(definition, parallelism_ceiling))
    if not data_flow:
        return PinnedCheck(problems, definition, writes)
    checked = pinned_data_flow(definition, request.binding.workflow_version)
    problems.extend(checked.problems)
    return PinnedCheck(problems, definition, writes, checked.warnings)
