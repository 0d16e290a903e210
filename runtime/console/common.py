"""What every console page handler shares: the signed-in caller, a checked form, refusals."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Request, Response
from litestar.datastructures import State

from runtime.console.guard import Caller, form_ok, signed_in
from runtime.console.render import page, redirect

AnyRequest = Request[Any, Any, Any]
Page = Callable[[Caller], Awaitable[Response[bytes]]]
Action = Callable[[Caller, dict[str, str]], Awaitable[Response[bytes]]]

SIGN_IN = "/console/sign-in"
NOT_FOUND_CODES = ("WORKFLOW_NOT_FOUND",)


def new_operation_id() -> str:
    """The operationId a form carries: a resubmitted form repeats the same operation."""
    return str(uuid.uuid4())


async def viewed(request: AnyRequest, state: State, render: Page) -> Response[bytes]:
    """A page for the signed-in caller; anyone else goes to sign in."""
    caller = await signed_in(request, state)
    if caller is None:
        return redirect(SIGN_IN)
    return await render(caller)


def refused_form() -> Response[bytes]:
    """The answer to a POST without this session's CSRF token, or from another origin."""
    return page(
        "error.html",
        403,
        heading="Form refused",
        message="This form did not come from your console session (it may have expired): "
        "nothing was changed. Reload the page and try again.",
        code=None,
        back="/console/inbox",
    )


async def acted(request: AnyRequest, state: State, act: Action) -> Response[bytes]:
    """A form POST: signed in, same origin and carrying the session's CSRF token, or refused."""
    caller = await signed_in(request, state)
    form = await request.form()
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    # Without a session no token can match: the same refusal, never a redirect that acts.
    if caller is None or not form_ok(request, state, caller.session.nonce, fields):
        return refused_form()
    return await act(caller, fields)


def failure_page(heading: str, code: str | None, message: str | None, back: str) -> Response[bytes]:
    """A tool's refusal as a page, in words (404 for what the caller may not see)."""
    status = 404 if code in NOT_FOUND_CODES else 403 if code == "WORKFLOW_POLICY_DENIED" else 422
    return page("error.html", status, heading=heading, message=message or "", code=code, back=back)


def with_caller(caller: Caller, **values: Any) -> dict[str, Any]:
    """Template values every signed-in page needs (who, and their forms' CSRF token)."""
    return {"caller": caller, "csrf": caller.csrf, **values}
