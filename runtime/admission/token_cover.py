"""workflow_start admission: a run that calls out needs a token that lasts, or an exchange."""

from __future__ import annotations

from datetime import datetime

from runtime.canonical import timestamp
from runtime.engine import WorkflowDefinition
from runtime.engine.check import worst_case_dispatches
from runtime.errors import WorkflowError
from runtime.security import InvocationContext


def check_token_covers_run(
    ctx: InvocationContext,
    definition: WorkflowDefinition,
    deadline: datetime,
    *,
    can_exchange: bool,
) -> None:
    """Refuse a start whose outbound calls would outlive the user's token with no exchange.

    Seed 000 checklist: a workflow_start run switches to an exchanged token near expiry. With
    no exchange endpoint configured that cannot happen, so a run that makes outbound calls and
    may run past the token's expiry would fail part-way; it is refused before it starts.
    """
    if can_exchange or ctx.user_token_expires_at >= deadline:
        return
    if worst_case_dispatches(definition) == 0:
        return
    raise WorkflowError(
        "WORKFLOW_START_REJECTED",
        f"the user token expires at {timestamp(ctx.user_token_expires_at)}, before the run's "
        f"deadline {timestamp(deadline)}, and the definition makes outbound calls; no token "
        "exchange endpoint is configured (security.run_credential.token_exchange)",
        details={
            "tokenExpiresAt": timestamp(ctx.user_token_expires_at),
            "deadline": timestamp(deadline),
        },
    )
