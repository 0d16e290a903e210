"""workflow_emission_deliver through POST /mcp: the Lightspeed receiver bridge (issue 37)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from examples.lightspeed_holder import invocation_envelope
from runtime.collaborators import Services
from runtime.lightspeed import content_ref, source_resolution_id
from runtime.receiver import LightspeedSettings, recover
from runtime.scheduler import faults
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST
from tests.support.cli import run_command
from tests.support.invocation import client, ok, publish_tool, refused
from tests.support.lightspeed_bridge import (
    ECHO,
    ECHO_TEXT,
    EXPLICIT,
    HOLDER_ID,
    RECEIVER_ID,
    SLOW,
    UNIVERSE,
    Holder,
    cancellation,
    configure,
    new_invocation_id,
    publish_receivers,
    pushed,
    receiver,
    reply_rounds,
    running_holder,
)
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

DELIVER = "workflow_emission_deliver"
OTHER_UNIVERSE = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
async def bridge(
    owner: McpTestClient, services: Services
) -> AsyncIterator[tuple[Holder, LightspeedSettings]]:
    with running_holder() as holder:
        await publish_receivers(owner)
        yield holder, configure(services, holder)


async def _deliver(caller: McpTestClient, envelope: dict[str, Any]) -> dict[str, Any]:
    return await caller.call_tool(DELIVER, {"envelope": envelope})


async def _replied(services: Services, settings: LightspeedSettings, holder: Holder) -> None:
    async def replied() -> bool:
        await reply_rounds(services, settings)
        return bool(holder.state.deliveries)

    await wait_until(replied, what="the reply reaching the holder", within_s=20)


async def _state(caller: McpTestClient, instance: str) -> str:
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    return str(status["state"])


@pytest.mark.requirement("003:E1")
@pytest.mark.requirement("003:E3")
@pytest.mark.requirement("003:E4")
@pytest.mark.requirement("003:E8")
@pytest.mark.requirement("003:E9")
@pytest.mark.requirement("003:E16")
async def test_a_pushed_invocation_sent_twice_runs_once_and_replies_once_with_the_derived_id(
    caller: McpTestClient,
    services: Services,
    workers: object,
    bridge: tuple[Holder, LightspeedSettings],
) -> None:
    holder, settings = bridge
    envelope, promise = pushed(holder, ECHO, {"text": "hi"})
    first = ok(await _deliver(caller, envelope))
    second = ok(await _deliver(caller, envelope))
    assert first["outcome"] == "accepted" and first["duplicate"] is False
    assert second == first | {"duplicate": True}
    assert first["emissionId"] == envelope["body"]["invocation"]["invocation_id"]
    await _replied(services, settings, holder)
    await reply_rounds(services, settings, rounds=2)
    [accepted] = holder.accepted()
    assert holder.verdicts() == ["accepted"]
    expected_id = source_resolution_id(UNIVERSE, RECEIVER_ID, HOLDER_ID, promise)
    assert accepted["emission_id"] == expected_id
    assert accepted["envelope"]["producer"] == {
        "kind": "workflow",
        "universe_id": UNIVERSE,
        "workflow_id": RECEIVER_ID,
    }
    payload_ref = holder.state.promises[promise].resolution["payload_ref"]  # type: ignore[index]
    assert holder.state.cas[payload_ref] == b'{"text":"hi"}'
    assert await _state(caller, first["workflowInstanceId"]) == "COMPLETED"


@pytest.mark.requirement("003:E3")
async def test_concurrent_deliveries_of_one_invocation_start_one_run(
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    bridge: tuple[Holder, LightspeedSettings],
) -> None:
    holder, _ = bridge
    racer = client(wide, dev_identity)
    envelope, _ = pushed(holder, SLOW, {})
    answers = [ok(r) for r in await asyncio.gather(*(_deliver(racer, envelope) for _ in range(6)))]
    assert len({a["workflowInstanceId"] for a in answers}) == 1
    assert sum(not a["duplicate"] for a in answers) == 1


@pytest.mark.requirement("003:E10")
async def test_a_cancellation_cancels_the_run_and_no_reply_follows(
    caller: McpTestClient,
    services: Services,
    workers: object,
    bridge: tuple[Holder, LightspeedSettings],
) -> None:
    holder, settings = bridge
    envelope, promise = pushed(holder, SLOW, {})
    instance = ok(await _deliver(caller, envelope))["workflowInstanceId"]
    holder.state.cancel_promise(promise)
    notice = ok(await _deliver(caller, cancellation(envelope)))
    assert notice["outcome"] == "cancelled" and notice["workflowInstanceId"] == instance
    assert ok(await _deliver(caller, cancellation(envelope))) == notice | {"duplicate": True}

    async def cancelled() -> bool:
        return await _state(caller, instance) == "CANCELLED"

    await wait_until(cancelled, what="the run cancelled")
    assert await reply_rounds(services, settings, rounds=2) == 0
    assert holder.state.deliveries == []
    assert (await recover(services.database, HOST, RECEIVER_ID)) == {"resolutions": {}}


@pytest.mark.requirement("003:E6")
@pytest.mark.requirement("003:E13")
@pytest.mark.parametrize("kind", ["run_terminal", "source_resolution"])
async def test_run_terminal_and_source_resolution_addressed_to_us_are_refused(
    caller: McpTestClient, bridge: tuple[Holder, LightspeedSettings], kind: str
) -> None:
    from tests.support.lightspeed import UNIVERSE as U

    producer: dict[str, Any] = {"kind": "workflow", "universe_id": U, "workflow_id": "w"}
    body: dict[str, Any] = {
        "kind": "source_resolution",
        "promise_id": "promise_1",
        "resolution": {"kind": "resolved", "payload_ref": None},
    }
    if kind == "run_terminal":
        producer = {"kind": "session", "universe_id": U, "session_id": "s", "log_seq": 1}
        body = {"kind": "run_terminal", "run_id": 1, "status": "completed", "token": "t"}
    envelope = {"emission_id": "emission:sha256:" + "1" * 64, "producer": producer, "body": body}
    refused(await _deliver(caller, envelope), "WORKFLOW_POLICY_DENIED")
    # Nothing recorded: a second delivery is refused again, not answered as a duplicate.
    refused(await _deliver(caller, envelope), "WORKFLOW_POLICY_DENIED")


@pytest.mark.requirement("003:E5")
@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("body.kind", "future_protocol_shape", "body.kind"),
        ("body.invocation.run_id", "7", "body.invocation.run_id"),
        ("body.invocation.completion_promises", {}, "body.invocation.completion_promises"),
    ],
)
async def test_a_malformed_envelope_is_refused_naming_the_field_and_starts_nothing(
    caller: McpTestClient,
    bridge: tuple[Holder, LightspeedSettings],
    path: str,
    value: Any,
    named: str,
) -> None:
    from tests.support.lightspeed import changed

    holder, _ = bridge
    envelope, _ = pushed(holder, ECHO, {"text": "hi"})
    body = refused(await _deliver(caller, changed(envelope, path, value)), "WORKFLOW_INPUT_INVALID")
    assert named in body["error"]["message"]
    # The well-formed envelope is still new: nothing was recorded for the malformed one.
    assert ok(await _deliver(caller, envelope))["duplicate"] is False


async def test_an_unmapped_tool_a_foreign_universe_and_tampered_arguments_are_refused(
    caller: McpTestClient, bridge: tuple[Holder, LightspeedSettings]
) -> None:
    holder, _ = bridge
    envelope, _ = pushed(holder, "demo.unknown.v1", {})
    refused(await _deliver(caller, envelope), "WORKFLOW_NOT_FOUND")
    ref = holder.put(b"{}")
    foreign = invocation_envelope(
        OTHER_UNIVERSE, "s", ECHO, ref, "promise_9", new_invocation_id(), 1
    )
    refused(await _deliver(caller, foreign), "WORKFLOW_POLICY_DENIED")
    # E9: the content store's bytes must be the reference's.
    envelope, _ = pushed(holder, ECHO, {"text": "hi"})
    ref = envelope["body"]["invocation"]["arguments_ref"]
    holder.state.cas[ref] = b'{"text":"tampered"}'
    body = refused(await _deliver(caller, envelope), "WORKFLOW_INPUT_INVALID")
    assert "arguments_ref" in body["error"]["message"]
    del holder.state.cas[ref]
    refused(await _deliver(caller, envelope), "WORKFLOW_NOT_FOUND")


async def test_the_receiver_is_the_tools_binding_and_two_tools_serving_one_id_are_ambiguous(
    owner: McpTestClient, caller: McpTestClient, bridge: tuple[Holder, LightspeedSettings]
) -> None:
    holder, _ = bridge
    # A Tool of the same definition without lightspeedReceiver serves nothing.
    await publish_tool(owner, text=ECHO_TEXT, idempotencyPolicy=EXPLICIT)
    envelope, _ = pushed(holder, ECHO, {"text": "hi"})
    assert ok(await _deliver(caller, envelope))["outcome"] == "accepted"
    await publish_tool(
        owner, text=ECHO_TEXT, idempotencyPolicy=EXPLICIT, lightspeedReceiver=receiver(ECHO)
    )
    envelope, _ = pushed(holder, ECHO, {"text": "hi"})
    refused(await _deliver(caller, envelope), "WORKFLOW_STATE_CONFLICT")


async def test_a_receiver_tool_keyed_by_derived_digests_or_without_a_replay_window_is_refused(
    owner: McpTestClient, caller: McpTestClient, bridge: tuple[Holder, LightspeedSettings]
) -> None:
    holder, _ = bridge
    # Two invocations with equal arguments would fold into one run under a derived key (E4).
    await publish_tool(owner, text=ECHO_TEXT, lightspeedReceiver=receiver("demo.derived.v1"))
    envelope, _ = pushed(holder, "demo.derived.v1", {"text": "hi"})
    body = refused(await _deliver(caller, envelope), "WORKFLOW_START_REJECTED")
    assert "idempotencyKind" in body["error"]["message"]
    # A redelivery after a lost answer must find the run, even after it ended (E3).
    await publish_tool(
        owner,
        text=ECHO_TEXT,
        idempotencyPolicy={"kind": "explicit", "resultReplayMs": 0},
        lightspeedReceiver=receiver("demo.no-replay.v1"),
    )
    envelope, _ = pushed(holder, "demo.no-replay.v1", {"text": "hi"})
    body = refused(await _deliver(caller, envelope), "WORKFLOW_START_REJECTED")
    assert "resultReplayMs" in body["error"]["message"]


@pytest.mark.requirement("003:E10")
async def test_a_cancellation_that_arrives_first_means_the_invocation_never_runs(
    caller: McpTestClient,
    services: Services,
    bridge: tuple[Holder, LightspeedSettings],
) -> None:
    holder, settings = bridge
    envelope, _ = pushed(holder, ECHO, {"text": "late"})
    early = ok(await _deliver(caller, cancellation(envelope)))
    assert early["outcome"] == "ignored" and "workflowInstanceId" not in early
    late = ok(await _deliver(caller, envelope))
    assert late["outcome"] == "cancelled" and "workflowInstanceId" not in late
    assert await reply_rounds(services, settings) == 0
    assert holder.state.deliveries == []


async def test_exactly_one_of_envelope_and_start_args_is_required(caller: McpTestClient) -> None:
    refused(await caller.call_tool(DELIVER, {}), "WORKFLOW_INPUT_INVALID")


@pytest.mark.requirement("003:E17")
@pytest.mark.parametrize("point", ["before_reply", "after_reply"])
async def test_a_reply_interrupted_before_or_after_its_send_is_re_sent_with_the_same_id(
    caller: McpTestClient,
    services: Services,
    workers: object,
    bridge: tuple[Holder, LightspeedSettings],
    point: str,
) -> None:
    holder, settings = bridge
    envelope, promise = pushed(holder, ECHO, {"text": "again"})
    instance = ok(await _deliver(caller, envelope))["workflowInstanceId"]

    async def ended() -> bool:
        return await _state(caller, instance) == "COMPLETED"

    await wait_until(ended, what="the run completed")

    async def crash() -> None:
        raise RuntimeError(f"crash at {point}")

    faults.set_hook(point, crash)
    try:
        with pytest.raises(RuntimeError, match="crash"):
            await reply_rounds(services, settings)
    finally:
        faults.set_hook(point, None)
    assert await reply_rounds(services, settings) == 1
    expected_id = source_resolution_id(UNIVERSE, RECEIVER_ID, HOLDER_ID, promise)
    sent = [d["emission_id"] for d in holder.state.deliveries]
    if point == "before_reply":
        assert holder.verdicts() == ["accepted"]
    else:
        # The first send reached the holder; the re-send is its duplicate, deduped there.
        assert holder.verdicts() == ["accepted", "duplicate"]
    assert set(sent) == {expected_id}
    payload = content_ref(b'{"text":"again"}')
    assert await recover(services.database, HOST, RECEIVER_ID) == {
        "resolutions": {"reply": {"kind": "resolved", "payload_ref": payload}}
    }


@pytest.mark.requirement("003:E7")
async def test_a_reply_to_a_promise_recorded_with_another_source_is_rejected_by_the_holder(
    caller: McpTestClient,
    services: Services,
    workers: object,
    bridge: tuple[Holder, LightspeedSettings],
) -> None:
    holder, settings = bridge
    envelope, promise = pushed(holder, ECHO, {"text": "hi"}, source="someone/else")
    ok(await _deliver(caller, envelope))
    await _replied(services, settings, holder)
    assert holder.verdicts() == ["rejected_foreign_producer"]
    assert holder.state.promises[promise].state == "pending"


@pytest.mark.requirement("003:E16")
@pytest.mark.requirement("003:E18")
async def test_start_args_run_the_tool_and_reply_as_the_execution(
    caller: McpTestClient,
    services: Services,
    workers: object,
    bridge: tuple[Holder, LightspeedSettings],
    database_url: str,
) -> None:
    holder, settings = bridge
    envelope, promise = pushed(holder, ECHO, {"text": "start"}, source="wte:demo-1")
    start = {
        "universe_id": UNIVERSE,
        "holder_workflow_id": HOLDER_ID,
        "execution_id": "wte:demo-1",
        "invocation": envelope["body"]["invocation"],
    }
    first = ok(await caller.call_tool(DELIVER, {"startArgs": start}))
    assert first["kind"] == "start"
    assert await _recover_cli(database_url, "wte:demo-1") == {"resolutions": {}}
    await _replied(services, settings, holder)
    [accepted] = holder.accepted()
    assert accepted["envelope"]["producer"]["workflow_id"] == "wte:demo-1"
    assert accepted["emission_id"] == source_resolution_id(
        UNIVERSE, "wte:demo-1", HOLDER_ID, promise
    )
    payload = holder.state.promises[promise].resolution["payload_ref"]  # type: ignore[index]
    assert holder.state.cas[payload] == b'{"text":"start"}'
    assert await _recover_cli(database_url, "wte:demo-1") == {
        "resolutions": {"reply": {"kind": "resolved", "payload_ref": payload}}
    }


async def _recover_cli(database_url: str, execution_id: str) -> Any:
    code, out, err = await run_command(
        "lightspeed", "recover", "--execution-id", execution_id, "--host", HOST,
        "--database-url", database_url,
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


@pytest.mark.requirement("003:E8")
async def test_the_reply_goes_to_holder_workflow_id_as_given_never_a_reconstructed_id(
    caller: McpTestClient,
    services: Services,
    workers: object,
    bridge: tuple[Holder, LightspeedSettings],
) -> None:
    holder, settings = bridge
    # The holder is another workflow than {universe}/{producing session}: only the given id
    # reaches it (a reconstructed one would be refused by the stand-in as an unknown workflow).
    holder.state.session_id = "bot:v1:elsewhere"
    envelope, promise = pushed(holder, ECHO, {"text": "there"})
    assert envelope["producer"]["session_id"] != holder.state.session_id
    envelope["body"]["holder_workflow_id"] = holder.state.workflow_id
    ok(await _deliver(caller, envelope))
    await _replied(services, settings, holder)
    [accepted] = holder.accepted()
    assert accepted["emission_id"] == source_resolution_id(
        UNIVERSE, RECEIVER_ID, holder.state.workflow_id, promise
    )
