"""Compensations in the interpreter: what a write ledgers for its undo, and running the undo.

A write task with `compensate:` hands the effect port a mark (compensation_marks) that is
ledgered with the write. After the run failed, the
durable runtime (runtime.execution.compensation) rebuilds the task's output from the ledger
and runs the compensation body here with that output as its input, ``workflow.input`` and the
marked context: the same data flow, expressions and effect port as any task list.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from runtime.engine.model import (
    HttpCallSpec,
    McpCallSpec,
    Task,
    WorkflowDefinition,
    walk_tasks,
)
from runtime.engine.run.call_dispatch import http_output_of
from runtime.engine.run.faults import WorkflowFault
from runtime.engine.run.interpreter import EndWorkflow, Interpreter
from runtime.engine.run.ports import Clock, EffectPort, HttpRequest, HttpResponse, RunLimits
from runtime.engine.run.state import RunState


def compensated_task(definition: WorkflowDefinition, pointer: str) -> Task | None:
    """The write task at pointer when it carries `compensate:`."""
    for task in walk_tasks(definition.tasks):
        if task.pointer == pointer and task.compensate is not None:
            return task
    return None


def needs_run_credential(task: Task) -> bool:
    """Whether task's compensation calls with the run's user token: any MCP call (its Gateway
    call carries the token), or an HTTP call authenticated with runCredential."""
    assert task.compensate is not None
    for each in walk_tasks(task.compensate.body):
        spec = each.spec
        if isinstance(spec, McpCallSpec):
            return True
        credential = spec.credential if isinstance(spec, HttpCallSpec) else None
        if credential is not None and credential.scheme == "runCredential":
            return True
    return False


class NothingToUndo(Exception):
    """The recorded call was refused (a non-2xx answer, an MCP tool error): nothing happened."""


def recorded_output(task: Task, record: Any) -> Any:
    """The task's call output rebuilt from its ledgered record (the compensation's input)."""
    spec = task.spec
    if isinstance(spec, HttpCallSpec):
        response = HttpResponse(
            status_code=int(record["statusCode"]),
            headers=dict(record["headers"]),
            body=base64.b64decode(record["body"]),
        )
        accepted = 200 <= response.status_code < 300 or (
            spec.redirect and 300 <= response.status_code < 400
        )
        if not accepted:
            raise NothingToUndo(f"the write was refused with HTTP status {response.status_code}")
        request = HttpRequest(
            task=task.pointer, method=spec.method, uri=spec.endpoint, headers={}, query={},
            body=None, redirect=spec.redirect, authentication=spec.authentication, write=True,
        )  # fmt: skip
        return http_output_of(spec, request, response)
    if isinstance(spec, McpCallSpec):
        if not isinstance(record, dict) or record.get("isError") is True:
            raise NothingToUndo(f"tool {spec.tool} answered with an error")
        return dict(record)
    raise NothingToUndo("the task does not write")


@dataclass(frozen=True)
class CompensationRun:
    """The outcome of one compensation body: its fault's problem, or None when it succeeded."""

    problem: dict[str, Any] | None


async def run_compensation(
    definition: WorkflowDefinition,
    task: Task,
    data: Any,
    context: dict[str, Any],
    workflow_input: Any,
    effects: EffectPort,
    limits: RunLimits,
    clock: Clock,
) -> CompensationRun:
    """Run task's compensation body on data (its recorded output) with the marked context."""
    assert task.compensate is not None
    state = RunState(position=0, data=data, context=context, workflow_input=workflow_input)
    runner = Interpreter(definition, state, effects, limits, clock)
    try:
        await runner.run_list(task.compensate.body, data, {})
    except EndWorkflow:
        pass  # `then: end` inside a compensation ends the compensation, not a failure
    except WorkflowFault as exc:
        return CompensationRun(dict(exc.problem))
    return CompensationRun(None)
