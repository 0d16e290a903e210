"""Approvals and Tools pages: workflow_binding_list, _get, _decide, _revoke and _rollback."""

from __future__ import annotations

from typing import Any

from litestar import Response, get, post
from litestar.datastructures import State

from runtime.console.calls import Answer
from runtime.console.common import (
    AnyRequest,
    acted,
    failure_page,
    new_operation_id,
    viewed,
    with_caller,
)
from runtime.console.diff import changes, flatten
from runtime.console.guard import Caller
from runtime.console.render import page, redirect

PAGE_SIZE = 25
LIMIT_SECTIONS = ("runtimeBounds", "admissionLimits")
NOTICES = {
    "approved": "The revision was approved: it is the Tool's active revision now.",
    "rejected": "The revision was rejected.",
    "revoked": "The active revision was revoked.",
    "rolledBack": "The previous approved revision is active again.",
}


def _listing(caller: Caller, role: str, status: str, cursor: str | None) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "hostId": caller.host_id,
        "role": role,
        "status": status,
        "limit": PAGE_SIZE,
    }
    if cursor:
        arguments["cursor"] = cursor
    return arguments


@get("/approvals")
async def approvals(
    request: AnyRequest, state: State, cursor: str | None = None
) -> Response[bytes]:
    """Pending revisions of the definitions the caller owns."""

    async def render(caller: Caller) -> Response[bytes]:
        answer = await caller.calls(
            "workflow_binding_list", _listing(caller, "owner", "pendingApproval", cursor)
        )
        values = with_caller(caller, nav="approvals", items=[], next_cursor=None, error=None)
        values["pending_count"] = 0
        if not answer.ok:
            values["error"] = answer.message
            return page("approvals.html", 403, **values)
        values |= {
            "items": answer.data["items"],
            "next_cursor": answer.data.get("nextCursor"),
            "pending_count": answer.data["pendingCount"],
        }
        return page("approvals.html", **values)

    return await viewed(request, state, render)


@get("/tools")
async def tools(request: AnyRequest, state: State, cursor: str | None = None) -> Response[bytes]:
    """The active Tools the caller owns (the owner's listing, as workflow_binding_list pages it)."""

    async def render(caller: Caller) -> Response[bytes]:
        answer = await caller.calls(
            "workflow_binding_list", _listing(caller, "owner", "active", cursor)
        )
        values = with_caller(caller, nav="tools", items=[], next_cursor=None, error=None)
        if not answer.ok:
            values["error"] = answer.message
            return page("tools.html", 403, **values)
        values |= {"items": answer.data["items"], "next_cursor": answer.data.get("nextCursor")}
        return page("tools.html", **values)

    return await viewed(request, state, render)


async def _tool_page(
    caller: Caller, tool_id: str, binding_id: str | None, status: int = 200, **values: Any
) -> Response[bytes]:
    arguments = {"hostId": caller.host_id, "toolId": tool_id}
    if binding_id:
        arguments["bindingId"] = binding_id
    answer = await caller.calls("workflow_binding_get", arguments)
    if not answer.ok:
        return failure_page("Tool not available", answer.code, answer.message, "/console/tools")
    data = answer.data
    revision = data["revision"]
    active = data.get("activeRevision")
    comparing = active is not None and active["bindingId"] != revision["bindingId"]
    if not comparing and revision["status"] == "active":
        active = revision
    values.setdefault("error", None)
    values.setdefault("code", None)
    return page(
        "tool.html",
        status,
        **with_caller(
            caller,
            nav="approvals" if revision["status"] == "pendingApproval" else "tools",
            revision=revision,
            active=active,
            comparing=comparing or revision["status"] == "pendingApproval",
            changes=changes(
                active["binding"] if comparing and active is not None else None,
                revision["binding"],
            ),
            limits=_limits(revision["binding"]),
            decisions=data["decisions"],
            drift=data.get("drift"),
            operation_id=new_operation_id(),
            **values,
        ),
    )


def _limits(binding: dict[str, Any]) -> list[tuple[str, Any]]:
    """The revision's runtime bounds and admission limits, each leaf by its pointer."""
    shown = {name: binding[name] for name in LIMIT_SECTIONS if name in binding}
    return sorted(flatten(shown).items())


@get("/tools/{tool_id:str}")
async def tool_view(
    request: AnyRequest,
    state: State,
    tool_id: str,
    binding: str | None = None,
    done: str | None = None,
) -> Response[bytes]:
    """One Tool revision: digests, limits, drift, what changed, and the decisions it allows."""

    async def render(caller: Caller) -> Response[bytes]:
        return await _tool_page(caller, tool_id, binding, notice=NOTICES.get(done or ""))

    return await viewed(request, state, render)


def _pinned(form: dict[str, str], caller: Caller, *names: str) -> dict[str, Any]:
    """The arguments every decision form carries, pinned to the digest the person reviewed."""
    arguments: dict[str, Any] = {
        "hostId": caller.host_id,
        "expectedBindingDigest": form.get("expectedBindingDigest", ""),
        "operationId": form.get("operationId", ""),
    }
    for name in names:
        arguments[name] = form.get(name, "")
    if form.get("comment", "").strip():
        arguments["comment"] = form["comment"]
    return arguments


async def _after(
    caller: Caller, tool_id: str, form: dict[str, str], answer: Answer
) -> Response[bytes]:
    if answer.ok:
        shown = answer.data.get("bindingId", "")
        return redirect(f"/console/tools/{tool_id}?binding={shown}&done={answer.data['result']}")
    return await _tool_page(
        caller, tool_id, form.get("bindingId"), 422, error=answer.message, code=answer.code
    )


@post("/tools/{tool_id:str}/decide")
async def tool_decide(request: AnyRequest, state: State, tool_id: str) -> Response[bytes]:
    """Approve or reject the pending revision shown, pinned to its digest."""

    async def act(caller: Caller, form: dict[str, str]) -> Response[bytes]:
        arguments = _pinned(form, caller, "bindingId", "decision")
        return await _after(
            caller, tool_id, form, await caller.calls("workflow_binding_decide", arguments)
        )

    return await acted(request, state, act)


@post("/tools/{tool_id:str}/revoke")
async def tool_revoke(request: AnyRequest, state: State, tool_id: str) -> Response[bytes]:
    """Revoke the active revision shown."""

    async def act(caller: Caller, form: dict[str, str]) -> Response[bytes]:
        arguments = _pinned(form, caller, "bindingId")
        arguments.setdefault("comment", "")
        return await _after(
            caller, tool_id, form, await caller.calls("workflow_binding_revoke", arguments)
        )

    return await acted(request, state, act)


@post("/tools/{tool_id:str}/rollback")
async def tool_rollback(request: AnyRequest, state: State, tool_id: str) -> Response[bytes]:
    """Make the previous approved revision active again."""

    async def act(caller: Caller, form: dict[str, str]) -> Response[bytes]:
        arguments = _pinned(form, caller)
        arguments["toolId"] = tool_id
        arguments.setdefault("comment", "")
        return await _after(
            caller, tool_id, form, await caller.calls("workflow_binding_rollback", arguments)
        )

    return await acted(request, state, act)
