"""Definitions with and without data bugs for the checker tests, and their publish arguments."""

from __future__ import annotations

from typing import Any

from runtime.canonical import definition_digest
from tests.support.binding_builders import HOST, OWNER, OWNER_POSITION, new_id

_HEADER = (
    "document:\n"
    '  dsl: "1.0.3"\n'
    "  namespace: claims\n"
    "  name: summarize-claim\n"
    '  version: "1.2.0"\n'
    "input:\n"
    "  schema:\n"
    "    format: json\n"
    "    document:\n"
    "      type: object\n"
    "      properties:\n"
    "        applicantId: {type: string}\n"
    "        nickname: {type: string}\n"
    "      required: [applicantId]\n"
)


def decision_yaml(applicant_expression: str) -> str:
    """The hold-out case: `finish` reads applicantId through the given expression after a
    `set` task whose output has only `status`."""
    return (
        _HEADER + "do:\n"
        "  - decide:\n"
        "      set:\n"
        "        status: APPROVED\n"
        "  - finish:\n"
        "      set:\n"
        f'        applicantId: "${{ {applicant_expression} }}"\n'
        '        status: "${ .status }"\n'
    )


def optional_read_yaml() -> str:
    """A definition that reads an optional input field without has(): a warning, not an error."""
    return _HEADER + 'do:\n  - greet:\n      set:\n        nick: "${ .nickname }"\n'


def publish_arguments(wf_def_id: str, text: str, version: str = "1.2.0") -> dict[str, Any]:
    """workflow_definition_publish arguments for text, with its digest."""
    return {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": version,
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": "carryOver",
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "operationId": new_id(),
    }


def many_optional_reads_yaml(count: int, padding: int = 0) -> str:
    """count tasks that each read the optional nickname (one warning each), every expression
    padded with a string literal of padding characters."""
    expression = "${ workflow.input.nickname + '" + "p" * padding + "' }"
    tasks = "".join(f'  - t{i}:\n      set:\n        nick: "{expression}"\n' for i in range(count))
    return _HEADER + "do:\n" + tasks
