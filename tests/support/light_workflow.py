"""light-workflow examples converted and published against local stub services (no tests here).

The examples live in ../shared/reference/light-workflow/ and are read at test time, never
copied into the repository. The stub answers what the examples' services would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.canonical import definition_digest, load_definition_yaml
from runtime.composition.convert_command import dump_definition
from runtime.engine.convert import Conversion, convert_definition
from tests.support.binding_builders import (
    EVIDENCE,
    HOST,
    OWNER,
    OWNER_POSITION,
    binding,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.execution import Receive, Send, read_body
from tests.support.invocation import Tool, ok, publish_tool
from tests.support.mcp import McpTestClient
from tests.support.shared import requires_shared, shared_path

EXAMPLES = "reference/light-workflow"
NAMES = (
    "agent-json-output",
    "grant-tools-to-workflow",
    "http-risk-decision",
    "human-approval",
    "insurance-claim-headless-v1",
    "insurance-claim-mcp-v1",
    "insurance-claim-rest-v1",
    "personalized-offer-mcp-v1",
    "personalized-offer-rest-v1",
    "run-shell-mock-v1",
    "simple-set-assert",
)
needs_examples = requires_shared(EXAMPLES)


def example_path(name: str) -> Path:
    """The shared example definition called name."""
    return shared_path(f"{EXAMPLES}/{name}.yaml")


def converted(name: str) -> Conversion:
    """The conversion of one shared example."""
    return convert_definition(load_definition_yaml(example_path(name).read_bytes()))


def localized(document: dict[str, Any], origin: str, base: str) -> dict[str, Any]:
    """The document with each endpoint on origin moved to the stub at base, and each write
    task carrying approval evidence (what a publisher adds after review)."""
    text = json.dumps(document).replace(origin, base)
    moved: dict[str, Any] = json.loads(text)
    for item in moved["do"]:
        task = next(iter(item.values()))
        method = str(task.get("with", {}).get("method", "GET")).upper()
        if task.get("call") == "http" and method not in ("GET", "HEAD"):
            task.setdefault("metadata", {})["approvalEvidenceDigest"] = EVIDENCE
    return moved


@dataclass
class RiskService:
    """The mock risk service of http-risk-decision: POST /risk/evaluate -> {riskScore}."""

    risk_score: int = 25
    bodies: list[Any] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The stub's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.bodies.append(json.loads(await read_body(receive) or b"null"))
        found = scope["method"] == "POST" and scope["path"] == "/risk/evaluate"
        payload = {"riskScore": self.risk_score} if found else {"error": "not found"}
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200 if found else 404,
                    "headers": headers})  # fmt: skip
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@dataclass
class OfferServices:
    """The demo customer-profile and offer-decision APIs of personalized-offer-rest-v1.

    GET /customers/{id} -> the profile (segment, state), GET /customers/{id}/preferences ->
    {consent}, GET /offers -> the matching offers, POST /offer-decisions -> the recorded
    decision (its id and offer id).
    """

    segment: str = "premium"
    consent: bool = True
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The stub's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = json.loads(await read_body(receive) or b"null")
        method, path = scope["method"], scope["path"]
        self.requests.append((method, path, body))
        payload = self._answer(method, path, body)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 404 if payload is None else 200,
                    "headers": headers})  # fmt: skip
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})

    def _answer(self, method: str, path: str, body: Any) -> Any:
        parts = path.strip("/").split("/")
        if method == "GET" and parts[0] == "customers" and len(parts) == 2:
            return {"customerId": parts[1], "segment": self.segment, "state": "ON"}
        if method == "GET" and parts[0] == "customers" and parts[2:] == ["preferences"]:
            return {"customerId": parts[1], "consent": self.consent}
        if method == "GET" and parts == ["offers"]:
            return [{"offerId": "OFFER-TRAVEL-01", "priority": 1}]
        if method == "POST" and parts == ["offer-decisions"]:
            return {"decisionId": "DEC-1", "offerId": body["offerId"], "status": "RECORDED"}
        return None


# personalized-offer-mcp-v1's tools, as the demo gateway lists them -> OfferServices' request.
OFFER_TOOLS = {
    "getCustomerProfile": lambda a: ("GET", f"/customers/{a['customerId']}"),
    "getCustomerPreferences": lambda a: ("GET", f"/customers/{a['customerId']}/preferences"),
    "searchOffers": lambda a: ("GET", "/offers"),
    "recordOfferDecision": lambda a: ("POST", "/offer-decisions"),
}


@dataclass
class OfferMcpGateway(OfferServices):
    """The same demo APIs behind an MCP endpoint (POST /mcp), as personalized-offer-mcp-v1
    reaches them: each tools/call answers the REST stub's body as `structuredContent` (a
    list wrapped as {items}). `requests` records (method, path, arguments) as the REST stub
    would, so both variants are asserted alike; `calls` the tool names in order."""

    calls: list[str] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        message = json.loads(await read_body(receive) or b"{}")
        if message.get("method") == "initialize":
            result: Any = {"protocolVersion": "2025-06-18", "capabilities": {}}
        elif "id" not in message:
            await _send_json(send, 202, None)
            return
        else:
            result = self._tool_call(message["params"])
        await _send_json(send, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params["name"], params.get("arguments") or {}
        self.calls.append(name)
        method, path = OFFER_TOOLS[name](arguments)
        self.requests.append((method, path, arguments))
        payload = self._answer(method, path, arguments)
        content = {"items": payload} if isinstance(payload, list) else payload
        text = [{"type": "text", "text": json.dumps(payload)}]
        return {"content": text, "structuredContent": content, "isError": False}


async def _send_json(send: Send, status: int, payload: Any) -> None:
    body = b"" if payload is None else json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def grant_offer_tools(owner: McpTestClient, wf_def_id: str) -> None:
    """Publish a Tool under each of the four MCP names and grant them through the contract.

    A `workflow_start` run (the only kind an `ask` may park) has no pinned dependency: its
    `call: mcp` is covered by a grant whose toolId is the Tool published under that name on
    the run's host, so the grant set is synced with the Tools' UUIDs, as the Portal sends it.
    """
    tools = [await publish_tool(owner, toolName=name) for name in OFFER_TOOLS]
    grants = [
        {"grantId": new_id(), "toolId": tool.tool_id, "toolVersion": "1.0.0",
         "lightapiDigest": "sha256:" + "a" * 64, "allowedEnvironments": ["dev", "prod"]}
        for tool in tools
    ]  # fmt: skip
    args = {"hostId": HOST, "wfDefId": wf_def_id, "sourceRevision": 1, "actor": "steve",
            "grants": grants}  # fmt: skip
    ok(await owner.call_tool("workflow_definition_grants_sync", args))


async def save_document(owner: McpTestClient, document: dict[str, Any]) -> str:
    """Save the document as an active head under its own name and version; its wfDefId."""
    header = document["document"]
    wf_def_id = new_id()
    saved = {
        "hostId": HOST, "wfDefId": wf_def_id, "namespace": header["namespace"],
        "name": header["name"], "version": header["version"],
        "definition": dump_definition(document), "owner": {"userId": OWNER,
        "positionId": OWNER_POSITION}, "sourceRevision": 1, "actor": "steve",
        "lifecycleStatus": "PUBLISHED", "catalogVisible": False, "active": True,
    }  # fmt: skip
    ok(await owner.call_tool("workflow_definition_save", saved))
    return wf_def_id


async def publish_document(
    owner: McpTestClient, document: dict[str, Any], targets: list[dict[str, Any]], *, write: bool
) -> Tool:
    """Save and publish the document under its own name and version, then an active Tool."""
    text = dump_definition(document)
    header = document["document"]
    wf_def_id, tool_id = new_id(), new_id()
    common = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": header["namespace"],
        "name": header["name"],
        "version": header["version"],
        "definition": text,
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
    }
    saved = {**common, "sourceRevision": 1, "actor": "steve", "lifecycleStatus": "PUBLISHED",
             "catalogVisible": False, "active": True}  # fmt: skip
    ok(await owner.call_tool("workflow_definition_save", saved))
    published = {**common, "expectedDefinitionDigest": definition_digest(text),
                 "bindingApproval": "carryOver", "operationId": new_id()}  # fmt: skip
    ok(await owner.call_tool("workflow_definition_publish", published))
    make = write_binding if write else binding
    value = make(wf_def_id, tool_id, text, workflowVersion=header["version"])
    args = publish_args(value, 0, endpoint_targets=targets)
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return Tool(
        tool_id=tool_id,
        wf_def_id=wf_def_id,
        binding_id=receipt["bindingId"],
        binding_digest=receipt["bindingDigest"],
        definition_digest=definition_digest(text),
        aggregate_version=receipt["aggregateVersion"],
        text=text,
    )


def risk_target(base: str) -> dict[str, Any]:
    """The endpoint target of the risk service's one POST."""
    return endpoint_target("risk", f"{base}/risk/evaluate", ("POST",))
