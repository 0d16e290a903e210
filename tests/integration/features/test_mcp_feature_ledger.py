"""The development-feature stage ledger through POST /mcp with real tokens (issue 36, seed 004):
claim-and-start in one transaction, its refusals, acceptance, budgets, sign-off and the slot."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest

from runtime.collaborators import Services
from runtime.scheduler import Executor, faults
from runtime.security.devtools import DevIdentity
from tests.integration.conftest import app_on_pool
from tests.support.binding_builders import HOST
from tests.support.features import (
    accept_args,
    artifact_digest,
    create_args,
    run_finished,
    run_stage,
    save_stage,
    start_args,
)
from tests.support.invocation import client, ok, refused
from tests.support.mcp import McpTestClient

Admin = psycopg.AsyncConnection[Any]
RACERS = 20
OTHER_HOST = "0196a1b2-0000-7000-8000-00000000beef"


def _reason(result: dict[str, Any], code: str) -> str:
    return str(refused(result, code)["error"]["details"]["reason"])


async def _create(caller: McpTestClient, **extra: Any) -> dict[str, Any]:
    return ok(await caller.call_tool("workflow_feature_create", create_args(**extra)))["feature"]


async def _counts(admin: Admin) -> dict[str, int]:
    cursor = await admin.execute(
        "SELECT (SELECT count(*) FROM workflow_process WHERE host_id = %(h)s) AS runs,"
        " (SELECT count(*) FROM workflow_feature_claim WHERE host_id = %(h)s) AS claims",
        {"h": HOST},
    )
    row = await cursor.fetchone()
    assert row is not None
    return {name: int(value) for name, value in row.items()}


async def _feature(caller: McpTestClient, feature_run_id: str) -> dict[str, Any]:
    got = ok(await caller.call_tool("workflow_feature_get", {"featureRunId": feature_run_id}))
    return dict(got["feature"])


@pytest.mark.requirement("004:F8")
async def test_a_feature_runs_design_phase_and_finalize_to_completed_and_frees_the_slot(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    design = await save_stage(owner, "design", "one-fix")
    phase = await save_stage(owner, "implement-phase")
    final = await save_stage(owner, "finalize")
    feature = await _create(caller)
    fid = feature["featureRunId"]
    assert (feature["version"], feature["state"], feature["slotHeld"]) == (
        1,
        "ready-for-next-stage",
        True,
    )
    accepted = (await run_stage(caller, fid, 1, "design", design))["feature"]
    assert (accepted["version"], accepted["state"], accepted["activeClaim"]) == (
        2,
        "ready-for-next-stage",
        None,
    )
    assert accepted["acceptedInputs"]["design"]["digest"] == artifact_digest("design")
    [finding] = accepted["findings"]
    assert finding["status"] == "closed" and finding["findingId"].startswith("finding:")
    assert accepted["budgets"]["remediationUsed"] == {"design": 1}
    # Acceptance of a stage does not complete the feature (F8).
    after_phase = (await run_stage(caller, fid, 2, "implement-phase", phase, "p1"))["feature"]
    assert (after_phase["version"], after_phase["state"]) == (3, "ready-for-next-stage")
    done = (await run_stage(caller, fid, 3, "finalize", final))["feature"]
    assert (done["state"], done["version"], done["slotHeld"]) == ("completed", 4, False)
    # The slot is free: the next feature is admitted.
    assert (await _create(caller))["slotHeld"] is True


@asynccontextmanager
async def _features_locked(database_url: str) -> AsyncIterator[None]:
    """Hold workflow_feature_run in EXCLUSIVE mode (every FOR UPDATE waits) until the block ends."""
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute("LOCK TABLE workflow_feature_run IN EXCLUSIVE MODE")
        try:
            yield
        finally:
            await holder.rollback()


async def _lock_waiters(admin: Admin) -> int:
    cursor = await admin.execute(
        "SELECT count(*) AS n FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.requirement("004:F3")
async def test_twenty_identical_concurrent_stage_starts_admit_one_run(
    services: Services,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    caller: McpTestClient,
    admin: Admin,
    database_url: str,
) -> None:
    design = await save_stage(owner, "design")
    fid = (await _create(caller))["featureRunId"]
    args = start_args(fid, 1, "design", design)
    async with app_on_pool(services, database_url, 4, RACERS + 4) as (http, _):
        racer = client(http, dev_identity)
        async with _features_locked(database_url):
            # Different JSON-RPC ids, one operation: each call is its own request.
            tasks = [
                asyncio.create_task(racer.call_tool("workflow_feature_stage_start", args))
                for _ in range(RACERS)
            ]
            async with asyncio.timeout(60):
                while await _lock_waiters(admin) < RACERS:
                    assert not any(t.done() for t in tasks), [t.result() for t in tasks if t.done()]
                    await asyncio.sleep(0.02)
        answers = [ok(r) for r in await asyncio.gather(*tasks)]
    assert len({a["claim"]["workflowInstanceId"] for a in answers}) == 1
    assert sorted(a["outcome"] for a in answers) == ["new"] + ["replay"] * (RACERS - 1)
    assert await _counts(admin) == {"runs": 1, "claims": 1}


@pytest.mark.requirement("004:F3")
async def test_changed_inputs_for_a_claimed_transition_are_a_conflict(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    design = await save_stage(owner, "design")
    other = await save_stage(owner, "design")
    fid = (await _create(caller))["featureRunId"]
    ok(await caller.call_tool("workflow_feature_stage_start", start_args(fid, 1, "design", design)))
    changed = start_args(fid, 1, "design", other)
    reply = await caller.call_tool("workflow_feature_stage_start", changed)
    assert _reason(reply, "WORKFLOW_IDEMPOTENCY_CONFLICT") == "changed-inputs"
    assert await _counts(admin) == {"runs": 1, "claims": 1}


@pytest.mark.requirement("004:F1")
async def test_a_second_stage_while_one_owns_the_feature_is_a_conflicting_owner(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    design = await save_stage(owner, "design")
    plan = await save_stage(owner, "plan")
    fid = (await _create(caller))["featureRunId"]
    ok(await caller.call_tool("workflow_feature_stage_start", start_args(fid, 1, "design", design)))
    reply = await caller.call_tool("workflow_feature_stage_start", start_args(fid, 1, "plan", plan))
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "conflicting-owner"
    assert await _counts(admin) == {"runs": 1, "claims": 1}


@pytest.mark.requirement("004:F2")
async def test_a_stale_expected_version_and_a_phase_before_its_predecessor_are_refused(
    owner: McpTestClient, caller: McpTestClient, workers: Executor, admin: Admin
) -> None:
    design = await save_stage(owner, "design")
    phase = await save_stage(owner, "implement-phase")
    phases = [{"phaseId": "p1", "dependsOn": []}, {"phaseId": "p2", "dependsOn": ["p1"]}]
    fid = (await _create(caller, phases=phases))["featureRunId"]
    early = start_args(fid, 1, "implement-phase", phase, "p1")
    assert (
        _reason(
            await caller.call_tool("workflow_feature_stage_start", early), "WORKFLOW_STATE_CONFLICT"
        )
        == "dependency"
    )
    await run_stage(caller, fid, 1, "design", design)
    stale = start_args(fid, 1, "implement-phase", phase, "p1")
    reply = await caller.call_tool("workflow_feature_stage_start", stale)
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "stale-version"
    assert refused(reply, "WORKFLOW_STATE_CONFLICT")["error"]["details"]["currentVersion"] == 2
    before = start_args(fid, 2, "implement-phase", phase, "p2")
    reply = await caller.call_tool("workflow_feature_stage_start", before)
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "dependency"
    assert await _counts(admin) == {"runs": 1, "claims": 1}


@pytest.mark.requirement("004:F5")
async def test_a_plain_workflow_start_of_a_stage_definition_requires_a_stage_claim(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    phase = await save_stage(owner, "implement-phase")
    reply = await caller.call_tool("workflow_start", {"wfDefId": phase, "input": {}})
    assert _reason(reply, "WORKFLOW_START_REJECTED") == "requires-stage-claim"
    assert "requires a stage claim" in refused(reply, "WORKFLOW_START_REJECTED")["error"]["message"]
    assert await _counts(admin) == {"runs": 0, "claims": 0}


@pytest.mark.requirement("004:F12")
async def test_an_operation_id_reused_with_a_changed_request_is_a_conflict(
    caller: McpTestClient,
) -> None:
    args = create_args()
    first = ok(await caller.call_tool("workflow_feature_create", args))
    again = ok(await caller.call_tool("workflow_feature_create", args))
    assert again["outcome"] == "replay" and again["feature"] == first["feature"]
    changed = args | {"completionTarget": "merged"}
    reply = await caller.call_tool("workflow_feature_create", changed)
    assert _reason(reply, "WORKFLOW_IDEMPOTENCY_CONFLICT") == "changed-request"


@pytest.mark.requirement("004:F14")
async def test_a_replayed_acceptance_gives_identical_finding_ids(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    design = await save_stage(owner, "design", "one-fix")
    fid = (await _create(caller))["featureRunId"]
    started = ok(
        await caller.call_tool("workflow_feature_stage_start", start_args(fid, 1, "design", design))
    )
    claim = started["claim"]
    await run_finished(caller, claim["workflowInstanceId"])
    args = accept_args(fid, claim["stageExecutionId"])
    first = ok(await caller.call_tool("workflow_feature_stage_accept", args))
    again = ok(await caller.call_tool("workflow_feature_stage_accept", args))
    other_operation = ok(
        await caller.call_tool(
            "workflow_feature_stage_accept", accept_args(fid, claim["stageExecutionId"])
        )
    )
    assert first["outcome"] == "new"
    assert again["outcome"] == other_operation["outcome"] == "replay"
    assert again["feature"] == other_operation["feature"] == first["feature"]
    assert first["feature"]["version"] == 2


@pytest.mark.requirement("004:F17")
async def test_a_rejecting_review_needs_a_person_and_a_reopen_keeps_the_budget(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    rejecting = await save_stage(owner, "design", "rejecting")
    clean = await save_stage(owner, "design")
    fid = (await _create(caller, maximumRemediationRounds=0))["featureRunId"]
    held = (await run_stage(caller, fid, 1, "design", rejecting))["feature"]
    assert held["state"] == "human-resolution-required" and held["version"] == 2
    assert [f["status"] for f in held["findings"]] == ["open"]
    reply = await caller.call_tool(
        "workflow_feature_stage_start", start_args(fid, 2, "design", clean)
    )
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "human-resolution-required"
    reopen = {
        "operationId": create_args()["operationId"],
        "featureRunId": fid,
        "decision": "reopen",
    }
    reopened = ok(await caller.call_tool("workflow_feature_decide", reopen))["feature"]
    assert (reopened["state"], reopened["version"]) == ("ready-for-next-stage", 3)
    assert reopened["budgets"] == held["budgets"]


@pytest.mark.requirement("004:F16")
async def test_a_malformed_stage_result_is_never_an_acceptance(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    malformed = await save_stage(owner, "design", "malformed")
    fid = (await _create(caller))["featureRunId"]
    held = (await run_stage(caller, fid, 1, "design", malformed))["feature"]
    assert held["state"] == "human-resolution-required"
    assert "not a valid StageResult" in held["resolutionReason"]
    assert held["acceptedResults"] == []


@pytest.mark.requirement("004:F21")
async def test_a_second_feature_waits_for_the_slot_and_a_stale_cancel_is_refused(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    design = await save_stage(owner, "design")
    first = await _create(caller)
    fid = first["featureRunId"]
    reply = await caller.call_tool("workflow_feature_create", create_args())
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "slot-held"
    started = ok(
        await caller.call_tool("workflow_feature_stage_start", start_args(fid, 1, "design", design))
    )
    stale = {"operationId": create_args()["operationId"], "featureRunId": fid, "slotGeneration": 7}
    reply = await caller.call_tool("workflow_feature_cancel", stale)
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "stale-generation"
    current = stale | {
        "operationId": create_args()["operationId"],
        "slotGeneration": first["slotGeneration"],
    }
    cancelled = ok(await caller.call_tool("workflow_feature_cancel", current))["feature"]
    assert (cancelled["state"], cancelled["slotHeld"]) == ("cancelled", False)
    assert (await _create(caller))["slotGeneration"] == first["slotGeneration"] + 1
    # A late acceptance of the cancelled feature's run is refused.
    claim = started["claim"]
    await run_finished(caller, claim["workflowInstanceId"])
    late = accept_args(fid, claim["stageExecutionId"])
    reply = await caller.call_tool("workflow_feature_stage_accept", late)
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "feature-cancelled"


@pytest.mark.requirement("004:F19")
async def test_a_signoff_binds_the_exact_design_digest(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    design = await save_stage(owner, "design")
    fid = (await _create(caller, requireDesignSignoff=True))["featureRunId"]
    waiting = (await run_stage(caller, fid, 1, "design", design))["feature"]
    assert waiting["state"] == "awaiting-signoff"
    other = {
        "operationId": create_args()["operationId"],
        "featureRunId": fid,
        "decision": "approve",
        "designDigest": "sha256:" + "0" * 64,
    }
    reply = await caller.call_tool("workflow_feature_decide", other)
    assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "stale-signoff"
    right = other | {"designDigest": artifact_digest("design")}
    approved = ok(await caller.call_tool("workflow_feature_decide", right))
    assert approved["feature"]["state"] == "ready-for-next-stage"
    assert approved["feature"]["signoff"]["designDigest"] == artifact_digest("design")
    again = ok(await caller.call_tool("workflow_feature_decide", right))
    assert again["outcome"] == "replay" and again["feature"] == approved["feature"]


class _Crash(Exception):
    """Stands in for a process dying at a fault point."""


@pytest.mark.requirement("004:F7")
async def test_a_crash_before_the_stage_commit_leaves_no_claim_and_no_run(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    design = await save_stage(owner, "design")
    fid = (await _create(caller))["featureRunId"]

    async def crash() -> None:
        raise _Crash

    faults.set_hook("before_stage_commit", crash)
    try:
        reply = await caller.call_tool(
            "workflow_feature_stage_start", start_args(fid, 1, "design", design)
        )
    finally:
        faults.set_hook("before_stage_commit", None)
    refused(reply, "WORKFLOW_INVOCATION_UNAVAILABLE")
    assert await _counts(admin) == {"runs": 0, "claims": 0}
    feature = await _feature(caller, fid)
    assert (feature["version"], feature["activeClaim"]) == (1, None)


@pytest.mark.requirement("004:F7")
async def test_a_lost_answer_after_the_stage_commit_replays_the_same_run(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    design = await save_stage(owner, "design")
    fid = (await _create(caller))["featureRunId"]
    args = start_args(fid, 1, "design", design)

    async def crash() -> None:
        raise _Crash

    faults.set_hook("after_stage_commit", crash)
    try:
        # The answer is lost after the commit: the caller sees no receipt.
        lost = await caller.call_tool("workflow_feature_stage_start", args)
    finally:
        faults.set_hook("after_stage_commit", None)
    refused(lost, "WORKFLOW_INVOCATION_UNAVAILABLE")
    retried = ok(await caller.call_tool("workflow_feature_stage_start", args))
    assert retried["outcome"] == "replay"
    feature = await _feature(caller, fid)
    assert feature["activeClaim"]["workflowInstanceId"] == retried["claim"]["workflowInstanceId"]
    assert await _counts(admin) == {"runs": 1, "claims": 1}


@pytest.mark.requirement("004:F30")
async def test_the_feature_tools_take_workflow_starts_roles_and_stay_in_the_callers_host(
    http: httpx.AsyncClient, dev_identity: DevIdentity, caller: McpTestClient, admin: Admin
) -> None:
    stranger = client(http, dev_identity, "sam", roles=("genai-admin",))
    reply = await stranger.call_tool("workflow_feature_create", create_args())
    refused(reply, "WORKFLOW_POLICY_DENIED")
    fid = (await _create(caller))["featureRunId"]
    elsewhere = client(http, dev_identity, roles=("workflow-admin",), host_id=OTHER_HOST)
    reply = await elsewhere.call_tool("workflow_feature_get", {"featureRunId": fid})
    refused(reply, "WORKFLOW_NOT_FOUND")
    # The other host's slot is its own: a feature there does not wait for this one.
    assert (
        ok(await elsewhere.call_tool("workflow_feature_create", create_args()))["outcome"] == "new"
    )
    cursor = await admin.execute("SELECT count(*) AS n FROM workflow_feature_run")
    row = await cursor.fetchone()
    assert row is not None and row["n"] == 2


@pytest.mark.requirement("004:F4")
async def test_an_older_completed_claim_replays_its_receipt_and_starts_nothing(
    owner: McpTestClient, caller: McpTestClient, workers: Executor, admin: Admin
) -> None:
    design = await save_stage(owner, "design")
    fid = (await _create(caller))["featureRunId"]
    args = start_args(fid, 1, "design", design)
    first = ok(await caller.call_tool("workflow_feature_stage_start", args))
    await run_finished(caller, first["claim"]["workflowInstanceId"])
    accept = accept_args(fid, first["claim"]["stageExecutionId"])
    ok(await caller.call_tool("workflow_feature_stage_accept", accept))
    # The same transition again, under a new operation id, after the feature moved on.
    again = ok(
        await caller.call_tool(
            "workflow_feature_stage_start", args | {"operationId": str(uuid.uuid4())}
        )
    )
    assert again["outcome"] == "replay" and again["featureVersion"] == 2
    assert again["claim"] == first["claim"] | {"state": "accepted"}
    assert await _counts(admin) == {"runs": 1, "claims": 1}


@pytest.mark.requirement("004:F6")
async def test_a_result_not_bound_to_the_claims_inputs_is_not_accepted(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    unbound = await save_stage(owner, "design", "wrong-inputs")
    fid = (await _create(caller))["featureRunId"]
    held = (await run_stage(caller, fid, 1, "design", unbound))["feature"]
    assert held["state"] == "human-resolution-required"
    assert "input bindings" in held["resolutionReason"]
    assert held["acceptedResults"] == [] and "design" not in held["acceptedInputs"]


@pytest.mark.requirement("004:F22")
async def test_a_cancel_ends_the_active_stage_run_that_has_done_nothing_yet(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    design = await save_stage(owner, "design")
    feature = await _create(caller)
    fid = feature["featureRunId"]
    started = ok(
        await caller.call_tool("workflow_feature_stage_start", start_args(fid, 1, "design", design))
    )
    cancel = {
        "operationId": str(uuid.uuid4()),
        "featureRunId": fid,
        "slotGeneration": feature["slotGeneration"],
    }
    cancelled = ok(await caller.call_tool("workflow_feature_cancel", cancel))["feature"]
    assert (cancelled["state"], cancelled["activeClaim"], cancelled["version"]) == (
        "cancelled",
        None,
        2,
    )
    run = {"workflowInstanceId": started["claim"]["workflowInstanceId"]}
    assert ok(await caller.call_tool("workflow_get_status", run))["state"] == "CANCELLED"
    # The same cancel again replays its receipt; the slot stays free.
    again = ok(await caller.call_tool("workflow_feature_cancel", cancel))
    assert again["outcome"] == "replay" and again["feature"] == cancelled


@pytest.mark.requirement("004:F21")
async def test_racing_creates_give_the_slot_to_exactly_one_feature(
    services: Services, dev_identity: DevIdentity, admin: Admin, database_url: str
) -> None:
    racers = 10
    async with app_on_pool(services, database_url, 2, racers + 4) as (http, _):
        racer = client(http, dev_identity)
        async with await psycopg.AsyncConnection.connect(database_url) as holder:
            await holder.execute("LOCK TABLE workflow_feature_slot IN EXCLUSIVE MODE")
            tasks = [
                asyncio.create_task(racer.call_tool("workflow_feature_create", create_args()))
                for _ in range(racers)
            ]
            async with asyncio.timeout(60):
                while await _lock_waiters(admin) < racers:
                    assert not any(t.done() for t in tasks)
                    await asyncio.sleep(0.02)
            await holder.rollback()
        answers = await asyncio.gather(*tasks)
    created = [a for a in answers if a["isError"] is False]
    assert len(created) == 1
    assert {_reason(a, "WORKFLOW_STATE_CONFLICT") for a in answers if a["isError"]} == {"slot-held"}
    cursor = await admin.execute("SELECT count(*) AS n FROM workflow_feature_run")
    row = await cursor.fetchone()
    assert row is not None and row["n"] == 1


@pytest.mark.requirement("004:F18")
async def test_a_finalize_result_with_a_broad_uncovered_change_needs_a_person(
    owner: McpTestClient, caller: McpTestClient, workers: Executor
) -> None:
    design = await save_stage(owner, "design")
    broad = await save_stage(owner, "finalize", "broad")
    covered = await save_stage(owner, "finalize", "covered")
    fid = (await _create(caller, scope="design-only", phases=[]))["featureRunId"]
    await run_stage(caller, fid, 1, "design", design)
    held = (await run_stage(caller, fid, 2, "finalize", broad))["feature"]
    assert held["state"] == "human-resolution-required"
    assert held["resolutionReason"].startswith("review coverage:")
    reopen = {"operationId": str(uuid.uuid4()), "featureRunId": fid, "decision": "reopen"}
    ok(await caller.call_tool("workflow_feature_decide", reopen))
    done = (await run_stage(caller, fid, 4, "finalize", covered))["feature"]
    assert (done["state"], done["slotHeld"]) == ("completed", False)
