"""Inbox and task pages: workflow_task_list, workflow_task_get, workflow_task_complete."""

from __future__ import annotations

from typing import Any

from litestar import Response, get, post
from litestar.datastructures import State

from runtime.console.common import (
    AnyRequest,
    acted,
    failure_page,
    new_operation_id,
    viewed,
    with_caller,
)
from runtime.console.guard import Caller
from runtime.console.render import page, redirect

PAGE_SIZE = 25
ANSWERED = "Your answer was recorded."


@get("/inbox")
async def inbox(request: AnyRequest, state: State, cursor: str | None = None) -> Response[bytes]:
    """The caller's open tasks, exactly what workflow_task_list returns."""

    async def render(caller: Caller) -> Response[bytes]:
        arguments: dict[str, Any] = {"state": "open", "limit": PAGE_SIZE}
        if cursor:
            arguments["cursor"] = cursor
        answer = await caller.calls("workflow_task_list", arguments)
        values = with_caller(caller, nav="inbox", tasks=[], next_cursor=None, error=None)
        if answer.ok:
            values |= {"tasks": answer.data["tasks"], "next_cursor": answer.data.get("nextCursor")}
        else:
            values["error"] = answer.message
        return page("inbox.html", 200 if answer.ok else 422, **values)

    return await viewed(request, state, render)


async def _task_page(
    caller: Caller, task_id: str, status: int = 200, **values: Any
) -> Response[bytes]:
    answer = await caller.calls("workflow_task_get", {"taskId": task_id})
    if not answer.ok:
        return failure_page("Task not available", answer.code, answer.message, "/console/inbox")
    values.setdefault("error", None)
    values.setdefault("code", None)
    values.setdefault("value", None)
    values.setdefault("comment", None)
    return page(
        "task.html",
        status,
        **with_caller(
            caller,
            nav="inbox",
            task=answer.data["task"],
            operation_id=values.pop("operation_id", None) or new_operation_id(),
            **values,
        ),
    )


@get("/tasks/{task_id:str}")
async def task_view(
    request: AnyRequest, state: State, task_id: str, answered: str | None = None
) -> Response[bytes]:
    """One task: its prompt, options as buttons, input field and comment."""

    async def render(caller: Caller) -> Response[bytes]:
        return await _task_page(caller, task_id, notice=ANSWERED if answered else None)

    return await viewed(request, state, render)


@post("/tasks/{task_id:str}")
async def task_answer(request: AnyRequest, state: State, task_id: str) -> Response[bytes]:
    """Answer a task through workflow_task_complete; a refusal is shown in words, unchanged."""

    async def act(caller: Caller, form: dict[str, str]) -> Response[bytes]:
        arguments: dict[str, Any] = {"taskId": task_id, "operationId": form.get("operationId", "")}
        if form.get("value"):
            arguments["value"] = form["value"]
        if form.get("comment", "").strip():
            arguments["comment"] = form["comment"]
        answer = await caller.calls("workflow_task_complete", arguments)
        if answer.ok:
            return redirect(f"/console/tasks/{task_id}?answered=1")
        # A new operationId: the refused answer must not pin the corrected one to its outcome.
        return await _task_page(
            caller,
            task_id,
            422,
            error=answer.message,
            code=answer.code,
            value=form.get("value"),
            comment=form.get("comment"),
        )

    return await acted(request, state, act)
