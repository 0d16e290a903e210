"""Workflow faults: RFC 7807 problem details with the spec's standard error types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

ERROR_TYPE_BASE: Final = "https://serverlessworkflow.io/spec/1.0.0/errors/"
_ALTERNATE_BASES: Final = (
    ERROR_TYPE_BASE,
    "https://open-workflow-specification.org/spec/1.0.0/errors/",
    "https://serverlessworkflow.io/dsl/errors/types/",
    "https://open-workflow-specification.org/dsl/errors/types/",
)
DEFAULT_STATUS: Final = {
    "configuration": 400,
    "validation": 400,
    "expression": 400,
    "authentication": 401,
    "authorization": 403,
    "timeout": 408,
    "communication": 500,
    "runtime": 500,
}


class WorkflowFault(Exception):
    """A raised workflow error; ``problem`` is the RFC 7807 object (type, status, instance...)."""

    def __init__(self, problem: Mapping[str, Any]) -> None:
        super().__init__(
            f"{problem.get('type')} {problem.get('status')} @ {problem.get('instance')}"
        )
        self.problem: dict[str, Any] = dict(problem)

    @property
    def kind(self) -> str | None:
        """The standard kind (validation, timeout, ...) or None for a custom type."""
        return standard_kind(self.problem.get("type"))


def fault(
    kind: str,
    instance: str,
    *,
    title: str | None = None,
    detail: str | None = None,
    status: int | None = None,
) -> WorkflowFault:
    """A standard-type fault at a definition pointer."""
    problem: dict[str, Any] = {
        "type": ERROR_TYPE_BASE + kind,
        "status": DEFAULT_STATUS[kind] if status is None else status,
        "instance": instance,
    }
    if title is not None:
        problem["title"] = title
    if detail is not None:
        problem["detail"] = detail
    return WorkflowFault(problem)


def expression_fault(error: Any, instance: str, text: str | None) -> WorkflowFault:
    """The expression fault of a failed CEL site, naming the expression (definition text).

    ``error`` is the ExpressionError; its message never embeds evaluated data, so it and the
    expression may reach the caller (an `expression` member only the engine sets).
    """
    problem = fault("expression", instance, title="Expression failed", detail=error.message)
    expression = getattr(error, "expression", None) or text
    if isinstance(expression, str):
        problem.problem["expression"] = expression
    return problem


def standard_kind(error_type: Any) -> str | None:
    """The kind of a standard error URI in any of its accepted spellings."""
    if not isinstance(error_type, str):
        return None
    for base in _ALTERNATE_BASES:
        if error_type.startswith(base) and error_type[len(base) :] in DEFAULT_STATUS:
            return error_type[len(base) :]
    return None


def matches_filter(problem: Mapping[str, Any], errors_with: Mapping[str, Any]) -> bool:
    """catch.errors.with: equality on each given field; standard types match in any spelling."""
    for key, expected in errors_with.items():
        field = "detail" if key == "details" else key
        actual = problem.get(field)
        if field == "type":
            kind = standard_kind(expected)
            if kind is not None and standard_kind(actual) == kind:
                continue
        if actual != expected:
            return False
    return True
