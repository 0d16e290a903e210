"""The deterministic validator of a generated draft: publication's own checks plus the Phase 3
rules (seed 001: the workflow-mcp-phase3 validator), each finding typed with its JSON pointer.

A draft passes only when publication would accept it as it stands (the engine's profile, the
data-flow checker, credentials) and it meets every Phase 3 rule against the selected Tools.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from generated.models import PublicationWarning
from runtime.canonical import PROVENANCE_KEY
from runtime.engine.check.authoring_rules import authoring_problems
from runtime.engine.parse.definition_errors import Problem
from runtime.errors import WorkflowError
from runtime.publication.authoring.credential_text import credential_kinds
from runtime.publication.definition_checks import checked_for_publication

# At most this many findings are returned (the first ones, blockers first).
MAX_FINDINGS: Final = 64


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{pointer}/{_escape(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{pointer}/{index}")


def credential_problems(document: Any, root: str = "") -> list[Problem]:
    """A finding for every string of the document that reads as a credential."""
    return [
        Problem(
            where,
            "credential",
            f"this text reads as a credential ({', '.join(kinds)}); credentials never enter "
            "a definition: put the value with workflow_secret_put and name it in a policy",
        )
        for where, text in _strings(document, root)
        for kinds in [credential_kinds(text)]
        if kinds
    ]


def _provenance_problems(document: Mapping[str, Any]) -> list[Problem]:
    header = document.get("document")
    metadata = header.get("metadata") if isinstance(header, Mapping) else None
    if isinstance(metadata, Mapping) and PROVENANCE_KEY in metadata:
        return [
            Problem(
                f"/document/metadata/{PROVENANCE_KEY}",
                "generated-provenance",
                "a draft carries no provenance of its own: Workflow returns it, and the "
                "reviewer's apply records it",
            )
        ]
    return []


def _publication_problems(document: dict[str, Any]) -> tuple[list[Problem], list[Any]]:
    try:
        checked = checked_for_publication(document)
    except WorkflowError as error:
        found = (error.details or {}).get("problems")
        if isinstance(found, list) and found:
            return [
                Problem(str(item["pointer"]), str(item["rule"]), str(item["message"]))
                for item in found
            ], []
        return [Problem("", "invalid-definition", error.message)], []
    return [], list(checked.warnings)


def draft_findings(
    document: dict[str, Any], selected_tools: frozenset[str]
) -> tuple[list[Problem], list[PublicationWarning]]:
    """Every finding on a draft (empty: it passes) and the publication warnings it would get."""
    problems = authoring_problems(document, selected_tools)
    problems += _provenance_problems(document)
    problems += credential_problems(document)
    publication, warnings = _publication_problems(document)
    known = {(problem.pointer, problem.rule) for problem in problems}
    problems += [problem for problem in publication if (problem.pointer, problem.rule) not in known]
    return problems[:MAX_FINDINGS], warnings
