"""Definitions with an `ask` task, for the human-task inbox tests."""

from __future__ import annotations


def approval_yaml(timeout: str | None = None, role: str = "approver") -> str:
    """A start-run definition: an approval ask for role, then a set recording the answer."""
    timeout_lines = (
        f"        timeout:\n          after: {timeout}\n"
        "        onTimeout:\n          action: default\n          default: REJECTED\n"
        if timeout
        else ""
    )
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: claims\n"
        "  name: summarize-claim\n"
        '  version: "1.2.0"\n'
        "do:\n"
        "  - requestApproval:\n"
        "      ask:\n"
        "        prompt: Approve the claim?\n"
        "        mode: approval\n"
        "        assignment:\n"
        f"          roleId: {role}\n"
        "          categoryCode: approval\n"
        "        options:\n"
        "          - label: Approve\n"
        "            value: APPROVED\n"
        "          - label: Reject\n"
        "            value: REJECTED\n"
        f"{timeout_lines}"
        "      export:\n"
        "        as:\n"
        "          approval: ${ output }\n"
        "  - recordDecision:\n"
        "      set:\n"
        "        decision: ${ context.approval.value }\n"
        "        by: ${ context.approval.answeredBy }\n"
    )
