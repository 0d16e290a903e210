"""Runs pages: the runs the caller started, one run with its steps, and cancel."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any

import msgspec
from litestar import Response, get, post
from litestar.datastructures import State

from runtime.collaborators import Services
from runtime.console.common import AnyRequest, acted, failure_page, viewed, with_caller
from runtime.console.guard import Caller
from runtime.console.render import SECURITY_HEADERS, page, redirect
from runtime.errors import WorkflowError
from runtime.invocation.started_runs import run_tasks, started_runs
from runtime.security import authorize_roles

PAGE_SIZE = 25
LIVE = ("ACCEPTED", "RUNNING", "WAITING")
CANCEL_NOTICES = {
    "cancelled": "The run was cancelled.",
    "cancellationRequested": "Cancellation was requested: the run stops at its next safe point.",
    "alreadyTerminal": "The run had already finished: nothing changed.",
}


def _cursor_text(before: tuple[datetime, str]) -> str:
    raw = f"{before[0].isoformat()}|{before[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _cursor(text: str | None) -> tuple[datetime, str] | None:
    """The keyset position an Older-runs link carries; anything unreadable starts over."""
    if not text or len(text) > 200:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
        when, _, process_id = raw.partition("|")
        return datetime.fromisoformat(when), str(uuid.UUID(process_id))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


@get("/runs")
async def runs_list(
    request: AnyRequest, state: State, before: str | None = None
) -> Response[bytes]:
    """The caller's start runs, newest first, as workflow_get_status would show each."""

    async def render(caller: Caller) -> Response[bytes]:
        services: Services = state.services
        security = services.settings.security
        values = with_caller(
            caller, nav="runs", runs=[], next_cursor=None, error=None, first_page=before is None
        )
        try:
            # The same roles as workflow_get_status: the page shows nothing it would not.
            authorize_roles(caller.context, "workflow_get_status", security)
            listed, following = await started_runs(
                services.database, caller.context, security, before=_cursor(before), limit=PAGE_SIZE
            )
        except WorkflowError as error:
            values["error"] = error.message
            return page("runs.html", 403, **values)
        values["runs"] = [msgspec.structs.asdict(run) for run in listed]
        values["next_cursor"] = None if following is None else _cursor_text(following)
        return page("runs.html", **values)

    return await viewed(request, state, render)


@get("/runs/{run_id:str}")
async def run_view(
    request: AnyRequest, state: State, run_id: str, cancel: str | None = None
) -> Response[bytes]:
    """One run: workflow_get_status, and its tasks' timeline."""

    async def render(caller: Caller) -> Response[bytes]:
        services: Services = state.services
        answer = await caller.calls("workflow_get_status", {"workflowInstanceId": run_id})
        if not answer.ok:
            return failure_page("Run not available", answer.code, answer.message, "/console/runs")
        try:
            tasks = await run_tasks(
                services.database, caller.context, services.settings.security, run_id
            )
        except WorkflowError as error:
            return failure_page("Run not available", error.code, error.message, "/console/runs")
        status: dict[str, Any] = answer.data
        live = status["state"] in LIVE
        if not live and request.headers.get("hx-trigger") == "run-state":
            # The live page's poll sees the run end: the whole page reloads (the cancel form goes).
            refresh = {**SECURITY_HEADERS, "HX-Refresh": "true"}
            return Response(b"", status_code=200, headers=refresh)
        return page(
            "run.html",
            **with_caller(
                caller,
                nav="runs",
                status=status,
                tasks=[msgspec.structs.asdict(task) for task in tasks],
                live=live,
                error=None,
                notice=CANCEL_NOTICES.get(cancel or ""),
            ),
        )

    return await viewed(request, state, render)


@post("/runs/{run_id:str}/cancel")
async def run_cancel(request: AnyRequest, state: State, run_id: str) -> Response[bytes]:
    """Cancel the run through workflow_cancel."""

    async def act(caller: Caller, form: dict[str, str]) -> Response[bytes]:
        arguments: dict[str, Any] = {"workflowInstanceId": run_id}
        if form.get("reason", "").strip():
            arguments["reason"] = form["reason"]
        answer = await caller.calls("workflow_cancel", arguments)
        if not answer.ok:
            return failure_page(
                "Cancel refused", answer.code, answer.message, f"/console/runs/{run_id}"
            )
        return redirect(f"/console/runs/{run_id}?cancel={answer.data['result']}")

    return await acted(request, state, act)
