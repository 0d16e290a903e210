"""A run reaches only its pinned binding revision's endpoint targets, whatever happens later."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime.canonical import definition_digest
from runtime.execution import (
    ExecutionSettings,
    WorkflowRuntime,
    close_waiter,
    wait_for_result,
)
from runtime.security import Keyring, SecretToken
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.support.binding_builders import (
    HOST,
    OWNER,
    OWNER_POSITION,
    endpoint_target,
    owner_ctx,
    publish_args,
    save_owner,
    write_binding,
)
from tests.support.execution import LOCAL_BACKENDS, LocalServer, executor, serving
from tests.support.execution_runs import start_workflow_run
from tests.support.publication_builders import context
from tests.support.service_calls import publish_binding, publish_definition, revoke_binding
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Binding revisions")

EVIDENCE = "sha256:" + "e" * 64
TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1LTEiLCJleHAiOjQxMDI0NDQ4MDB9.c2ln"


def posting_definition(base: str, second_path: str, pause_s: int) -> str:
    """POST to /claims, pause, then POST to second_path: both write tasks with evidence."""

    def post(name: str, path: str) -> str:
        return (
            f"  - {name}:\n      call: http\n      with:\n        method: POST\n"
            f"        endpoint: {base}{path}\n"
            f"      metadata:\n        approvalEvidenceDigest: {EVIDENCE}\n"
        )

    pause = f"  - pause:\n      wait:\n        seconds: {pause_s}\n"
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n" + post("first", "/claims") + pause + post("second", second_path)
    )


@pytest.fixture
async def keyring(db: Database) -> AsyncIterator[Keyring]:
    yield Keyring.from_document(new_keyring_document("k1"))
    await close_waiter(db)


async def _publish(db: Database, wf_def_id: str, text: str, version: str = "1.2.0") -> None:
    await publish_definition(
        db,
        context(),
        {
            "hostId": HOST,
            "wfDefId": wf_def_id,
            "namespace": "claims",
            "name": "summarize-claim",
            "version": version,
            "definition": text,
            "expectedDefinitionDigest": definition_digest(text),
            "bindingApproval": "carryOver",
            "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
            "operationId": str(uuid.uuid4()),
        },
    )


async def _bind(
    db: Database,
    wf_def_id: str,
    tool_id: str,
    text: str,
    targets: list[dict[str, Any]],
    expected: int,
) -> dict[str, Any]:
    value = write_binding(wf_def_id, tool_id, text)
    args = publish_args(value, expected, endpoint_targets=targets)
    return await publish_binding(db, owner_ctx(), args, local_backends=True)


async def _run(db: Database, keyring: Keyring, wf_def_id: str, binding_id: str) -> str:
    return await start_workflow_run(
        db,
        host_id=HOST,
        user_id=OWNER,
        input={},
        keyring=keyring,
        credential=SecretToken(TOKEN),
        wf_def_id=wf_def_id,
        version="1.2.0",
        binding_id=binding_id,
    )


async def test_a_republish_and_a_revocation_during_a_run_do_not_change_what_it_reaches(
    db: Database, keyring: Keyring
) -> None:
    server = LocalServer()
    async with serving(server):
        wf_def_id = str(uuid.uuid4())
        await save_owner(db, wf_def_id)
        text = posting_definition(server.base, "/claims", pause_s=1)
        await _publish(db, wf_def_id, text)
        tool_id = str(uuid.uuid4())
        pinned = await _bind(
            db, wf_def_id, tool_id, text, [endpoint_target("claims", f"{server.base}/claims")], 0
        )
        assert pinned["status"] == "active"
        runtime = WorkflowRuntime(ExecutionSettings(), keyring, destinations=LOCAL_BACKENDS)
        async with executor(db, runtime):
            process_id = await _run(db, keyring, wf_def_id, pinned["bindingId"])
            await wait_until(lambda: bool(server.requests), what="the run's first request")
            # While the run pauses: the Tool is republished with another target, then revoked.
            moved = await _bind(
                db,
                wf_def_id,
                tool_id,
                text,
                [
                    endpoint_target("moved", f"{server.base}/claims"),
                    endpoint_target("elsewhere", f"{server.base}/elsewhere"),
                ],
                pinned["aggregateVersion"],
            )
            assert moved["status"] == "active"
            await revoke_binding(
                db,
                owner_ctx(),
                {
                    "hostId": HOST,
                    "bindingId": moved["bindingId"],
                    "expectedBindingDigest": moved["bindingDigest"],
                    "comment": "revoked mid-run",
                    "operationId": str(uuid.uuid4()),
                },
            )
            run = await wait_for_result(db, HOST, process_id, timeout=20)
    assert run is not None and run.state == "COMPLETED", run
    assert [request["path"] for request in server.requests] == ["/claims", "/claims"]


@pytest.mark.requirement("000:QC-15")
async def test_a_republish_that_no_longer_reaches_the_runs_target_does_not_stop_the_run(
    db: Database, keyring: Keyring
) -> None:
    server = LocalServer()
    async with serving(server):
        wf_def_id = str(uuid.uuid4())
        await save_owner(db, wf_def_id)
        text = posting_definition(server.base, "/claims", pause_s=0)
        await _publish(db, wf_def_id, text)
        tool_id = str(uuid.uuid4())
        pinned = await _bind(
            db, wf_def_id, tool_id, text, [endpoint_target("claims", f"{server.base}/claims")], 0
        )
        # Admitted, not yet run (no executor): then the Tool moves to a version that calls
        # /moved only, under a revision that reaches /moved only.
        process_id = await _run(db, keyring, wf_def_id, pinned["bindingId"])
        moved_text = text.replace("/claims", "/moved").replace('"1.2.0"', '"1.3.0"')
        await _publish(db, wf_def_id, moved_text, version="1.3.0")
        value = write_binding(wf_def_id, tool_id, moved_text)
        value["workflowVersion"] = "1.3.0"
        args = publish_args(
            value,
            pinned["aggregateVersion"],
            endpoint_targets=[endpoint_target("moved", f"{server.base}/moved")],
        )
        moved = await publish_binding(db, owner_ctx(), args, local_backends=True)
        assert moved["status"] == "active", moved
        # The run reads the revision it was admitted with: both its requests go to /claims.
        runtime = WorkflowRuntime(ExecutionSettings(), keyring, destinations=LOCAL_BACKENDS)
        async with executor(db, runtime):
            run = await wait_for_result(db, HOST, process_id, timeout=20)
    assert run is not None and run.state == "COMPLETED", run
    assert [request["path"] for request in server.requests] == ["/claims", "/claims"]


async def test_a_uri_outside_the_pinned_targets_is_refused_before_any_request_leaves(
    db: Database, keyring: Keyring
) -> None:
    server = LocalServer()
    async with serving(server):
        wf_def_id = str(uuid.uuid4())
        await save_owner(db, wf_def_id)
        text = posting_definition(server.base, "/not-a-target", pause_s=0)
        await _publish(db, wf_def_id, text)
        pinned = await _bind(
            db,
            wf_def_id,
            str(uuid.uuid4()),
            text,
            [
                endpoint_target("claims", f"{server.base}/claims"),
                # Publication needs every call covered; this target serves another environment.
                {
                    **endpoint_target("other", f"{server.base}/not-a-target"),
                    "environments": ["prod"],
                },
            ],
            0,
        )
        runtime = WorkflowRuntime(
            ExecutionSettings(environment="dev"), keyring, destinations=LOCAL_BACKENDS
        )
        async with executor(db, runtime):
            process_id = await _run(db, keyring, wf_def_id, pinned["bindingId"])
            run = await wait_for_result(db, HOST, process_id, timeout=20)
    assert run is not None and run.state == "FAILED", run
    assert [request["path"] for request in server.requests] == ["/claims"]
    assert "endpoint target" in str(run.error)
