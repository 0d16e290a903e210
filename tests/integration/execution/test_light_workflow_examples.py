"""The light-workflow examples, converted, give the outputs light-workflow gives (issue 23).

Skips where ../shared/reference/light-workflow is absent. Every convertible example is
published and run through a Tool against a local stub, or started (those with an `ask`) and
answered through the inbox; the ones with `call: agent` or `run` are checked through their
conversion report.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from runtime.composition.convert_command import converted_file
from runtime.engine.convert import convert_definition
from runtime.execution.settings import ExecutionSettings
from runtime.security.devtools import DevIdentity
from tests.support.execution import serving
from tests.support.invocation import client, invoke_args, ok, running_executor, until_settled
from tests.support.light_workflow import (
    NAMES,
    OfferMcpGateway,
    OfferServices,
    RiskService,
    converted,
    example_path,
    grant_offer_tools,
    localized,
    needs_examples,
    publish_document,
    risk_target,
    save_document,
)
from tests.support.mcp import McpTestClient
from tests.support.outbound import allow_http
from tests.support.shared import shared_path
from tests.support.waiting import wait_until

pytestmark = [needs_examples, pytest.mark.requirement("issue-23:convert")]

RISK_ORIGIN = "http://127.0.0.1:18080"
OFFERS = ("personalized-offer-rest-v1", "personalized-offer-mcp-v1")
# riskScore -> (status, decisionSource, reason), as http-risk-decision's three bands set them.
BANDS = {
    30: ("APPROVED", "Automatic", "Low risk score"),
    79: ("REVIEW_REQUIRED", "Workflow", "Medium risk score"),
    80: ("REJECTED", "Automatic", "High risk score"),
}


@pytest.fixture
async def risk() -> AsyncIterator[RiskService]:
    """The mock risk service on a free loopback port."""
    async with serving(RiskService()) as running:  # type: ignore[arg-type]
        yield running  # type: ignore[misc]


def test_the_eleven_examples_are_all_there() -> None:
    found = sorted(path.stem for path in shared_path("reference/light-workflow").glob("*.yaml"))
    assert found == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_example_converts_or_names_what_it_cannot_and_converting_again_is_a_no_op(
    name: str,
) -> None:
    conversion = converted(name)
    twice = convert_definition(conversion.document)
    assert twice.document == conversion.document and twice.changes == ()
    constructs = {blocker.construct for blocker in conversion.blockers}
    convertible = ("http-risk-decision", "simple-set-assert", "human-approval", *OFFERS)
    # grant-tools-to-workflow's acknowledgement goes to a user id computed at run time.
    if name in (*convertible, "grant-tools-to-workflow"):
        assert constructs == set()
    elif name == "run-shell-mock-v1":
        assert constructs == {"run"}
    elif name == "agent-json-output":
        assert constructs == {"call: agent"}
    else:
        # insurance-claim-*: agents, a loop back (backward then), and the REST and MCP ones an
        # ask in light-workflow's `form` mode; the MCP one also field-check asserts.
        expected = {"call: agent", "then (backward jump)"}
        if name != "insurance-claim-headless-v1":
            expected.add("ask.mode")
        if name == "insurance-claim-mcp-v1":
            expected.add("assert.json")
        assert constructs == expected
    # Each construct publication would refuse is named once, as not converted, with its reason.
    report = converted_file(example_path(name), None)
    assert report.refusals == []
    assert all(blocker.reason for blocker in report.blockers)


def test_personalized_offer_converts_every_construct_with_its_approval_ask() -> None:
    for name in OFFERS:
        conversion = converted(name)
        assert conversion.blockers == ()
        tasks = {next(iter(item)): next(iter(item.values())) for item in conversion.document["do"]}
        when = tasks["evaluateEligibility"]["switch"][0]["premiumOntario"]["when"]
        assert when == 'context.profile.segment == "premium"'
        assert tasks["finish"]["then"] == "end"
        assert "use" not in conversion.document
        assert tasks["requestApproval"]["ask"]["assignment"]["roleId"] == "admin"


@pytest.mark.parametrize("score", sorted(BANDS))
async def test_http_risk_decision_returns_the_decision_of_each_risk_band(
    score: int,
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    risk: RiskService,
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    risk.risk_score = score
    document = localized(converted("http-risk-decision").document, RISK_ORIGIN, risk.base)
    tool = await publish_document(owner, document, [risk_target(risk.base)], write=True)
    data = {"applicantId": "A-1", "loanAmount": 5000, "creditScore": 700}
    async with running_executor(services):
        result = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, data))
        )
    status, source, reason = BANDS[score]
    assert ok(result)["output"] == {
        "applicantId": "A-1",
        "status": status,
        "decisionSource": source,
        "riskScore": score,
        "reason": reason,
    }
    assert risk.bodies == [data]


async def test_simple_set_assert_returns_the_verified_decision(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    document = converted("simple-set-assert").document
    tool = await publish_document(owner, document, [], write=False)
    async with running_executor(services):
        result = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"applicantId": "A-7"}))
        )
    assert ok(result)["output"] == {
        "applicantId": "A-7",
        "status": "APPROVED",
        "verified": True,
        "message": "Workflow completed by simple-set-assert",
    }


PROFILE_ORIGIN = "http://demo-customer-profile-api:8085"
OFFER_ORIGIN = "http://demo-offer-decision-api:8086"


@pytest.fixture
async def offers() -> AsyncIterator[OfferServices]:
    """The demo profile and offer-decision APIs on a free loopback port."""
    async with serving(OfferServices()) as running:  # type: ignore[arg-type]
        yield running  # type: ignore[misc]


async def _start(starter: Any, owner: McpTestClient, document: dict[str, Any], data: Any) -> str:
    wf_def_id = await save_document(owner, document)
    started = ok(await starter.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": data}))
    return str(started["workflowInstanceId"])


async def _answer(approver: McpTestClient, instance: str, value: str | None) -> None:
    """Wait for the run's task in the approver's inbox and answer it (None: never asked)."""
    listing = {"workflowInstanceId": instance}

    async def asked() -> bool:
        return bool(ok(await approver.call_tool("workflow_task_list", listing))["tasks"])

    if value is None:
        return
    await wait_until(asked, what="the approval task in the inbox", within_s=30)
    [task] = ok(await approver.call_tool("workflow_task_list", listing))["tasks"]
    answer = {"taskId": task["taskId"], "value": value, "comment": "checked",
              "operationId": str(uuid.uuid4())}  # fmt: skip
    ok(await approver.call_tool("workflow_task_complete", answer))


async def _result(starter: McpTestClient, instance: str) -> dict[str, Any]:
    waited = {"workflowInstanceId": instance, "waitMs": 20000}
    result = ok(await starter.call_tool("workflow_wait_result", waited))
    assert result["state"] == "COMPLETED", result
    return dict(result["output"])


async def test_human_approval_waits_for_the_assigned_role_and_records_its_answer(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("admin",))
    stranger = client(http, dev_identity, "sam", roles=("clerk",))
    data = {"requestId": "R-7", "summary": "a new laptop"}
    instance = await _start(caller, owner, converted("human-approval").document, data)
    await _answer(approver, instance, "APPROVED")
    listed = {"workflowInstanceId": instance, "state": "answered"}
    assert ok(await stranger.call_tool("workflow_task_list", listed))["tasks"] == []
    output = await _result(caller, instance)
    approval = output.pop("approval")
    assert output == {"requestId": "R-7", "status": "RECORDED"}
    assert {k: approval[k] for k in ("value", "label", "comment", "answeredBy")} == {
        "value": "APPROVED",
        "label": "Approve",
        "comment": "checked",
        "answeredBy": "ann",
    }


async def test_grant_tools_to_workflow_asks_an_admin_then_only_the_requester(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    workers: Any,
) -> None:
    requester_id = str(uuid.uuid4())
    admin = client(http, dev_identity, "gia", roles=("genai-admin",))
    requester = client(http, dev_identity, requester_id, roles=("clerk",))
    other = client(http, dev_identity, str(uuid.uuid4()), roles=("clerk", "genai-admin"))
    data = {
        "requestId": str(uuid.uuid4()),
        "requestDigest": "sha256:" + "0" * 64,
        "targetWfDefId": str(uuid.uuid4()),
        "requesterUserId": requester_id,
        "justification": "the claims workflow reads the customer profile",
        "items": [{"toolId": "customer-profile", "pin": "1.2.0"}],
    }
    document = converted("grant-tools-to-workflow").document
    instance = await _start(caller, owner, document, data)
    await _answer(admin, instance, "APPROVE")
    # The acknowledgement is the requester's alone: the admin role does not reach it.
    await _answer(requester, instance, "ACKNOWLEDGED")
    listed = {"workflowInstanceId": instance, "state": "answered"}
    [acknowledged] = ok(await requester.call_tool("workflow_task_list", listed))["tasks"]
    assert acknowledged["assignment"]["userId"] == requester_id
    assert acknowledged["taskName"] == "acknowledgeRequester"
    others = ok(await other.call_tool("workflow_task_list", listed))["tasks"]
    assert [t["taskName"] for t in others] == ["reviewToolAccess"]  # by its genai-admin role
    output = await _result(caller, instance)
    assert output["value"] == "ACKNOWLEDGED" and output["answeredBy"] == requester_id


# The stub's profile and preferences, the approver's answer -> the run's output.
OFFER_PATHS = {
    "APPROVED": (("premium", True), "APPROVED"),
    "REJECTED": (("premium", True), "REJECTED"),
    "NO_CONSENT": (("premium", False), None),
    "NO_ELIGIBLE_OFFER": (("standard", True), None),
}


@pytest.mark.parametrize("status", sorted(OFFER_PATHS))
async def test_personalized_offer_rest_ends_on_each_path(
    status: str,
    owner: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    offers: OfferServices,
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    (offers.segment, offers.consent), answer = OFFER_PATHS[status]
    document = converted("personalized-offer-rest-v1").document
    document = localized(
        localized(document, PROFILE_ORIGIN, offers.base), OFFER_ORIGIN, offers.base
    )
    # The run calls out until its 30-day start deadline at most (no workflow timeout): its
    # starter's token covers it, as the token-cover rule asks when no exchange endpoint is
    # configured.
    starter = client(http, dev_identity, ttl=31 * 86_400)
    approver = client(http, dev_identity, "ann", roles=("admin",))
    data = {"customerId": "CUST-1001", "channel": "portal"}
    settings = ExecutionSettings(http_allowlist=[offers.base])
    async with running_executor(services, settings):
        instance = await _start(starter, owner, document, data)
        await _answer(approver, instance, answer)
        output = await _result(starter, instance)
    assert output["status"] == status and output["customerId"] == "CUST-1001"
    if status == "APPROVED":
        assert output["selectedOfferId"] == "OFFER-TRAVEL-01" and output["decisionId"] == "DEC-1"
        [(_, _, decision)] = [r for r in offers.requests if r[0] == "POST"]
        assert decision["offerId"] == "OFFER-TRAVEL-01" and decision["channel"] == "portal"
    elif status == "REJECTED":
        assert output["selectedOfferId"] == "OFFER-TRAVEL-01"
    assert ("POST" in {r[0] for r in offers.requests}) == (status == "APPROVED")


@pytest.fixture
async def offer_gateway() -> AsyncIterator[OfferMcpGateway]:
    """The same demo APIs as MCP tools behind a local MCP endpoint."""
    async with serving(OfferMcpGateway()) as running:  # type: ignore[arg-type]
        yield running  # type: ignore[misc]


@pytest.mark.parametrize("status", sorted(OFFER_PATHS))
async def test_personalized_offer_mcp_ends_on_each_path_as_the_rest_variant_does(
    status: str,
    owner: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    offer_gateway: OfferMcpGateway,
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    (offer_gateway.segment, offer_gateway.consent), answer = OFFER_PATHS[status]
    # The converted session URI is kept in the task; every nested call goes to the Gateway.
    document = converted("personalized-offer-mcp-v1").document
    # No token exchange here: the starter's token must cover the run's 30-day deadline.
    starter = client(http, dev_identity, ttl=31 * 86_400)
    approver = client(http, dev_identity, "ann", roles=("admin",))
    data = {"customerId": "CUST-1001", "channel": "portal"}
    settings = ExecutionSettings(gateway_mcp_url=f"{offer_gateway.base}/mcp")
    wf_def_id = await save_document(owner, document)
    await grant_offer_tools(owner, wf_def_id)
    async with running_executor(services, settings):
        started = {"wfDefId": wf_def_id, "input": data}
        instance = ok(await starter.call_tool("workflow_start", started))["workflowInstanceId"]
        await _answer(approver, instance, answer)
        output = await _result(starter, instance)
    expected = {"status": status, "customerId": "CUST-1001"}
    if status in ("APPROVED", "REJECTED"):
        expected["selectedOfferId"] = "OFFER-TRAVEL-01"
    if status == "APPROVED":
        expected["decisionId"] = "DEC-1"
        [(_, _, decision)] = [r for r in offer_gateway.requests if r[0] == "POST"]
        assert decision["offerId"] == "OFFER-TRAVEL-01" and decision["channel"] == "portal"
        assert decision["idempotencyKey"] == "personalized-offer-mcp-v1:CUST-1001:OFFER-TRAVEL-01"
    output.pop("reason", None)
    assert output == expected
    called = ["getCustomerProfile", "getCustomerPreferences"]
    if status != "NO_CONSENT":
        called.append("searchOffers")
    if status == "APPROVED":
        called.append("recordOfferDecision")
    assert offer_gateway.calls == called
