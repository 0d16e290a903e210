"""Issue 24's done-when, through POST /mcp: a host secret authenticates a workflow's HTTP call.

A secret is put, a definition whose POST authenticates with `X-API-Key: ${ $secrets.partnerKey }`
publishes and runs, the stub backend receives the key, and the key appears in no tool result,
receipt, error, log line, stored row or `runs show` output; rotating it changes what the next
run sends; a literal X-API-Key header is refused at publish.
"""

from __future__ import annotations

import argparse
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from runtime.collaborators import Services
from runtime.composition.runs import _show
from runtime.execution import ExecutionSettings
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.support.binding_builders import (
    HOST,
    POLICY_DIGEST,
    binding,
    endpoint_target,
    insert_version_row,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.checker import publish_arguments
from tests.support.execution import serving
from tests.support.invocation import (
    client,
    invoke_args,
    ok,
    publish_version,
    refused,
    save_head,
    until_settled,
)
from tests.support.mcp import McpTestClient
from tests.support.protected_backend import publish_calling_tool, verifying_executor
from tests.support.secret_backend import PARTNER_POLICY_DIGEST, KeyedBackend, api_key_definition

FIRST_KEY = "pk_live_first_5b2d4f60a1c3"
SECOND_KEY = "pk_live_second_9e8d7c6b5a41"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Endpoint targets on the local backend (plain http on 127.0.0.1) are allowed."""
    settings.publication.destinations.allowed_schemes = ["http", "https"]
    return settings


@pytest.fixture
async def backend() -> AsyncIterator[KeyedBackend]:
    async with serving(KeyedBackend()) as running:  # type: ignore[arg-type]
        yield running


class Transcript:
    """Every tool result of the test, to search for the key afterwards."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    async def call(self, who: McpTestClient, name: str, arguments: dict[str, Any]) -> Any:
        result = await who.call_tool(name, arguments)
        self.results.append(result)
        return result

    def text(self) -> str:
        return json.dumps(self.results)


def _put(value: str) -> dict[str, Any]:
    return {"hostId": HOST, "name": "partnerKey", "value": value, "operationId": new_id()}


async def _stored_text(admin: psycopg.AsyncConnection[Any]) -> str:
    """Every row of every table, as text (sealed values are ciphertext)."""
    cursor = await admin.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
    )
    texts = []
    for row in await cursor.fetchall():
        rows = await admin.execute(f'SELECT t::text AS row FROM "{row["table_name"]}" t')
        texts += [item["row"] for item in await rows.fetchall()]
    return "\n".join(texts)


async def _runs_show(services: Services, run_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    shown = []
    for as_json in (False, True):
        namespace = argparse.Namespace(host=HOST, run_id=run_id, json=as_json)
        assert await _show(services.database, namespace) == 0
        shown.append(capsys.readouterr().out)
    return "\n".join(shown)


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_secret_authenticates_the_call_never_shows_and_rotation_reaches_the_next_run(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
    admin: psycopg.AsyncConnection[Any],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    seen = Transcript()
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    caller = client(http, dev_identity, roles=("genai-user",))
    uri = f"{backend.base}/partner/claims"
    text = api_key_definition(uri)

    # Publishing a definition that declares a secret the host does not hold is refused (not
    # stored: the same operationId publishes once the secret is put).
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    publish = publish_arguments(wf_def_id, text)
    missing = refused(
        await seen.call(owner, "workflow_definition_publish", publish), "WORKFLOW_NOT_FOUND"
    )
    assert missing["error"]["details"]["secrets"] == ["partnerKey"]
    ok(await seen.call(operator, "workflow_secret_put", _put(FIRST_KEY)))
    ok(await seen.call(owner, "workflow_definition_publish", publish))

    tool = await publish_calling_tool(
        owner, text, uri, write=True, policy_digest=PARTNER_POLICY_DIGEST
    )
    backend.expected = FIRST_KEY
    async with verifying_executor(services):
        first = ok(
            await until_settled(
                lambda: seen.call(caller, "workflow_invoke", invoke_args(tool, {"claimId": "A"}))
            )
        )
        assert first["output"] == {"accepted": True, "n": 1}
        assert backend.keys == [FIRST_KEY]

        # Rotation: the next run sends the new value (and the old one no longer works).
        rotated = ok(await seen.call(operator, "workflow_secret_put", _put(SECOND_KEY)))
        assert rotated["result"] == "rotated" and rotated["version"] == 2
        backend.expected = SECOND_KEY
        second = ok(
            await until_settled(
                lambda: seen.call(caller, "workflow_invoke", invoke_args(tool, {"claimId": "B"}))
            )
        )
        assert second["output"] == {"accepted": True, "n": 2}
        assert backend.keys == [FIRST_KEY, SECOND_KEY]

    listed = ok(await seen.call(operator, "workflow_secret_list", {"hostId": HOST}))
    references = {(r["wfDefId"], r["version"]) for r in listed["items"][0]["referencedBy"]}
    assert (wf_def_id, "1.2.0") in references and (tool.wf_def_id, "1.2.0") in references
    in_use = await seen.call(
        operator,
        "workflow_secret_delete",
        {"hostId": HOST, "name": "partnerKey", "operationId": new_id()},
    )
    refused(in_use, "WORKFLOW_STATE_CONFLICT")

    shown = "".join(
        [await _runs_show(services, run["workflowInstanceId"], capsys) for run in (first, second)]
    )
    stored = await _stored_text(admin)
    assert "partnerKey" in stored and "accepted" in stored  # the scan reads runs and receipts
    for key in (FIRST_KEY, SECOND_KEY):
        assert key not in seen.text(), "a tool result or receipt shows the key"
        assert key not in caplog.text, "a log line shows the key"
        assert key not in shown, "runs show shows the key"
        assert key not in stored, "a stored row (run state, ledger, receipt) holds the key"


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_literal_api_key_header_is_refused_at_publish_naming_it_and_the_fix(
    owner: McpTestClient, backend: KeyedBackend
) -> None:
    literal = "X-API-Key: pk_live_literal_0000"
    text = api_key_definition(f"{backend.base}/partner/claims", header_line=literal)
    wf_def_id = new_id()
    for name, arguments in (
        ("workflow_definition_publish", publish_arguments(wf_def_id, text)),
        (
            "workflow_definition_save",
            {
                "hostId": HOST, "wfDefId": wf_def_id, "sourceRevision": 1, "actor": "steve",
                "namespace": "claims", "name": "summarize-claim", "version": "1.2.0",
                "definition": text, "lifecycleStatus": "PUBLISHED", "catalogVisible": False,
                "owner": {"userId": "owner-1"}, "active": True,
            },
        ),
    ):  # fmt: skip
        result = await owner.call_tool(name, arguments)
        body = refused(result, "WORKFLOW_INPUT_INVALID")
        [problem] = body["error"]["details"]["problems"]
        assert problem["rule"] == "literal-credential"
        assert problem["pointer"] == "/do/0/submit/with/headers/X-API-Key"
        assert "X-API-Key" in body["error"]["message"]
        assert "$secrets" in problem["message"] and "workflow_secret_put" in problem["message"]
        assert "pk_live_literal_0000" not in json.dumps(result)


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_literal_credential_in_an_api_key_policy_is_refused_by_save_as_by_publish(
    owner: McpTestClient, backend: KeyedBackend
) -> None:
    # Issue 40 black-box (b): only publish and start refused it; save stored it in the head.
    literal = "pk_live_in_policy_1111"
    text = api_key_definition(f"{backend.base}/partner/claims").replace(
        '"${ $secrets.partnerKey }"', literal
    )
    assert literal in text
    wf_def_id = new_id()
    for name, arguments in (
        ("workflow_definition_save", save_arguments(wf_def_id, text)),
        ("workflow_definition_publish", publish_arguments(wf_def_id, text)),
    ):
        result = await owner.call_tool(name, arguments)
        body = refused(result, "WORKFLOW_INPUT_INVALID")
        [problem] = body["error"]["details"]["problems"]
        assert problem["pointer"] == "/use/authentications/partnerApi/apiKey/value"
        assert "literal credential" in problem["message"]
        assert literal not in json.dumps(result)


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_workflow_start_refuses_a_head_declaring_a_secret_the_host_does_not_hold(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
) -> None:
    # Issue 40 black-box (c): publish refused it, start accepted it and the run failed later.
    text = api_key_definition(f"{backend.base}/partner/claims").replace(
        "do:\n", "timeout:\n  after: PT5M\ndo:\n", 1
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    starter = client(http, dev_identity, "starter", roles=("workflow-admin",))
    arguments = {"wfDefId": wf_def_id, "input": {"claimId": "A"}}
    body = refused(await starter.call_tool("workflow_start", arguments), "WORKFLOW_NOT_FOUND")
    assert body["error"]["details"]["secrets"] == ["partnerKey"]
    assert "partnerKey" in body["error"]["message"]
    assert await _runs(services) == 0
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    started = ok(await starter.call_tool("workflow_start", arguments))
    assert started["state"] == "ACCEPTED"


async def _runs(services: Services) -> int:
    async with services.database.transaction() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM workflow_process")
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


def save_arguments(wf_def_id: str, text: str) -> dict[str, Any]:
    """workflow_definition_save arguments for a head holding text."""
    return {
        "hostId": HOST, "wfDefId": wf_def_id, "sourceRevision": 1, "actor": "steve",
        "namespace": "claims", "name": "summarize-claim", "version": "1.2.0",
        "definition": text, "lifecycleStatus": "PUBLISHED", "catalogVisible": False,
        "owner": {"userId": "owner-1"}, "active": True,
    }  # fmt: skip


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_deleted_secret_stops_the_next_call_with_an_authorization_error(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    caller = client(http, dev_identity, roles=("genai-user",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    uri = f"{backend.base}/partner/claims"
    tool = await publish_calling_tool(
        owner, api_key_definition(uri), uri, write=True, policy_digest=PARTNER_POLICY_DIGEST
    )
    # Behind the service's back (an operator's repair): the row is tombstoned under the run.
    await admin.execute(
        "UPDATE workflow_secret_t SET key_id = NULL, nonce = NULL, ciphertext = NULL, "
        "deleted_ts = now() WHERE host_id = %s AND name = 'partnerKey'",
        (uuid.UUID(HOST),),
    )
    async with verifying_executor(services):
        result = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "A"}))
        )
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert body["error"]["details"]["status"] == 403
    assert body["error"]["details"]["type"].endswith("/authorization")
    # Issue 40 black-box (d): the error says which secret is missing (a name, never a value).
    assert body["error"]["message"].endswith("the host holds no secret named partnerKey")
    assert backend.seen == []  # nothing left without its credential


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_secret_deleted_through_the_tool_under_a_started_run_fails_it_naming_the_secret(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
) -> None:
    # A saved head is no published version, so workflow_secret_delete lets the secret go while
    # a run started from the head still needs it.
    text = api_key_definition(f"{backend.base}/partner/claims").replace(
        "do:\n", "timeout:\n  after: PT5M\ndo:\n", 1
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    starter = client(http, dev_identity, "starter", roles=("workflow-admin",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    started = ok(
        await starter.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {"claimId": "A"}})
    )
    deleted = {"hostId": HOST, "name": "partnerKey", "operationId": new_id()}
    ok(await operator.call_tool("workflow_secret_delete", deleted))
    instance = started["workflowInstanceId"]
    allowed = ExecutionSettings(http_allowlist=[backend.base])
    async with verifying_executor(services, allowed):
        result = await starter.call_tool(
            "workflow_wait_result", {"workflowInstanceId": instance, "waitMs": 15000}
        )
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert body["error"]["details"]["status"] == 403
    assert "the host holds no secret named partnerKey" in body["error"]["message"]
    assert backend.seen == []


def _without_evidence(text: str) -> str:
    """The definition with its call's approval evidence removed."""
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if "metadata:" not in line and "approvalEvidence" not in line]
    assert len(kept) == len(lines) - 2
    return "".join(kept)


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_call_authenticated_by_a_host_secret_without_approval_evidence_is_refused(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
) -> None:
    # Issue 40 X-11: a secret makes the call act as a service identity, which seed 001 permits
    # only "when the step has explicit publication-time approval evidence", read or write.
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    text = _without_evidence(
        api_key_definition(f"{backend.base}/partner/claims").replace("method: POST", "method: GET")
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    published = await owner.call_tool(
        "workflow_definition_publish", publish_arguments(wf_def_id, text)
    )
    body = refused(published, "WORKFLOW_INPUT_INVALID")
    [problem] = body["error"]["details"]["problems"]
    assert problem["rule"] == "service-identity-evidence"
    assert problem["pointer"] == "/do/0/submit"
    assert "partnerKey" in problem["message"] and "approvalEvidenceDigest" in problem["message"]
    starter = client(http, dev_identity, "starter", roles=("workflow-admin",))
    arguments = {"wfDefId": wf_def_id, "input": {"claimId": "A"}}
    body = refused(await starter.call_tool("workflow_start", arguments), "WORKFLOW_START_REJECTED")
    assert body["error"]["details"]["problems"][0]["rule"] == "service-identity-evidence"
    assert await _runs(services) == 0


async def _publish_with_target(
    owner: McpTestClient, text: str, uri: str, policy_digest: str
) -> dict[str, Any]:
    """Publish text and a write binding whose one endpoint target (uri) has policy_digest."""
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    value = write_binding(wf_def_id, new_id(), text)
    targets = [endpoint_target(uri=uri, policy_digest=policy_digest)]
    result: dict[str, Any] = await owner.call_tool(
        "workflow_binding_publish", publish_args(value, 0, endpoint_targets=targets)
    )
    return result


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_target_reached_with_a_secret_must_carry_the_digest_of_the_calls_authentication(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    backend: KeyedBackend,
) -> None:
    # Issue 40 X-11: authorizationPolicyDigest was never checked, so a revision's review did
    # not show which service identity reaches which endpoint.
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    uri = f"{backend.base}/partner/claims"
    text = api_key_definition(uri)
    body = refused(
        await _publish_with_target(owner, text, uri, POLICY_DIGEST), "WORKFLOW_INPUT_INVALID"
    )
    [problem] = body["error"]["details"]["problems"]
    assert problem["rule"] == "authorization-policy-digest"
    assert problem["pointer"] == "/endpointTargets/0/authorizationPolicyDigest"
    assert PARTNER_POLICY_DIGEST in problem["message"] and "partnerApi" in problem["message"]
    receipt = ok(await _publish_with_target(owner, text, uri, PARTNER_POLICY_DIGEST))
    assert receipt["status"] == "active"


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_binding_on_a_version_whose_secret_call_has_no_approval_evidence_is_refused(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
) -> None:
    # A version published before publish required the evidence (stored as it was then) cannot
    # get a new revision serving it.
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    uri = f"{backend.base}/partner/claims"
    text = _without_evidence(api_key_definition(uri).replace("method: POST", "method: GET"))
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    await insert_version_row(services.database, wf_def_id, text)
    value = binding(wf_def_id, new_id(), text)
    targets = [endpoint_target(uri=uri, policy_digest=PARTNER_POLICY_DIGEST)]
    result = await owner.call_tool(
        "workflow_binding_publish", publish_args(value, 0, endpoint_targets=targets)
    )
    body = refused(result, "WORKFLOW_INPUT_INVALID")
    rules = {problem["rule"] for problem in body["error"]["details"]["problems"]}
    assert rules == {"service-identity-evidence"}


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_secret_scoped_to_definitions_serves_only_those_at_publish_start_and_call(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
) -> None:
    # Issue 40 X-11: a host secret was usable by any definition of the host; seed 001 wants
    # service identity "no broader than the published capability set".
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    uri = f"{backend.base}/partner/claims"
    text = api_key_definition(uri)
    allowed, other = new_id(), new_id()
    ok(
        await operator.call_tool(
            "workflow_secret_put", {**_put(FIRST_KEY), "definitions": [allowed]}
        )
    )
    listed = ok(await operator.call_tool("workflow_secret_list", {"hostId": HOST}))
    assert listed["items"][0]["definitions"] == [allowed]

    # Publish: another definition declaring it is refused, naming the secret; the named one
    # publishes.
    await save_head(owner, other, text)
    body = refused(
        await owner.call_tool("workflow_definition_publish", publish_arguments(other, text)),
        "WORKFLOW_POLICY_DENIED",
    )
    assert body["error"]["details"]["secrets"] == ["partnerKey"]
    assert body["error"]["details"]["problems"][0]["rule"] == "secret-scope"
    await save_head(owner, allowed, text)
    ok(await owner.call_tool("workflow_definition_publish", publish_arguments(allowed, text)))

    # Start: the same refusal, and nothing runs.
    starter = client(http, dev_identity, "starter", roles=("workflow-admin",))
    arguments = {"wfDefId": other, "input": {"claimId": "A"}}
    body = refused(await starter.call_tool("workflow_start", arguments), "WORKFLOW_POLICY_DENIED")
    assert body["error"]["details"]["secrets"] == ["partnerKey"]
    assert await _runs(services) == 0

    # A rotation that names no definitions keeps the scope.
    ok(await operator.call_tool("workflow_secret_put", _put(SECOND_KEY)))
    listed = ok(await operator.call_tool("workflow_secret_list", {"hostId": HOST}))
    assert listed["items"][0]["definitions"] == [allowed]


@pytest.mark.requirement("001:Authorization And Data Protection")
async def test_a_call_of_a_definition_outside_the_secrets_scope_is_refused_before_it_leaves(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: KeyedBackend,
) -> None:
    operator = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    caller = client(http, dev_identity, roles=("genai-user",))
    ok(await operator.call_tool("workflow_secret_put", _put(FIRST_KEY)))
    uri = f"{backend.base}/partner/claims"
    tool = await publish_calling_tool(
        owner, api_key_definition(uri), uri, write=True, policy_digest=PARTNER_POLICY_DIGEST
    )
    # The administrator narrows the secret to another definition: the next call stops.
    narrowed = {**_put(SECOND_KEY), "definitions": [new_id()]}
    ok(await operator.call_tool("workflow_secret_put", narrowed))
    backend.expected = SECOND_KEY
    async with verifying_executor(services):
        result = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "A"}))
        )
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert body["error"]["details"]["status"] == 403
    assert "partnerKey may not be used by this definition" in body["error"]["message"]
    assert SECOND_KEY not in json.dumps(result)
    assert backend.seen == []
