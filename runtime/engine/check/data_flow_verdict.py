"""The data-flow checker at publication: refuse the data bugs it proves, return its warnings."""

from __future__ import annotations

import logging
from typing import Any, Final

from runtime.engine.check.data_flow import DataFlowReport, check_data_flow
from runtime.engine.check.expression_shapes import Finding
from runtime.engine.model import WorkflowDefinition
from runtime.engine.parse.definition import parse_definition
from runtime.errors import WorkflowError, input_invalid

MAX_WARNINGS: Final = 200  # the receipt's warnings.maxItems
_log = logging.getLogger(__name__)


def problem_entry(finding: Finding) -> dict[str, str]:
    """One refusal problem as details.problems lists it: {pointer, rule, message}."""
    return {"pointer": finding.pointer, "rule": finding.code, "message": finding.message}


def parse_warning_entry(text: str) -> dict[str, str]:
    """One parser warning ("/pointer: message") as a receipt warning, code definition.warning."""
    pointer, _, message = text.partition(": ")
    if not pointer.startswith("/") or not message:
        pointer, message = "", text
    return {"code": "definition.warning", "pointer": pointer, "message": message}


def definition_warnings(definition: WorkflowDefinition, document: Any) -> list[dict[str, str]]:
    """Every warning `check` prints, parser's then data-flow's; raise on proved data bugs."""
    parsed = [parse_warning_entry(text) for text in definition.warnings]
    return [*parsed, *publication_warnings(document)][:MAX_WARNINGS]


def warning_entry(finding: Finding) -> dict[str, str]:
    """One receipt warning: {code, pointer, message}."""
    return {"code": finding.code, "pointer": finding.pointer, "message": finding.message}


def data_flow_refusal(errors: tuple[Finding, ...]) -> WorkflowError:
    """WORKFLOW_INPUT_INVALID naming the first proved data bug and how many there are."""
    first = errors[0]
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return input_invalid(
        f"definition is invalid: {first.message}{more}",
        # The count is in the message; the list keeps the receipt's cap (a hostile definition
        # once listed 3,000 problems).
        details={
            "task": first.pointer,
            "problems": [problem_entry(e) for e in errors[:MAX_WARNINGS]],
        },
    )


def check_document(document: Any) -> DataFlowReport:
    """The data-flow report of a definition document that already passed validation."""
    return data_flow_report(parse_definition(document))


def data_flow_report(definition: WorkflowDefinition) -> DataFlowReport:
    """The data-flow report of a parsed definition (a checker gap reports nothing)."""
    try:
        return check_data_flow(definition)
    except Exception:  # a checker gap must not refuse a valid definition or fail the call
        _log.exception(
            "the data-flow checker failed on %s/%s", definition.namespace, definition.name
        )
        return DataFlowReport(errors=(), warnings=())


def publication_warnings(document: Any) -> list[dict[str, str]]:
    """Run the checker on a validated definition: raise on proved bugs, return the warnings."""
    report = check_document(document)
    if report.errors:
        raise data_flow_refusal(report.errors)
    return [warning_entry(warning) for warning in report.warnings[:MAX_WARNINGS]]
