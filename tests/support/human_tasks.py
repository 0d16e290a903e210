"""Definitions with an `ask` task, for the human-task inbox tests."""

from __future__ import annotations

from typing import Any

from tests.support.binding_builders import new_id
from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until


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


def input_ask_yaml(assignment: str = "roleId: approver", *, required: bool = True) -> str:
    """A start-run definition: a free-text (input) ask assigned by one `key: value` line, then a
    set recording the reply's value and who gave it."""
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: claims\n"
        "  name: explain-claim\n"
        '  version: "1.0.0"\n'
        "do:\n"
        "  - askReason:\n"
        "      ask:\n"
        "        prompt: Why was the claim late?\n"
        "        mode: input\n"
        "        assignment:\n"
        f"          {assignment}\n"
        f"        required: {'true' if required else 'false'}\n"
        "      export:\n"
        "        as:\n"
        "          reply: ${ output }\n"
        "  - recordReply:\n"
        "      set:\n"
        "        reply: ${ context.reply.value }\n"
        "        by: ${ context.reply.answeredBy }\n"
    )


async def start_run(
    owner: McpTestClient, starter: McpTestClient, text: str, data: Any = None
) -> str:
    """Save text as a definition head and start it with data ({} by default); the run id."""
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    arguments = {"wfDefId": wf_def_id, "input": {} if data is None else data}
    started = ok(await starter.call_tool("workflow_start", arguments))
    return str(started["workflowInstanceId"])


async def started_waiting(
    owner: McpTestClient,
    starter: McpTestClient,
    assignee: McpTestClient,
    text: str,
    data: Any = None,
) -> tuple[str, dict[str, Any]]:
    """Start text and wait until the run is WAITING on one task open in assignee's inbox."""
    instance = await start_run(owner, starter, text, data)
    handle = {"workflowInstanceId": instance}
    tasks: list[dict[str, Any]] = []

    async def waiting() -> bool:
        status = ok(await starter.call_tool("workflow_get_status", handle))
        if status["state"] != "WAITING":
            return False
        tasks[:] = ok(await assignee.call_tool("workflow_task_list", handle))["tasks"]
        return len(tasks) == 1

    await wait_until(waiting, what="the run WAITING on a task open to the assignee")
    return instance, tasks[0]


def nested_asks_yaml() -> str:
    """A start-run definition asking once per claim inside a `for` body (a nested ask), after a
    set in the same body, recording what each pass saw: a replay must not repeat either."""
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: claims\n"
        "  name: review-claims\n"
        '  version: "1.0.0"\n'
        "do:\n"
        "  - start:\n"
        "      set: {}\n"
        "      export:\n"
        "        as:\n"
        "          seen: ${ [] }\n"
        "          answers: ${ [] }\n"
        "  - review:\n"
        "      for:\n"
        "        each: claim\n"
        "        in: ${ workflow.input.claims }\n"
        "      do:\n"
        "        - note:\n"
        "            set: {}\n"
        "            export:\n"
        "              as:\n"
        "                seen: ${ context.seen + [claim] }\n"
        "        - decide:\n"
        "            ask:\n"
        '              prompt: ${ "Approve " + claim + "?" }\n'
        "              mode: input\n"
        "              assignment:\n"
        "                roleId: approver\n"
        "            export:\n"
        "              as:\n"
        "                answers: ${ context.answers + [output.value] }\n"
        "  - record:\n"
        "      set:\n"
        "        seen: ${ context.seen }\n"
        "        answers: ${ context.answers }\n"
    )
