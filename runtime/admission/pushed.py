"""Admit a call of a Tool that answers elsewhere (a pushed Lightspeed invocation): no waiting.

The same admission as workflow_invoke (the active revision, caller policy, input checks,
capacity, the idempotency scope, the sealed credential), against the Tool's active revision as
it stands: the caller is a bridge that follows the Tool's head, not a client that pinned one.
The run's end is picked up by the bridge's reply job, so nothing here watches it.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from runtime import telemetry
from runtime.admission.invoke import Admitted, Sealed, _admit, _capacity_refusal, _Shedding
from runtime.admission.launch import seal_for
from runtime.admission.revisions import read_active_revision
from runtime.admission.state import Admission
from runtime.errors import WorkflowError
from runtime.invocation.requests import InvokeRequest
from runtime.security import InvocationContext, Keyring
from runtime.store import Database


async def admit_pushed_call(
    db: Database,
    ctx: InvocationContext,
    request: InvokeRequest,
    keyring: Keyring,
    *,
    admission: Admission,
) -> Admitted:
    """Admit (or re-attach to, or replay) the run of request.idempotency_key; return at once.

    The Tool must key calls by the caller's key (idempotencyKind explicit or business): a
    derived key would fold two invocations with equal arguments into one run.
    """
    revision = await read_active_revision(db, ctx.host_id, str(uuid.UUID(request.stable_tool_ref)))
    if revision.idempotency_kind == "derived":
        raise WorkflowError(
            "WORKFLOW_START_REJECTED",
            "a receiver Tool needs idempotencyKind explicit or business (the invocation id is"
            " its key)",
        )
    if revision.result_replay_ms <= 0:
        # A delivery whose answer was lost is delivered again, possibly after the run ended:
        # only a replay window lets that delivery find the run instead of starting another.
        raise WorkflowError(
            "WORKFLOW_START_REJECTED", "a receiver Tool needs a resultReplayMs above 0"
        )
    pinned = dataclasses.replace(
        request,
        expected_definition_digest=revision.definition_digest,
        expected_binding_digest=revision.binding_digest,
    )
    shedding = _Shedding(None, None)

    def check() -> None:
        shedding.arrival = admission.estimator.check_invoke(
            ctx.host_id, pinned.stable_tool_ref, pinned.expected_binding_digest, time.monotonic()
        )

    shedding.refusal = _capacity_refusal(check)
    process_id = str(uuid.uuid4())
    sealed = Sealed(process_id, seal_for(keyring, ctx, process_id))
    return await telemetry.admission(
        "invoke", _admit(db, admission, ctx, pinned, keyring, sealed, shedding)
    )
