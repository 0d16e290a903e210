"""MCP tasks over POST /mcp: the extension of 2026-07-28 and the experimental tasks of 2025-11-25.

A task follows a workflow_start run (its row: runtime.mcp_tasks). Every task method reads the
run through the tools a client could call itself, with the caller's own headers, so each rule of
those tools holds unchanged: workflow_get_status and workflow_get_result for the state and the
result, workflow_task_list for what the caller may answer, workflow_task_complete for an answer
(tasks/update), workflow_cancel for tasks/cancel. Nothing here waits on a task in the background.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from runtime import mcp_tasks
from runtime.collaborators import Services
from runtime.errors import AuthenticationError
from runtime.invocation.results import still_running
from runtime.mcp.bearer_gate import unauthenticated
from runtime.mcp.dispatch import SCOPE_TOKEN_HEADER, ToolOutcome, error_outcome
from runtime.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    JsonRpcFault,
)
from runtime.mcp.ports import ToolCalls
from runtime.mcp.protocol import LEGACY_VERSION, MODERN_VERSION
from runtime.mcp.tasks.shapes import (
    DEFAULT_TTL_MS,
    LIST_PAGE_SIZE,
    MIN_TTL_MS,
    RELATED_TASK_KEY,
    RESULT_WAIT_MS,
    TASK_TOOLS,
    InputRound,
    TaskState,
    created_at,
    detailed_task,
    elicitation,
    task_object,
)
from runtime.security import InvocationContext
from runtime.store import StoreUnavailable

log = logging.getLogger("workflow.mcp")
_OPERATION_IDS = uuid.UUID("6f1c3a52-35a1-4f5e-9d7b-3e5f0c2a9b35")


def _unknown() -> JsonRpcFault:
    # One answer for unknown, another caller's and another host's ids: no existence leak.
    return JsonRpcFault(INVALID_PARAMS, "Failed to retrieve task: Task not found")


def _expired() -> JsonRpcFault:
    return JsonRpcFault(INVALID_PARAMS, "Failed to retrieve task: Task has expired")


def _unavailable() -> JsonRpcFault:
    return JsonRpcFault(INTERNAL_ERROR, "the workflow store is unavailable; retry")


class TaskService:
    """The task methods of both revisions, on the service's own tools."""

    def __init__(
        self, dispatcher: ToolCalls, services: Services, *, page_size: int = LIST_PAGE_SIZE
    ) -> None:
        self.dispatcher = dispatcher
        self.services = services
        self.page_size = page_size

    # -- creation ---------------------------------------------------------------------------

    def task_support(self, name: str) -> str | None:
        """workflow_start may run as a task (optional); every other tool is sync."""
        return "optional" if name in TASK_TOOLS else None

    async def start(
        self,
        name: Any,
        arguments: Any,
        headers: Mapping[str, str],
        era: str,
        ttl_ms: Any = None,
        rounds: InputRound | None = None,
    ) -> ToolOutcome | dict[str, Any]:
        """Run the call; a started run becomes a task (its Task object), a refusal stays a result.

        workflow_start asks the client for nothing before it starts: rounds go unused (MRTR
        input before a start belongs to the Gateway's task-started routes, gateway.starts).
        The task row commits before this returns, so a tasks/get of it resolves on any replica.
        """
        ctx = self._authenticate(headers)
        outcome = await self.dispatcher.call(name, arguments, headers)
        instance = outcome.structured.get("workflowInstanceId")
        if outcome.is_error or not isinstance(instance, str):
            return outcome
        try:
            row = await mcp_tasks.create(
                self.services.database, ctx, instance, era, _ttl(ttl_ms, era)
            )
        except Exception as exc:
            # The run is accepted and runs on: say which, so no accepted work is lost to the
            # caller. Only the type is logged: a message may quote stored data.
            log.error("task row of run %s not stored: %s", instance, type(exc).__name__)
            raise JsonRpcFault(
                INTERNAL_ERROR,
                "the run started but its task could not be stored; follow the run with "
                "workflow_get_status",
                data={"workflowInstanceId": instance},
            ) from None
        created = created_at(row)
        return task_object(TaskState(row, "working", created, "The workflow run is accepted."), era)

    # -- the tasks/* methods ----------------------------------------------------------------

    async def answer(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str], era: str
    ) -> dict[str, Any]:
        """One tasks/* method of era (the server checked the method and the capability)."""
        task_id = params.get("taskId")
        if era == MODERN_VERSION:
            if method == "tasks/get":
                return detailed_task(await self.get(task_id, headers))
            if method == "tasks/update":
                await self.update(task_id, params.get("inputResponses"), headers)
                return {}
            await self.cancel(task_id, headers, era)
            return {}
        if method == "tasks/get":
            return task_object(await self.get(task_id, headers), era)
        if method == "tasks/result":
            return await self.result(task_id, headers)
        if method == "tasks/list":
            listed, next_cursor = await self.list(params.get("cursor"), headers)
            return (
                {"tasks": listed}
                if next_cursor is None
                else {"tasks": listed, "nextCursor": next_cursor}
            )
        return task_object(await self.cancel(task_id, headers, era), era)

    # -- reading ----------------------------------------------------------------------------

    async def get(self, task_id: Any, headers: Mapping[str, str]) -> TaskState:
        """The caller's task as it is now (working, input_required or terminal)."""
        ctx, row = await self._own(task_id, headers)
        return await self._observe(ctx, row, headers)

    async def list(
        self, cursor: Any, headers: Mapping[str, str]
    ) -> tuple[list[dict[str, Any]], str | None]:
        """tasks/list (2025-11-25): one page of the caller's own tasks of that revision."""
        ctx = self._authenticate(headers)
        try:
            rows, next_cursor = await mcp_tasks.list_own(
                self.services.database, ctx, LEGACY_VERSION, cursor, self.page_size
            )
        except mcp_tasks.BadCursor:
            raise JsonRpcFault(INVALID_PARAMS, "cursor is not a cursor of this list") from None
        except StoreUnavailable:
            raise _unavailable() from None
        tasks = []
        for row in rows:
            try:
                state = await self._observe(ctx, row, headers)
            except JsonRpcFault as fault:
                if fault.code != INVALID_PARAMS:
                    raise
                continue  # its run is gone or no longer the caller's: not listed
            tasks.append(task_object(state, LEGACY_VERSION))
        return tasks, next_cursor

    async def result(self, task_id: Any, headers: Mapping[str, str]) -> dict[str, Any]:
        """tasks/result (2025-11-25): the CallToolResult, waiting (bounded) for the run's end."""
        ctx, row = await self._own(task_id, headers)
        state = await self._observe(ctx, row, headers)
        if not state.terminal:
            handle = {"workflowInstanceId": row.process_id, "waitMs": RESULT_WAIT_MS}
            await self.dispatcher.call("workflow_wait_result", handle, headers)
            state = await self._observe(ctx, row, headers)
        if state.result is not None:
            outcome = state.result
        elif state.status == "cancelled":
            outcome = await self._tool(row, "workflow_get_result", headers)
        else:
            # Still running after the bounded wait: what a sync call answers at its wait's end.
            outcome = error_outcome(
                still_running(row.process_id, retryable=True, after_effect=False)
            )
        body = outcome.to_call_result()
        body["_meta"] = {RELATED_TASK_KEY: {"taskId": row.task_id}}
        return body

    # -- writing ----------------------------------------------------------------------------

    async def update(self, task_id: Any, responses: Any, headers: Mapping[str, str]) -> None:
        """tasks/update: each accepted response answers its human task via workflow_task_complete.

        A key is a human task of this task's run that the caller is an assignee of; any other
        key is ignored (the extension: unknown or superseded keys). An answer to a key already
        answered gets workflow_task_complete's own rules: the same answer again is acknowledged,
        a different one is its typed conflict.
        """
        _ctx, row = await self._own(task_id, headers)
        if not isinstance(responses, dict):
            raise JsonRpcFault(INVALID_PARAMS, "inputResponses must be an object")
        for key in sorted(responses):
            response = responses[key]
            if not isinstance(response, dict) or response.get("action") != "accept":
                continue  # declined or dismissed: the question stays open
            if not await self._is_key_of(row, key, headers):
                continue
            await self._answer(row, key, response.get("content"), headers)

    async def cancel(self, task_id: Any, headers: Mapping[str, str], era: str) -> TaskState:
        """tasks/cancel: request workflow_cancel (cooperative); the task as it is afterwards.

        A run whose cancellation policy refuses (disabled, or an effect already dispatched)
        goes on to its own end: the extension lets a server decline. 2025-11-25 refuses to
        cancel a task already terminal (-32602).
        """
        ctx, row = await self._own(task_id, headers)
        if era == LEGACY_VERSION:
            before = await self._observe(ctx, row, headers)
            if before.terminal:
                raise JsonRpcFault(
                    INVALID_PARAMS,
                    f"Cannot cancel task: already in terminal status '{before.status}'",
                )
        outcome = await self._tool(row, "workflow_cancel", headers)
        if outcome.is_error:
            code = outcome.structured["error"]["code"]
            if code == "WORKFLOW_NOT_FOUND":
                raise _unknown()
            if code not in ("WORKFLOW_POLICY_DENIED", "WORKFLOW_STATE_CONFLICT"):
                raise _unavailable()
        return await self._observe(ctx, row, headers)

    # -- helpers ----------------------------------------------------------------------------

    def _authenticate(self, headers: Mapping[str, str]) -> InvocationContext:
        try:
            return self.services.authenticator.authenticate(
                headers.get("authorization"), headers.get(SCOPE_TOKEN_HEADER)
            )
        except AuthenticationError as failure:
            raise unauthenticated(failure.message, headers) from None

    async def _own(
        self, task_id: Any, headers: Mapping[str, str]
    ) -> tuple[InvocationContext, mcp_tasks.TaskRow]:
        ctx = self._authenticate(headers)
        try:
            return ctx, await mcp_tasks.find(self.services.database, ctx, task_id)
        except mcp_tasks.TaskUnknown:
            raise _unknown() from None
        except mcp_tasks.TaskExpired:
            raise _expired() from None
        except StoreUnavailable:
            raise _unavailable() from None

    async def _tool(
        self, row: mcp_tasks.TaskRow, name: str, headers: Mapping[str, str]
    ) -> ToolOutcome:
        return await self.dispatcher.call(name, {"workflowInstanceId": row.process_id}, headers)

    async def _observe(
        self, ctx: InvocationContext, row: mcp_tasks.TaskRow, headers: Mapping[str, str]
    ) -> TaskState:
        status = await self._tool(row, "workflow_get_status", headers)
        if status.is_error:
            code = status.structured["error"]["code"]
            # The run is gone (retention) or no longer the caller's (a role lost): unknown.
            if code in ("WORKFLOW_NOT_FOUND", "WORKFLOW_POLICY_DENIED"):
                raise _unknown()
            raise _unavailable()
        document = status.structured
        run_state = document["state"]
        updated = max(document["updatedAt"], created_at(row))
        if run_state in ("COMPLETED", "FAILED"):
            result = await self._tool(row, "workflow_get_result", headers)
            failed = result.is_error and row.era == LEGACY_VERSION
            return TaskState(row, "failed" if failed else "completed", updated, result=result)
        if run_state == "CANCELLED":
            message = (document.get("error") or {}).get("message") or "The run was cancelled."
            return TaskState(row, "cancelled", updated, message)
        if run_state == "WAITING":
            return await self._waiting(ctx, row, updated, headers)
        return TaskState(row, "working", updated, "The workflow run is in progress.")

    async def _waiting(
        self,
        ctx: InvocationContext,
        row: mcp_tasks.TaskRow,
        updated: str,
        headers: Mapping[str, str],
    ) -> TaskState:
        """input_required when the caller may answer an open ask, else working and for whom."""
        listed = await self._tool(row, "workflow_task_list", headers)
        mine = [] if listed.is_error else list(listed.structured.get("tasks") or [])
        if mine:
            requests = {task["taskId"]: elicitation(task) for task in mine}
            message = "The workflow run waits for your answer."
            if row.era == LEGACY_VERSION:
                message += " Answer with workflow_task_complete: " + ", ".join(sorted(requests))
            return TaskState(row, "input_required", updated, message, requests)
        try:
            waiting = await mcp_tasks.waiting_on(
                self.services.database, ctx.host_id, row.process_id
            )
        except StoreUnavailable:
            raise _unavailable() from None
        whom = ", ".join(f"{a.assignee_kind} {a.assignee}" for a in waiting) or "a person"
        return TaskState(row, "working", updated, f"The workflow run waits for {whom}.")

    async def _is_key_of(
        self, row: mcp_tasks.TaskRow, key: str, headers: Mapping[str, str]
    ) -> bool:
        """Whether key is a human task of the task's run the caller may answer (assignee only)."""
        try:
            uuid.UUID(key)
        except ValueError:
            return False
        got = await self.dispatcher.call("workflow_task_get", {"taskId": key}, headers)
        if got.is_error:
            if got.structured["error"]["code"] == "WORKFLOW_NOT_FOUND":
                return False
            raise _unavailable()
        task = got.structured["task"]
        return bool(
            task["workflowInstanceId"] == row.process_id and task["state"] in ("open", "answered")
        )

    async def _answer(
        self, row: mcp_tasks.TaskRow, key: str, content: Any, headers: Mapping[str, str]
    ) -> None:
        if content is None:
            content = {}
        if not isinstance(content, dict):
            raise JsonRpcFault(INVALID_PARAMS, f"inputResponses.{key}.content must be an object")
        # One operation per (task, key): the same answer again is the stored receipt, another
        # answer the workflow_task_complete conflict.
        operation = str(uuid.uuid5(_OPERATION_IDS, f"{row.task_id}/{key}"))
        arguments: dict[str, Any] = {"taskId": key, "operationId": operation}
        for field in ("value", "comment"):
            if field in content:
                arguments[field] = content[field]
        outcome = await self.dispatcher.call("workflow_task_complete", arguments, headers)
        if outcome.is_error:
            error = outcome.structured["error"]
            if error["code"] == "WORKFLOW_INVOCATION_UNAVAILABLE":
                raise _unavailable()
            raise JsonRpcFault(
                INVALID_PARAMS,
                f"input response {key} refused: {outcome.text}",
                data={"key": key, "error": {"code": error["code"], "message": error["message"]}},
            )


def _ttl(requested: Any, era: str) -> int:
    """The task's time to live: the default, or (2025-11-25) the client's within bounds."""
    if era == MODERN_VERSION or not isinstance(requested, int) or isinstance(requested, bool):
        return DEFAULT_TTL_MS
    return max(MIN_TTL_MS, min(requested, DEFAULT_TTL_MS))
