"""`workflow-mcp convert`: light-workflow definitions rewritten into this profile.

For each file it prints every change (pointer, before, after), every construct it cannot
convert and why, what publication would still refuse in the converted definition (checked
offline, as `workflow-mcp check` does), and what a Tool over it still needs (review evidence
for a write, endpoint targets, grants). `--evidence TASK=DIGEST` records the user's review
digest on a write task. With `--out DIR` it writes each converted definition there under the
same file name. Exit 0 when every file converted and would publish, else 2.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runtime.canonical import CanonicalError, load_definition_yaml
from runtime.composition.check import EXIT_CLEAN, EXIT_ERRORS, FileReport, check_loaded
from runtime.composition.convert_needs import EvidenceError, Need, apply_evidence, needs_of
from runtime.engine.convert import Blocker, Change, convert_definition
from runtime.engine.convert.evidence import parse_evidence


@dataclass
class ConvertReport:
    """What converting one file did, could not do, and what publication would still refuse."""

    path: str
    written: str | None = None
    changes: list[Change] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)
    refusals: list[dict[str, str]] = field(default_factory=list)
    needs: list[Need] = field(default_factory=list)
    evidence_used: set[str] = field(default_factory=set)
    converted: dict[str, Any] | None = None

    def failed(self) -> bool:
        """Whether the converted definition cannot be published as it is."""
        return bool(self.blockers or self.refusals)

    def document(self) -> dict[str, Any]:
        """The report as `--format json` prints it."""
        return {
            "path": self.path,
            "written": self.written,
            "changes": [
                {"pointer": c.pointer, "before": c.before, "after": c.after} for c in self.changes
            ],
            "notConverted": [
                {"pointer": b.pointer, "construct": b.construct, "reason": b.reason}
                for b in self.blockers
            ],
            "stillRefused": self.refusals,
            "toolNeeds": [need.document() for need in self.needs],
        }


def dump_definition(document: dict[str, Any]) -> str:
    """The converted definition as YAML, in a stable form (converting it again is a no-op)."""
    return yaml.safe_dump(
        document, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )


def write_converted(report: ConvertReport, out: Path) -> None:
    """Write the converted definition under out, by the source's file name."""
    if report.converted is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    target = out / Path(report.path).name
    target.write_text(dump_definition(report.converted), encoding="utf-8")
    report.written = str(target)


def converted_file(
    path: Path, version: str | None, evidence: dict[str, str] | None = None
) -> ConvertReport:
    """Convert one file in memory: the report, with the converted document in it."""
    report = ConvertReport(str(path))
    try:
        source = load_definition_yaml(path.read_bytes())
    except (OSError, CanonicalError) as error:
        report.refusals.append({"pointer": "", "rule": "unreadable", "message": str(error)})
        return report
    conversion = convert_definition(source, version=version)
    report.changes = list(conversion.changes)
    report.blockers = list(conversion.blockers)
    checked = check_loaded(FileReport(str(path)), conversion.document)
    if evidence and checked.analysis is not None:
        recorded, report.evidence_used = apply_evidence(
            conversion.document, checked.analysis, evidence
        )
        report.changes.extend(recorded)
        checked = check_loaded(FileReport(str(path)), conversion.document)
    # A construct already named as not convertible is not repeated as a refusal.
    report.refusals = [p for p in checked.problems if not _named(p, report.blockers)]
    if checked.analysis is not None:
        report.needs = needs_of(checked.analysis)
    report.converted = conversion.document
    return report


def _named(problem: dict[str, str], blockers: list[Blocker]) -> bool:
    """Whether a blocker names the construct this refusal is about (same place, same thing)."""
    pointer = problem["pointer"]
    for blocker in blockers:
        if blocker.pointer == pointer:
            return True
        inside = blocker.pointer.startswith(pointer + "/")
        if inside and blocker.refused_as and blocker.refused_as in problem["message"]:
            return True
    return False


def render_text(report: ConvertReport) -> str:
    """The human-readable report of one file."""
    verdict = "not fully converted" if report.failed() else "converted"
    lines = [f"{report.path}: {verdict}" + (f" -> {report.written}" if report.written else "")]
    for change in report.changes:
        lines.append(f"  change {change.pointer}")
        lines.append(f"    before: {_shown(change.before)}")
        lines.append(f"    after:  {_shown(change.after)}")
    for blocker in report.blockers:
        lines.append(f"  not converted {blocker.pointer} ({blocker.construct}): {blocker.reason}")
    for problem in report.refusals:
        where = problem["pointer"] or "/"
        lines.append(f"  still refused {where} [{problem['rule']}]: {problem['message']}")
    for need in report.needs:
        lines.append(f"  needs {need.pointer} ({need.need}): {need.message}")
    if report.written is None:
        lines.append("  (nothing written: pass --out DIR to write the converted definition)")
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if value is None:
        return "(absent)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def run_convert(
    files: list[str],
    *,
    out: str | None,
    output_format: str,
    version: str | None,
    evidence: list[str] | None = None,
) -> tuple[int, str]:
    """Convert the files; returns the exit code and the text to print."""
    target = None if out is None else Path(out)
    try:
        digests = dict(parse_evidence(value) for value in evidence or ())
    except EvidenceError as error:
        return EXIT_ERRORS, f"workflow-mcp convert: {error}"
    reports = [converted_file(Path(name), version, digests) for name in files]
    unused = set(digests).difference(*(report.evidence_used for report in reports))
    if unused:
        # Nothing is written for a mistyped task name: the user meant to record a review.
        names = ", ".join(sorted(unused))
        return EXIT_ERRORS, (
            f"workflow-mcp convert: --evidence names {names}, which is no write task of "
            f"{', '.join(files)} (a write task is an HTTP call other than GET or HEAD, or a "
            "call: mcp; name it by its task name or JSON pointer); nothing written"
        )
    if target is not None:
        for report in reports:
            write_converted(report, target)
    code = EXIT_ERRORS if any(report.failed() for report in reports) else EXIT_CLEAN
    if output_format == "json":
        body = {"exitCode": code, "files": [report.document() for report in reports]}
        return code, json.dumps(body, indent=2, ensure_ascii=False)
    return code, "\n".join(render_text(report) for report in reports)


def add_convert_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `convert` subcommand."""
    run = commands.add_parser(
        "convert",
        help="convert light-workflow definitions into this profile, keeping their meaning",
        description="Rewrite light-workflow definitions (one context for every expression, "
        "`${ }` inside strings and URIs, bare-word comparisons, use.mcpSessions, end: true) "
        "into this profile. Prints every change and every construct that cannot be converted; "
        "exit 0 when every file converted and would publish, 2 otherwise.",
    )
    run.add_argument("files", nargs="+", metavar="FILE", help="definitions, YAML or JSON")
    run.add_argument("--out", default=None, metavar="DIR", help="write converted files here")
    run.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    run.add_argument("--version", default=None, help="set document.version (default: kept)")
    run.add_argument(
        "--evidence",
        action="append",
        default=[],
        metavar="TASK=DIGEST",
        help="record your review of a write task: metadata.approvalEvidenceDigest "
        "(sha256:<64 hex>) on the task named TASK (name or JSON pointer); repeatable",
    )
    run.set_defaults(run=convert)


def convert(args: argparse.Namespace) -> int:
    """Run `workflow-mcp convert`."""
    code, text = run_convert(
        args.files,
        out=args.out,
        output_format=args.format,
        version=args.version,
        evidence=args.evidence,
    )
    print(text)
    return code
