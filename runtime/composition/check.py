"""`workflow-mcp check`: what publication would say about definition files, offline.

For each file: its definition and schema digests, every problem (what would refuse it) and
warning with its pointer, and the static analysis a binding needs (write tasks and their
evidence, HTTP calls and the endpoint targets they need, MCP calls, fork widths, worst-case
attempts and time), and, in a workflow of several writes, each write without `compensate:`
(warning uncompensated-write). With ``--binding`` the workflow_binding_publish arguments are checked
against the definition too, and its endpoint targets against the configured destination policy
(``publication.destinations``, from ``--config`` and the environment); names are not resolved
offline, so the report lists them. No database is used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
from fastjsonschema import JsonSchemaValueException

from generated.models import WorkflowBindingPublishInput
from generated.routes import ROUTES
from runtime.canonical import (
    CanonicalError,
    definition_digest,
    load_definition_yaml,
    load_yaml_core,
    schema_digest,
)
from runtime.engine import parse_definition
from runtime.engine.check import (
    MAX_WARNINGS,
    check_document,
    http_calls,
    human_tasks,
    mcp_calls,
    parse_warning_entry,
    problem_entry,
    static_requirements,
    warning_entry,
    worst_case_human_wait_ms,
)
from runtime.engine.check.compensation import (
    UNCOMPENSATED_WRITE,
    uncompensated_message,
    uncompensated_writes,
)
from runtime.engine.model import (
    AskSpec,
    HttpCallSpec,
    McpCallSpec,
    TrySpec,
    WorkflowDefinition,
    walk_tasks,
)
from runtime.errors import WorkflowError
from runtime.mcp.schema_problems import SchemaProblem, collect, pointer_of
from runtime.publication import validate_definition
from runtime.publication.bindings.binding_problems import ordered
from runtime.publication.bindings.destination_policy import (
    DestinationPolicy,
    unresolved_names,
)
from runtime.publication.bindings.validation import check_pinned, check_request

EXIT_CLEAN: Final = 0
EXIT_WARNINGS: Final = 1  # only with --strict
EXIT_ERRORS: Final = 2


@dataclass
class FileReport:
    """What check found in one definition file."""

    path: str
    definition_digest: str | None = None
    schema_digest: str | None = None
    problems: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    warnings_left_out: int = 0  # warnings past MAX_WARNINGS, counted but not listed
    analysis: dict[str, Any] | None = None
    binding: dict[str, Any] | None = None

    def document(self) -> dict[str, Any]:
        """The report as the JSON output prints it."""
        return {
            "path": self.path,
            "definitionDigest": self.definition_digest,
            "schemaDigest": self.schema_digest,
            "problems": self.problems,
            "warnings": self.warnings,
            "warningsLeftOut": self.warnings_left_out,
            "analysis": self.analysis,
            "binding": self.binding,
        }


def _problem(pointer: str, rule: str, message: str) -> dict[str, str]:
    return {"pointer": pointer, "rule": rule, "message": message}


def _refusal_problems(error: WorkflowError) -> list[dict[str, str]]:
    details = error.details or {}
    listed = details.get("problems")
    if isinstance(listed, list) and listed:
        return [
            _problem(str(p.get("pointer", "")), str(p.get("rule", "")), str(p.get("message", "")))
            for p in listed
            if isinstance(p, dict)
        ]
    pointer = details.get("task")
    return [_problem(pointer if isinstance(pointer, str) else "", "definition", error.message)]


def analysis_of(definition: WorkflowDefinition) -> dict[str, Any]:
    """The static facts a binding needs, as plain JSON."""
    needs = static_requirements(definition)
    return {
        "writeTasks": [
            {
                "task": task.qualified_name,
                "pointer": task.pointer,
                "kind": task.kind,
                "target": task.target,
                "approvalEvidenceDigest": task.approval_evidence_digest,
            }
            for task in needs.write_tasks
        ],
        "httpCalls": [
            {
                "task": call.qualified_name,
                "pointer": call.pointer,
                "method": call.method,
                "endpoint": call.endpoint,
                "write": call.is_write,
            }
            for call in http_calls(definition)
        ],
        "mcpCalls": [
            {"task": call.qualified_name, "pointer": call.pointer, "tool": call.tool}
            for call in mcp_calls(definition)
        ],
        "maxForkWidth": needs.max_fork_width,
        "nestedCalls": needs.nested_calls,
        "worstCaseAttempts": needs.max_task_attempts,
        "worstCaseTimeMs": needs.worst_case_time_ms,
        "unboundedBy": [] if needs.worst_case_time_ms is not None else unbounded_by(definition),
        "worstRetryDelayMs": needs.worst_retry_delay_ms,
        "totalWaitMs": needs.total_wait_ms,
        "interactiveViolations": list(needs.violations),
        "humanTasks": [fact.document() for fact in human_tasks(definition)],
        "worstCaseHumanWaitMs": worst_case_human_wait_ms(definition),
    }


def unbounded_by(definition: WorkflowDefinition) -> list[str]:
    """What can leave the run's time unbounded: the kinds of task without a limit of its own.

    The report names only what the definition holds (a definition without a call was told that
    "a call has no timeout", issue 40); an enclosing timeout may bound some of them.
    """
    causes: list[str] = []
    for task in walk_tasks(definition.tasks):
        spec, bounded = task.spec, task.timeout_ms is not None
        if isinstance(spec, HttpCallSpec | McpCallSpec) and not bounded:
            causes.append("a call has no timeout")
        elif isinstance(spec, AskSpec) and spec.timeout_ms is None and not bounded:
            causes.append("a human task has no timeout")
        elif isinstance(spec, TrySpec) and _unlimited_retry(spec):
            causes.append("a retry has no attempt limit")
    return list(dict.fromkeys(causes))


def _unlimited_retry(spec: TrySpec) -> bool:
    return spec.catch.retry is not None and spec.catch.retry.attempt_count is None


def check_definition(path: Path) -> tuple[FileReport, dict[str, Any] | None]:
    """Load, validate and analyse one definition file; returns the document when it loads."""
    report = FileReport(str(path))
    try:
        document = load_definition_yaml(path.read_bytes())
    except OSError as error:
        report.problems.append(_problem("", "unreadable", f"cannot read: {error.strerror}"))
        return report, None
    except CanonicalError as error:
        report.problems.append(_problem("", error.discriminator, error.message))
        return report, None
    return check_loaded(report, document), document


def check_loaded(report: FileReport, document: dict[str, Any]) -> FileReport:
    """Fill report with what publication would say about an already-loaded definition."""
    report.definition_digest = definition_digest(document)
    report.schema_digest = schema_digest(document)
    try:
        validate_definition(document)
    except WorkflowError as error:
        report.problems.extend(_refusal_problems(error))
        return report
    definition = parse_definition(document)
    report.warnings.extend(parse_warning_entry(text) for text in definition.warnings)
    data_flow = check_document(document)
    report.problems.extend(problem_entry(finding) for finding in data_flow.errors)
    report.warnings.extend(warning_entry(finding) for finding in data_flow.warnings)
    report.warnings.extend(
        {"code": UNCOMPENSATED_WRITE, "pointer": t.pointer, "message": uncompensated_message(t)}
        for t in uncompensated_writes(definition)
    )
    _cap_warnings(report)
    report.analysis = analysis_of(definition)
    return report


def _cap_warnings(report: FileReport) -> None:
    # The receipt's cap holds here too: a hostile file once printed 72 MB of warnings.
    report.warnings_left_out = max(0, len(report.warnings) - MAX_WARNINGS)
    del report.warnings[MAX_WARNINGS:]


def check_binding(
    payload_path: Path, document: dict[str, Any], destinations: DestinationPolicy
) -> dict[str, Any]:
    """Check workflow_binding_publish arguments against a definition that parses."""
    problems: list[dict[str, str]] = []
    result: dict[str, Any] = {"path": str(payload_path), "problems": problems}
    try:
        arguments = load_yaml_core(payload_path.read_bytes())
    except OSError as error:
        problems.append(_problem("", "unreadable", f"cannot read: {error.strerror}"))
        return result
    except CanonicalError as error:
        problems.append(_problem("", error.discriminator, error.message))
        return result
    route = ROUTES["workflow_binding_publish"]
    try:
        route.validate_input(arguments)
    except JsonSchemaValueException as error:
        hint = (
            ""
            if "binding" in (arguments or {})
            else " (give the workflow_binding_publish arguments)"
        )
        # Every schema problem, as a publish refusal lists them; the first keeps the hint.
        first = SchemaProblem(pointer_of(error.path[1:]), str(error.rule), str(error.message))
        found = [p.as_json() for p in collect(route, arguments, first).listed]
        found[0]["message"] += hint
        problems.extend(found)
        return result
    request = msgspec.convert(arguments, WorkflowBindingPublishInput, strict=False)
    if request.expected_aggregate_version < 0:
        message = "expectedAggregateVersion must not be negative"
        problems.append(_problem("/expectedAggregateVersion", "binding", message))
    checked = check_request(request)
    binding = checked.binding
    if binding.definition_digest != definition_digest(document):
        problems.append(
            _problem("/binding/definitionDigest", "digest", "differs from the definition's digest")
        )
    if binding.schema_digest != schema_digest(document):
        problems.append(
            _problem(
                "/binding/schemaDigest", "digest", "differs from the definition's schema digest"
            )
        )
    # The publish rules themselves, every problem in the order a refusal lists them; the data
    # flow is the definition's own report above.
    pinned = check_pinned(document, checked, destinations, data_flow=False)
    problems.extend(p.as_json() for p in ordered([*checked.problems, *pinned.problems]))
    # Offline: names are not resolved, so what they resolve to is checked at publish time.
    result["unresolvedNames"] = unresolved_names(checked.reach.endpoint_targets)
    return result


def check_files(
    paths: Sequence[Path],
    binding: Path | None = None,
    destinations: DestinationPolicy | None = None,
) -> list[FileReport]:
    """Check every file (and the binding payload against each definition that parses)."""
    policy = DestinationPolicy() if destinations is None else destinations
    reports = []
    for path in paths:
        report, document = check_definition(path)
        if binding is not None and document is not None and report.analysis is not None:
            report.binding = check_binding(binding, document, policy)
        reports.append(report)
    return reports


def exit_code(reports: Sequence[FileReport], *, strict: bool) -> int:
    """2 when anything would be refused, 1 for warnings under --strict, else 0."""
    binding_problems = any(r.binding and r.binding["problems"] for r in reports)
    if binding_problems or any(r.problems for r in reports):
        return EXIT_ERRORS
    if strict and any(r.warnings for r in reports):
        return EXIT_WARNINGS
    return EXIT_CLEAN


def render_json(reports: Sequence[FileReport], code: int) -> str:
    """The machine-readable report (`--format json`)."""
    body = {"exitCode": code, "files": [report.document() for report in reports]}
    return json.dumps(body, indent=2, ensure_ascii=False)


def render_text(report: FileReport) -> str:
    """The human-readable report of one file."""
    verdict = "invalid" if report.problems else "ok"
    lines = [f"{report.path}: {verdict}"]
    if report.definition_digest is not None:
        lines.append(f"  definitionDigest {report.definition_digest}")
        lines.append(f"  schemaDigest     {report.schema_digest}")
    for problem in report.problems:
        where = problem["pointer"] or "/"
        lines.append(f"  error {where} [{problem['rule']}]: {problem['message']}")
    for warning in report.warnings:
        where = warning["pointer"] or "/"
        lines.append(f"  warning {where} [{warning['code']}]: {warning['message']}")
    if report.warnings_left_out:
        lines.append(f"  ... and {report.warnings_left_out} more warning(s) left out")
    if report.analysis is not None:
        lines.extend(_analysis_lines(report.analysis))
    if report.binding is not None:
        lines.extend(_binding_lines(report.binding))
    return "\n".join(lines)


def _analysis_lines(analysis: dict[str, Any]) -> list[str]:
    lines = ["  analysis:"]
    for task in analysis["writeTasks"]:
        evidence = task["approvalEvidenceDigest"] or "MISSING metadata.approvalEvidenceDigest"
        lines.append(
            f"    write task {task['pointer']} ({task['kind']} {task['target']}): {evidence}"
        )
    for call in analysis["httpCalls"]:
        lines.append(
            f"    http {call['pointer']}: {call['method']} {call['endpoint']} "
            f"needs an endpoint target allowing {call['method']}"
        )
    for call in analysis["mcpCalls"]:
        lines.append(f"    mcp {call['pointer']}: tool {call['tool']} needs a pinned dependency")
    time_ms = analysis["worstCaseTimeMs"]
    causes = "; ".join(analysis["unboundedBy"]) or "no declared bound"
    time_text = f"unbounded ({causes})" if time_ms is None else f"{time_ms} ms"
    lines.append(
        f"    max fork width {analysis['maxForkWidth']}, nested calls {analysis['nestedCalls']}, "
        f"worst-case attempts {analysis['worstCaseAttempts']}, worst-case time {time_text}"
    )
    lines.extend(f"    not interactive: {v}" for v in analysis["interactiveViolations"])
    lines.extend(_human_task_lines(analysis))
    return lines


def _human_task_lines(analysis: dict[str, Any]) -> list[str]:
    tasks = analysis["humanTasks"]
    if not tasks:
        return []
    lines = []
    for task in tasks:
        assignee = ", ".join(f"{k} {v}" for k, v in task["assignment"].items() if k.endswith("Id"))
        wait = "no timeout" if task["timeoutMs"] is None else f"timeout {task['timeoutMs']} ms"
        lines.append(
            f"    human task {task['pointer']}: asks {assignee}, {wait} "
            f"(then {task['onTimeout']}); answers {', '.join(task['values']) or 'free text'}"
        )
    wait_ms = analysis["worstCaseHumanWaitMs"]
    worst = "until the run's deadline" if wait_ms is None else f"{wait_ms} ms"
    lines.append(f"    worst-case wait for people: {worst} (workflow_start runs only)")
    return lines


def _binding_lines(binding: dict[str, Any]) -> list[str]:
    problems = binding["problems"]
    lines = [f"  binding {binding['path']}: {'refused' if problems else 'fits'}"]
    for problem in problems:
        where = problem["pointer"] or "/"
        lines.append(f"    error {where} [{problem['rule']}]: {problem['message']}")
    names = binding.get("unresolvedNames") or []
    if names:
        lines.append(
            f"    note: names not resolved offline ({', '.join(names)}); publication refuses "
            "them too if they resolve to internal addresses"
        )
    return lines


def run_check(
    files: Sequence[str],
    *,
    binding: str | None,
    strict: bool,
    output_format: str,
    destinations: DestinationPolicy | None = None,
) -> tuple[int, str]:
    """Check the files; returns the exit code and the text to print."""
    payload = None if binding is None else Path(binding)
    reports = check_files([Path(f) for f in files], payload, destinations)
    code = exit_code(reports, strict=strict)
    if output_format == "json":
        return code, render_json(reports, code)
    return code, "\n".join(render_text(report) for report in reports)
