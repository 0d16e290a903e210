"""The ingress: one delivered emission (or start-on-call args) acted on at most once per host.

E3: a duplicate gets the recorded outcome and starts nothing (the inbox row, keyed by
(host, emission_id)). E6/E13: run_terminal and source_resolution sent to us are refused: we hold
no Promises and have no lifecycle authority. E4: a tool_invocation (and a start) is admitted as
a call of the mapped Tool with the invocation id as its idempotency key, its arguments read
from the content store and checked against arguments_ref (E9). E10: invocation_cancellation
cancels the run and marks its reply as never to be sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from runtime.admission import Admission, admit_pushed_call
from runtime.errors import WorkflowError, input_invalid, policy_denied
from runtime.invocation import InvokeRequest
from runtime.invocation.waiting import cancel_run
from runtime.lightspeed import (
    ContractError,
    Envelope,
    Invocation,
    StartArgs,
    parse_envelope,
    parse_start_args,
)
from runtime.receiver import store
from runtime.receiver.ports import read_content
from runtime.receiver.settings import LightspeedSettings
from runtime.security import InvocationContext, Keyring
from runtime.store import Database


@dataclass(frozen=True)
class Bridge:
    """What the ingress needs: the database, admission and the bridge's settings and client."""

    db: Database
    keyring: Keyring
    admission: Admission
    settings: LightspeedSettings
    client: httpx.AsyncClient
    disclosure_ceiling: list[str] | None = None


def cancelled_by_holder() -> WorkflowError:
    """The stored error of a run whose Promise the session cancelled."""
    return WorkflowError(
        "WORKFLOW_CANCELLED",
        "the Lightspeed session cancelled the invocation",
        status="cancelled",
    )


def _refused(error: ContractError) -> WorkflowError:
    details = {"validation": {"path": error.field}} if error.field else None
    return input_invalid(str(error), details)


def parse(envelope: Any, start_args: Any) -> Envelope | StartArgs:
    """Exactly one of the two documents, parsed strictly (refusals name the field)."""
    if (envelope is None) == (start_args is None):
        raise input_invalid("pass exactly one of envelope and startArgs")
    try:
        if envelope is not None:
            return parse_envelope(envelope)
        return parse_start_args(start_args)
    except ContractError as error:
        raise _refused(error) from None


def _emission_id(document: Envelope | StartArgs) -> str:
    # A start is keyed by its invocation id too: one invocation, one run, however it arrives.
    if isinstance(document, StartArgs):
        return document.invocation.invocation_id
    return document.emission_id


async def deliver(
    bridge: Bridge, ctx: InvocationContext, document: Envelope | StartArgs
) -> tuple[dict[str, Any], bool]:
    """Act on one emission; (its outcome, whether it was a duplicate)."""
    emission_id = _emission_id(document)
    async with bridge.db.transaction(read_only=True) as conn:
        recorded = await store.select_outcome(conn, ctx.host_id, emission_id)
    if recorded is not None:
        return recorded, True
    if isinstance(document, StartArgs):
        return await _invoke(bridge, ctx, emission_id, document, document.invocation)
    kind = document.body.kind
    if kind == "run_terminal":
        raise policy_denied(
            "run_terminal goes only to a session's lifecycle controller; a workflow-mcp Tool"
            " is a tool receiver and has no lifecycle authority"
        )
    if kind == "source_resolution":
        raise policy_denied(
            "source_resolution resolves a Promise of its holder; a workflow-mcp receiver holds"
            " no Promises"
        )
    if kind == "invocation_cancellation":
        return await _cancel(bridge, ctx, document)
    assert document.body.invocation is not None
    return await _invoke(bridge, ctx, emission_id, document, document.body.invocation)


async def _receiver(
    bridge: Bridge, host_id: str, invocation: Invocation, universe: str
) -> store.Receiver:
    """The host's Tool whose active binding serves the invocation's tool id, for this universe."""
    async with bridge.db.transaction(read_only=True) as conn:
        found = await store.select_receivers(conn, host_id, invocation.tool_id)
    if not found:
        raise WorkflowError(
            "WORKFLOW_NOT_FOUND", f"no Tool here serves the Lightspeed tool {invocation.tool_id!r}"
        )
    if len(found) > 1:
        raise WorkflowError(
            "WORKFLOW_STATE_CONFLICT",
            f"more than one active Tool serves the Lightspeed tool {invocation.tool_id!r}",
        )
    [receiver] = found
    if universe not in receiver.universes or invocation.session_universe_id != universe:
        raise policy_denied(f"universe {universe} may not call {invocation.tool_id!r}")
    return receiver


async def _arguments(bridge: Bridge, invocation: Invocation) -> dict[str, Any]:
    data = await read_content(
        bridge.client, bridge.settings.content_store_url, invocation.arguments_ref
    )
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise input_invalid("arguments_ref: the arguments are not JSON") from None
    if not isinstance(value, dict):
        raise input_invalid("arguments_ref: the arguments are not a JSON object")
    return value


def _reply_route(document: Envelope | StartArgs, mapping: store.Receiver) -> tuple[str, str, str]:
    """(universe, holder workflow id, producer workflow id) of the invocation's reply."""
    if isinstance(document, StartArgs):
        return document.universe_id, document.holder_workflow_id, document.execution_id
    holder = document.body.fields["holder_workflow_id"]
    return document.producer.universe_id, holder, mapping.receiver_workflow_id


async def _invoke(
    bridge: Bridge,
    ctx: InvocationContext,
    emission_id: str,
    document: Envelope | StartArgs,
    invocation: Invocation,
) -> tuple[dict[str, Any], bool]:
    universe = (
        document.universe_id if isinstance(document, StartArgs) else document.producer.universe_id
    )
    mapping = await _receiver(bridge, ctx.host_id, invocation, universe)
    kind = "start" if isinstance(document, StartArgs) else "tool_invocation"
    async with bridge.db.transaction(read_only=True) as conn:
        cancelled = await store.cancellation_arrived(conn, ctx.host_id, invocation.invocation_id)
    if cancelled:
        # Its Promise is already terminal (E10): no run, and so no reply.
        outcome = {"emissionId": emission_id, "kind": kind, "outcome": "cancelled"}
        return await _record(
            bridge,
            store.Emission(
                host_id=ctx.host_id,
                emission_id=emission_id,
                kind=kind,
                invocation_id=invocation.invocation_id,
                outcome=outcome,
            ),
        )
    arguments = await _arguments(bridge, invocation)
    request = InvokeRequest(
        stable_tool_ref=mapping.stable_tool_ref,
        input=arguments,
        expected_definition_digest="",
        idempotency_key=invocation.invocation_id,
        disclosure_ceiling=bridge.disclosure_ceiling,
    )
    admitted = await admit_pushed_call(
        bridge.db, ctx, request, bridge.keyring, admission=bridge.admission
    )
    universe, holder, producer = _reply_route(document, mapping)
    outcome = {
        "emissionId": emission_id,
        "kind": kind,
        "outcome": "accepted",
        "workflowInstanceId": admitted.process_id,
    }
    emission = store.Emission(
        host_id=ctx.host_id,
        emission_id=emission_id,
        kind=kind,
        invocation_id=invocation.invocation_id,
        outcome=outcome,
        process_id=admitted.process_id,
        universe_id=universe,
        holder_workflow_id=holder,
        promise_id=invocation.reply_promise,
        producer_workflow_id=producer,
        reply_state="pending",
    )
    return await _record(bridge, emission)


async def _record(bridge: Bridge, emission: store.Emission) -> tuple[dict[str, Any], bool]:
    async with bridge.db.transaction() as conn:
        recorded = await store.insert_emission(conn, emission)
        if recorded is None:
            # A concurrent delivery of the same emission recorded it first (its admission
            # attached to the same run by the invocation id): that outcome is the answer.
            first = await store.select_outcome(conn, emission.host_id, emission.emission_id)
            assert first is not None
            return first, True
    return recorded, False


async def _cancel(
    bridge: Bridge, ctx: InvocationContext, envelope: Envelope
) -> tuple[dict[str, Any], bool]:
    invocation_id = envelope.body.fields["invocation_id"]
    async with bridge.db.transaction() as conn:
        # Marked first, in its own commit: whatever happens to the run, no reply follows.
        process_id = await store.cancel_reply(conn, ctx.host_id, invocation_id)
    outcome = {
        "emissionId": envelope.emission_id,
        "kind": "invocation_cancellation",
        "outcome": "cancelled" if process_id is not None else "ignored",
    }
    if process_id is not None:
        outcome["workflowInstanceId"] = process_id
        await cancel_run(bridge.db, ctx.host_id, process_id, cancelled_by_holder())
    emission = store.Emission(
        host_id=ctx.host_id,
        emission_id=envelope.emission_id,
        kind="invocation_cancellation",
        invocation_id=invocation_id,
        outcome=outcome,
        process_id=process_id,
    )
    return await _record(bridge, emission)
