"""The light-workflow examples, converted, give the outputs light-workflow gives (issue 23).

Skips where ../shared/reference/light-workflow is absent. Every convertible example is
published and run through a Tool against a local stub; the ones with `ask`, `call: agent` or
`run` are checked through their conversion report (human tasks need their own issue).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from runtime.engine.convert import ASK_REASON, convert_definition
from tests.support.execution import serving
from tests.support.invocation import invoke_args, ok, running_executor, until_settled
from tests.support.light_workflow import (
    NAMES,
    RiskService,
    converted,
    localized,
    needs_examples,
    publish_document,
    risk_target,
)
from tests.support.mcp import McpTestClient
from tests.support.outbound import allow_http
from tests.support.shared import shared_path

pytestmark = needs_examples

RISK_ORIGIN = "http://127.0.0.1:18080"
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
    if name in ("http-risk-decision", "simple-set-assert"):
        assert constructs == set()
    elif name in ("human-approval", "grant-tools-to-workflow") or name.startswith("personalized"):
        assert constructs == {"ask"}
    elif name == "run-shell-mock-v1":
        assert constructs == {"run"}
    else:
        assert "call: agent" in constructs


def test_personalized_offer_converts_every_construct_but_its_approval_ask() -> None:
    for name in ("personalized-offer-rest-v1", "personalized-offer-mcp-v1"):
        conversion = converted(name)
        [blocker] = conversion.blockers
        assert (blocker.pointer, blocker.reason) == ("/do/8/requestApproval", ASK_REASON)
        tasks = {next(iter(item)): next(iter(item.values())) for item in conversion.document["do"]}
        when = tasks["evaluateEligibility"]["switch"][0]["premiumOntario"]["when"]
        assert when == 'context.profile.segment == "premium"'
        assert tasks["finish"]["then"] == "end"
        assert "use" not in conversion.document


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
