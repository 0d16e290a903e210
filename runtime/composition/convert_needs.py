"""What a converted definition still needs before it runs as a Tool, said for its user.

`workflow-mcp check` lists the same facts as analysis; the converter repeats them as things to
do, because a light-workflow user does not yet know that a POST needs review evidence or that
every call needs an endpoint target: the two reasons a converted write cannot be published.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.engine.convert.evidence import EvidenceError, record_evidence
from runtime.engine.convert.tasks import Change


@dataclass(frozen=True)
class Need:
    """One thing a Tool over the converted definition needs: where, what, and how to give it."""

    pointer: str
    need: str
    message: str

    def document(self) -> dict[str, str]:
        """As `--format json` prints it."""
        return {"pointer": self.pointer, "need": self.need, "message": self.message}


def _task_name(pointer: str) -> str:
    return pointer.rsplit("/", 1)[-1]


def apply_evidence(
    document: dict[str, Any], analysis: dict[str, Any], evidence: dict[str, str]
) -> tuple[list[Change], set[str]]:
    """Record each --evidence digest on the write task it names; the changes and names used.

    A task is named by its name, its qualified name or its JSON pointer; a name that matches
    no write task is left unused (the caller refuses it when no file used it).
    """
    changes: list[Change] = []
    used: set[str] = set()
    for task in analysis["writeTasks"]:
        names = {task["task"], task["pointer"], _task_name(task["pointer"])}
        for name, digest in evidence.items():
            if name in names:
                change = record_evidence(document, task["pointer"], digest)
                used.add(name)
                if change is not None:
                    changes.append(change)
    return changes, used


def needs_of(analysis: dict[str, Any]) -> list[Need]:
    """What publishing a Tool over the definition, or starting it when it asks, still needs."""
    if analysis["humanTasks"]:
        return _start_run_needs(analysis)
    needs = [need for task in analysis["writeTasks"] if (need := _evidence_need(task))]
    for call in analysis["httpCalls"]:
        message = (
            f"it calls {call['method']} {call['endpoint']}: a Tool over it needs an endpoint "
            f"target allowing {call['method']} there (`workflow-mcp publish` derives it from the "
            "call) and a service answering there"
        )
        needs.append(Need(call["pointer"], "endpoint target", message))
    for call in analysis["mcpCalls"]:
        message = (
            f"it calls the MCP tool {call['tool']} through the Gateway: a Tool over it needs a "
            "pinned dependency and the definition a grant for it (`dependencies`, `grants` in "
            "its Tool spec)"
        )
        needs.append(Need(call["pointer"], "tool grant", message))
    return needs


def _start_run_needs(analysis: dict[str, Any]) -> list[Need]:
    # A Tool call cannot wait for a person, so the workflow runs from workflow_start, whose
    # reach is configuration (no binding, so no endpoint targets and no review evidence).
    needs = []
    for task in analysis["humanTasks"]:
        message = (
            "it asks a person and parks the run until they answer: a Tool call cannot wait for "
            "that; start the workflow with `workflow_start` and answer through the inbox tools "
            "(docs/HUMAN_TASKS.md)"
        )
        needs.append(Need(task["pointer"], "workflow_start", message))
    for call in analysis["httpCalls"]:
        message = (
            f"it calls {call['method']} {call['endpoint']}: a run started with `workflow_start` "
            "reaches only the prefixes in `execution.outbound.http_allowlist`; add this "
            "service's, and make sure it answers there"
        )
        needs.append(Need(call["pointer"], "http allowlist", message))
    for call in analysis["mcpCalls"]:
        message = (
            f"it calls the MCP tool {call['tool']} through the Gateway "
            "(`execution.outbound.gateway_mcp_url`): the definition needs a live grant for it"
        )
        needs.append(Need(call["pointer"], "tool grant", message))
    return needs


def _evidence_need(task: dict[str, Any]) -> Need | None:
    if task["approvalEvidenceDigest"]:
        return None
    name = _task_name(task["pointer"])
    message = (
        f"it writes ({task['kind']} {task['target']}), so a Tool over it must be a write Tool "
        "and the task must carry metadata.approvalEvidenceDigest, the sha256 digest of your "
        f"review of this effect: convert again with --evidence {name}=sha256:<64 hex digits>"
    )
    return Need(task["pointer"], "review evidence", message)


__all__ = ["EvidenceError", "Need", "apply_evidence", "needs_of"]
