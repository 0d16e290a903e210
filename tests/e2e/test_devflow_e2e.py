"""Seed 004's stage-handoff contract end to end (issue 36 "Done when"; seeds-003-004.md 4.2):
Workflow (`workflow-mcp serve`), the reference Gateway (`workflow-mcp gateway`, what `make
gateway` runs) and the scripted agents (`python -m examples.devflow.agents`) as processes; every
call goes through the Gateway's /mcp with a real user bearer only. In the kill -9 cases one
Gateway stays up while Workflow is killed and restarted on the same port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from runtime.canonical import definition_digest
from runtime.security.devtools import DEV_HOST_ID, DevIdentity
from tests.support.devflow import stage_text
from tests.support.features import accept_args, create_args, run_finished, start_args
from tests.support.gateway import run_gateway
from tests.support.invocation import ok, refused
from tests.support.mcp import MODERN, McpTestClient
from tests.support.server import REPO_ROOT, LiveServer, free_port, run_server
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

RACERS = 20
ENV = ("WORKFLOW_EXECUTION_OUTBOUND_HTTP_ALLOWLIST", "WORKFLOW_FAULTS")


@contextmanager
def _agents(scenario: str, log: Path) -> Iterator[str]:
    """The scripted agents as their own process; their origin."""
    port = free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "examples.devflow.agents", "--port", str(port),
             "--scenario", scenario],
            cwd=REPO_ROOT, stdout=output, stderr=output, start_new_session=True,
        )  # fmt: skip
    origin = f"http://127.0.0.1:{port}"
    try:
        yield origin
    finally:
        process.terminate()
        process.wait(timeout=15)


@contextmanager
def _workflow(database_url: str, directory: Path, identity: DevIdentity, agents: str,
              faults: str = "", port: int | None = None) -> Iterator[LiveServer]:  # fmt: skip
    """Workflow as a process allowed to call the agents, with fault points configured."""
    directory.mkdir(parents=True)
    saved = {name: os.environ.get(name) for name in ENV}
    os.environ[ENV[0]] = json.dumps([agents])
    os.environ[ENV[1]] = faults
    with ExitStack() as stack:
        try:
            # run_server hands the environment to the process as it starts.
            server = stack.enter_context(run_server(database_url, directory, identity, port=port))
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        yield server


def _client(
    http: httpx.AsyncClient, identity: DevIdentity, user: str = "dev-lead"
) -> McpTestClient:
    """A user with only the user bearer (the Gateway adds its own application bearer)."""
    token = identity.user_token(
        host_id=DEV_HOST_ID, user_id=user, roles=("admin", "workflow-admin")
    )
    return McpTestClient(http, MODERN, {"Authorization": f"Bearer {token}"})


async def _save(user: McpTestClient, kind: str, agents: str) -> str:
    """Save an example stage definition's head; its wfDefId."""
    text = stage_text(kind, agents)
    wf_def_id = str(uuid.uuid4())
    args = {
        "hostId": DEV_HOST_ID, "wfDefId": wf_def_id, "sourceRevision": 1, "actor": "dev-lead",
        "namespace": "devflow", "name": f"feature-{kind}", "version": "1.0.0",
        "definition": text, "lifecycleStatus": "PUBLISHED", "catalogVisible": False,
        "owner": {"userId": "dev-lead", "positionId": "lead"}, "active": True,
    }  # fmt: skip
    saved = ok(await user.call_tool("workflow_definition_save", args))
    assert saved["definitionDigest"] == definition_digest(text), saved
    return wf_def_id


def _reason(result: dict[str, Any], code: str) -> str:
    return str(refused(result, code)["error"]["details"]["reason"])


async def _accept(user: McpTestClient, feature: str, claim: dict[str, Any]) -> dict[str, Any]:
    state = await run_finished(user, claim["workflowInstanceId"])
    assert state == "COMPLETED", state
    args = accept_args(feature, claim["stageExecutionId"])
    return dict(ok(await user.call_tool("workflow_feature_stage_accept", args))["feature"])


@asynccontextmanager
async def _gateway_stack(
    database_url: str, tmp_path: Path, identity: DevIdentity, scenario: str
) -> AsyncIterator[tuple[McpTestClient, str]]:
    with ExitStack() as stack:
        agents = stack.enter_context(_agents(scenario, tmp_path / "agents.log"))
        workflow = stack.enter_context(
            _workflow(database_url, tmp_path / "workflow", identity, agents)
        )
        gateway = stack.enter_context(
            run_gateway(tmp_path / "gateway", identity, workflow.mcp_url,
                        tmp_path / "mcp-router.yml", host_id=DEV_HOST_ID)
        )  # fmt: skip
        async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60.0) as http:
            yield _client(http, identity), agents


@pytest.mark.requirement("004:F3")
async def test_a_feature_through_the_gateway_to_completed_with_every_refusal(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    async with _gateway_stack(database_url, tmp_path, live_identity, "accept-after-one-fix") as (
        user,
        agents,
    ):
        design, phase, final = [await _save(user, k, agents) for k in
                                ("design", "implement-phase", "finalize")]  # fmt: skip
        phases = [{"phaseId": "p1", "dependsOn": []}, {"phaseId": "p2", "dependsOn": ["p1"]}]
        feature = ok(await user.call_tool("workflow_feature_create", create_args(phases=phases)))
        fid = feature["feature"]["featureRunId"]
        generation = feature["feature"]["slotGeneration"]
        # A plain workflow_start of a stage definition is refused.
        plain = await user.call_tool("workflow_start", {"wfDefId": phase, "input": {}})
        assert _reason(plain, "WORKFLOW_START_REJECTED") == "requires-stage-claim"
        # A phase before the design is accepted.
        early = start_args(fid, 1, "implement-phase", phase, "p1")
        reply = await user.call_tool("workflow_feature_stage_start", early)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "dependency"
        # 20 identical concurrent stage starts (each its own JSON-RPC request): one run.
        args = start_args(fid, 1, "design", design)
        answers = [ok(r) for r in await asyncio.gather(
            *(user.call_tool("workflow_feature_stage_start", args) for _ in range(RACERS))
        )]  # fmt: skip
        assert len({a["claim"]["workflowInstanceId"] for a in answers}) == 1
        assert sorted(a["outcome"] for a in answers) == ["new"] + ["replay"] * (RACERS - 1)
        claim = answers[0]["claim"]
        # Changed inputs for the claimed transition, and a second stage while design owns.
        changed = start_args(fid, 1, "design", final)
        reply = await user.call_tool("workflow_feature_stage_start", changed)
        assert _reason(reply, "WORKFLOW_IDEMPOTENCY_CONFLICT") == "changed-inputs"
        owner = start_args(fid, 1, "plan", phase)
        reply = await user.call_tool("workflow_feature_stage_start", owner)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "conflicting-owner"
        # A second feature waits for the slot.
        reply = await user.call_tool("workflow_feature_create", create_args())
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "slot-held"
        accepted = await _accept(user, fid, claim)
        assert (accepted["version"], accepted["state"], accepted["activeClaim"]) == (
            2, "ready-for-next-stage", None,
        )  # fmt: skip
        [finding] = accepted["findings"]
        assert finding["status"] == "closed"
        # Replaying the acceptance gives identical finding ids.
        replay = accept_args(fid, claim["stageExecutionId"])
        again = ok(await user.call_tool("workflow_feature_stage_accept", replay))
        assert again["outcome"] == "replay" and again["feature"]["findings"] == [finding]
        inputs = {"requirements": accepted["acceptedInputs"]["requirements"],
                  "design": accepted["acceptedInputs"]["design"]}  # fmt: skip
        stale = start_args(fid, 1, "implement-phase", phase, "p1") | {"inputs": inputs}
        reply = await user.call_tool("workflow_feature_stage_start", stale)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "stale-version"
        p2 = start_args(fid, 2, "implement-phase", phase, "p2") | {"inputs": inputs}
        reply = await user.call_tool("workflow_feature_stage_start", p2)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "dependency"
        version = 2
        for kind, wf_def_id, phase_id in (
            ("implement-phase", phase, "p1"), ("implement-phase", phase, "p2"),
            ("finalize", final, None),
        ):  # fmt: skip
            step = start_args(fid, version, kind, wf_def_id, phase_id) | {"inputs": inputs}
            started = ok(await user.call_tool("workflow_feature_stage_start", step))
            feature_now = await _accept(user, fid, started["claim"])
            version = feature_now["version"]
        assert (feature_now["state"], feature_now["slotHeld"]) == ("completed", False)
        # A stale cancel of a finished feature is refused; the slot is free for the next one.
        cancel = {"operationId": str(uuid.uuid4()), "featureRunId": fid,
                  "slotGeneration": generation}  # fmt: skip
        reply = await user.call_tool("workflow_feature_cancel", cancel)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "feature-terminal"
        signed = create_args(requireDesignSignoff=True)
        sid = ok(await user.call_tool("workflow_feature_create", signed))["feature"]["featureRunId"]
        stale_cancel = cancel | {"operationId": str(uuid.uuid4()), "featureRunId": sid}
        reply = await user.call_tool("workflow_feature_cancel", stale_cancel)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "stale-generation"
        # Sign-off binds the exact design digest.
        started = ok(await user.call_tool("workflow_feature_stage_start",
                                          start_args(sid, 1, "design", design)))  # fmt: skip
        waiting = await _accept(user, sid, started["claim"])
        assert waiting["state"] == "awaiting-signoff"
        decide = {"operationId": str(uuid.uuid4()), "featureRunId": sid, "decision": "approve",
                  "designDigest": "sha256:" + "0" * 64}  # fmt: skip
        reply = await user.call_tool("workflow_feature_decide", decide)
        assert _reason(reply, "WORKFLOW_STATE_CONFLICT") == "stale-signoff"
        right = decide | {"designDigest": waiting["acceptedInputs"]["design"]["digest"]}
        approved = ok(await user.call_tool("workflow_feature_decide", right))["feature"]
        assert approved["state"] == "ready-for-next-stage"


@pytest.mark.requirement("004:F17")
async def test_never_accept_through_the_gateway_needs_a_person_and_reopen_keeps_the_budget(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    async with _gateway_stack(database_url, tmp_path, live_identity, "never-accept") as (
        user,
        agents,
    ):
        design = await _save(user, "design", agents)
        fid = ok(await user.call_tool("workflow_feature_create", create_args()))["feature"][
            "featureRunId"
        ]
        started = ok(await user.call_tool("workflow_feature_stage_start",
                                          start_args(fid, 1, "design", design)))  # fmt: skip
        held = await _accept(user, fid, started["claim"])
        assert held["state"] == "human-resolution-required"
        assert held["budgets"]["remediationUsed"] == {"design": 3}
        jobs = httpx.get(f"{agents}/jobs", timeout=10).json()["jobs"]
        assert [j["round"] for j in jobs if j["role"] == "reviewer"] == [0, 1, 2, 3]
        reopen = {"operationId": str(uuid.uuid4()), "featureRunId": fid, "decision": "reopen"}
        reopened = ok(await user.call_tool("workflow_feature_decide", reopen))["feature"]
        assert reopened["budgets"]["remediationUsed"] == {"design": 3}
        again = ok(await user.call_tool("workflow_feature_stage_start",
                                        start_args(fid, 3, "design", design)))  # fmt: skip
        assert again["claim"]["stageExecutionId"] != started["claim"]["stageExecutionId"]
        held = await _accept(user, fid, again["claim"])
        assert held["state"] == "human-resolution-required"
        assert held["budgets"]["remediationUsed"] == {"design": 3}
        jobs = httpx.get(f"{agents}/jobs", timeout=10).json()["jobs"]
        assert [j["round"] for j in jobs if j["role"] == "reviewer"] == [0, 1, 2, 3, 0]


async def _died(server: LiveServer) -> None:
    await wait_until(
        lambda: server.process is not None and server.process.poll() is not None,
        what="the service killed at its fault point", within_s=30,
    )  # fmt: skip
    assert server.process is not None and server.process.returncode == -signal.SIGKILL


async def _rows(database_url: str, feature: str) -> tuple[int, int]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT (SELECT count(*) FROM workflow_feature_claim WHERE feature_run_id = %(f)s),"
            " (SELECT count(*) FROM workflow_process)",
            {"f": feature},
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def _unanswered(user: McpTestClient, name: str, args: dict[str, Any]) -> None:
    """A call whose Workflow is killed mid-way: the Gateway answers it unavailable."""
    try:
        result = await user.call_tool(name, args)
    except httpx.TransportError:
        return
    refused(result, "WORKFLOW_INVOCATION_UNAVAILABLE")


@pytest.mark.requirement("004:F7")
async def test_kill_9_after_the_stage_commit_replays_and_before_it_leaves_nothing(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    # One Gateway stays up; Workflow is killed at a fault point and restarted on its port.
    port = free_port()
    with ExitStack() as stack:
        agents = stack.enter_context(_agents("accept-after-one-fix", tmp_path / "agents.log"))
        with _workflow(database_url, tmp_path / "first", live_identity, agents,
                       "after_stage_commit=kill", port=port) as first:  # fmt: skip
            gateway = stack.enter_context(
                run_gateway(tmp_path / "gateway", live_identity, first.mcp_url,
                            tmp_path / "mcp-router.yml", host_id=DEV_HOST_ID)
            )  # fmt: skip
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60.0) as http:
                user = _client(http, live_identity)
                design = await _save(user, "design", agents)
                feature = ok(await user.call_tool("workflow_feature_create", create_args()))
                fid = feature["feature"]["featureRunId"]
                generation = feature["feature"]["slotGeneration"]
                args = start_args(fid, 1, "design", design)
                await _unanswered(user, "workflow_feature_stage_start", args)
                await _died(first)
        with _workflow(database_url, tmp_path / "second", live_identity, agents,
                       "before_stage_commit=kill", port=port) as second:  # fmt: skip
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60.0) as http:
                user = _client(http, live_identity)
                # The committed claim answers the retry with the same run.
                retried = ok(await user.call_tool("workflow_feature_stage_start", args))
                assert retried["outcome"] == "replay"
                assert await _rows(database_url, fid) == (1, 1)
                assert (
                    await run_finished(user, retried["claim"]["workflowInstanceId"]) == "COMPLETED"
                )
                cancel = {"operationId": str(uuid.uuid4()), "featureRunId": fid,
                          "slotGeneration": generation}  # fmt: skip
                ok(await user.call_tool("workflow_feature_cancel", cancel))
                other = ok(await user.call_tool("workflow_feature_create", create_args()))
                oid = other["feature"]["featureRunId"]
                await _unanswered(user, "workflow_feature_stage_start",
                                  start_args(oid, 1, "design", design))  # fmt: skip
                await _died(second)
        with _workflow(database_url, tmp_path / "third", live_identity, agents, port=port):
            async with httpx.AsyncClient(base_url=gateway.base_url, timeout=60.0) as http:
                user = _client(http, live_identity)
                got = ok(await user.call_tool("workflow_feature_get", {"featureRunId": oid}))
                assert (got["feature"]["version"], got["feature"]["activeClaim"]) == (1, None)
                # No claim and no run of the second feature: the one run is the first's.
                assert await _rows(database_url, oid) == (0, 1)
