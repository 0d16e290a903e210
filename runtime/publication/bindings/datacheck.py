"""The data-flow checker on a binding's pinned version: refuse proved bugs, return warnings.

Versions published before the checker existed were never checked, so binding publish runs it
again; the refusal depends on stored state (the version), so like the other pinned-version
rules it carries no request-validation evidence and is not stored under the operationId.
"""

from __future__ import annotations

from typing import Any

from runtime.engine.datacheck import MAX_WARNINGS, check_document, problem_entry, warning_entry
from runtime.engine.shape_eval import Finding
from runtime.errors import WorkflowError, input_invalid


def pinned_data_flow_refusal(version: str, errors: tuple[Finding, ...]) -> WorkflowError:
    """WORKFLOW_INPUT_INVALID naming the first proved data bug of the pinned version."""
    first = errors[0]
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return input_invalid(
        f"the pinned definition version {version} has a data bug: {first.message}{more}; "
        "publish a fixed version and bind to it",
        details={"task": first.pointer, "problems": [problem_entry(e) for e in errors]},
    )


def pinned_version_warnings(document: Any, version: str) -> list[dict[str, str]]:
    """Check the pinned version's document: raise on proved data bugs, return the warnings."""
    report = check_document(document)
    if report.errors:
        raise pinned_data_flow_refusal(version, report.errors)
    return [warning_entry(warning) for warning in report.warnings[:MAX_WARNINGS]]
