"""The data-flow checker on a binding's pinned version: proved bugs are problems, plus warnings.

Versions published before the checker existed were never checked, so binding publish runs it
again; a proved bug depends on stored state (the version), so like the other pinned-version
rules it carries no request-validation evidence. Its pointer is the task in the definition.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.engine.datacheck import MAX_WARNINGS, data_flow_report, warning_entry
from runtime.engine.model import WorkflowDefinition
from runtime.publication.bindings.binding_problems import BindingProblem


@dataclass(frozen=True, slots=True)
class PinnedDataFlow:
    """What the checker proved on the pinned version: bugs as problems, and the warnings."""

    problems: list[BindingProblem]
    warnings: list[dict[str, str]]


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
    warnings = [warning_entry(warning) for warning in report.warnings[:MAX_WARNINGS]]
    return PinnedDataFlow(problems, warnings)
