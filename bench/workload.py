"""What the invoke benchmark publishes and runs: definitions, Tools per host, a batch backlog.

Tools are published through POST /mcp as the Portal does (save the head, publish the version,
publish an owner-approved binding). The batch backlog is admitted at the store: a sync Tool
must use the interactive class, so no MCP call can start batch runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from bench.harness import Gateway, Service, gateway_for, new_id
from runtime.canonical import definition_digest, load_definition_yaml
from runtime.store import Database
from tests.support.binding_builders import POLICY_DIGEST, binding
from tests.support.execution_runs import start_workflow_run

OWNER = "bench-owner"
CALLER_ROLES = ("admin", "workflow-admin")
UNLIMITED = 1_000_000_000
KINDS = ("set1", "set8", "http1", "http8")


def definition(kind: str, backend_url: str) -> str:
    """set1/set8: one or eight set tasks; http1/http8: the same with one GET to the backend."""
    count = 8 if kind.endswith("8") else 1
    tasks = [f"  - s{i}:\n      set:\n        step: {i}\n" for i in range(count)]
    if kind.startswith("http"):
        tasks[-1] = (
            f"  - fetch:\n      call: http\n      with:\n        method: GET\n"
            f"        endpoint: {backend_url}/claims\n"
        )
    return (
        f'document:\n  dsl: "1.0.3"\n  namespace: bench\n  name: {kind}\n  version: "1.0.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n" + "".join(tasks)
    )


# The one-task `decide` Tool that bench.peers serves from our service and from the DBOS peer.
DECIDE_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["creditScore", "requestId"],
    "properties": {"creditScore": {"type": "integer"}, "requestId": {"type": "string"}},
    "additionalProperties": False,
}


def decide_definition(name: str) -> str:
    """One set task: {creditScore, requestId} -> {decision, requestId} (approve at 650)."""
    return (
        f'document:\n  dsl: "1.0.3"\n  namespace: bench\n  name: {name}\n  version: "1.0.0"\n'
        # JSON is YAML: the schema is written once, here and in the Gateway's router entry.
        f"input:\n  schema:\n    format: json\n    document: {json.dumps(DECIDE_INPUT_SCHEMA)}\n"
        "do:\n  - decide:\n      set:\n"
        "        decision: \"${ .creditScore >= 650 ? 'approve' : 'decline' }\"\n"
        '        requestId: "${ .requestId }"\n'
    )


@dataclass(frozen=True)
class Tool:
    """A published Tool and the arguments the Gateway sends for it."""

    host_id: str
    kind: str
    tool_id: str
    wf_def_id: str
    binding_digest: str
    definition_digest: str

    def invoke_args(self, n: int) -> dict[str, Any]:
        """workflow_invoke arguments; n makes the input (and so the derived key) unique."""
        return {
            "stableToolRef": self.tool_id,
            "expectedBindingDigest": self.binding_digest,
            "expectedDefinitionDigest": self.definition_digest,
            "input": {"n": n},
        }


def _binding(
    kind: str, wf_def_id: str, tool_id: str, text: str, **overrides: Any
) -> dict[str, Any]:
    """The tests' read-only sync binding, named for the bench and with no admission limit."""
    fields: dict[str, Any] = {
        "version": "1.0.0",
        "toolName": f"bench.{kind}",
        "admissionLimits": {
            "maximumConcurrentRuns": UNLIMITED,
            "maximumConcurrentRunsPerUser": UNLIMITED,
            "startsPerMinute": UNLIMITED,
            "startsPerMinutePerUser": UNLIMITED,
        },
    }
    return binding(wf_def_id, tool_id, text, **(fields | overrides))


def _ok(reply: Any, what: str) -> dict[str, Any]:
    if reply.outcome != "OK":
        raise RuntimeError(f"{what} failed: {reply.outcome} {reply.body}")
    return dict(reply.body["result"]["structuredContent"])


async def _save_and_publish(owner: Gateway, host_id: str, wf_def_id: str, kind: str, text: str):  # type: ignore[no-untyped-def]
    common = {"hostId": host_id, "wfDefId": wf_def_id, "namespace": "bench", "name": kind}
    owner_ref = {"userId": OWNER, "positionId": "pos-1"}
    save = {
        **common,
        "sourceRevision": 1,
        "actor": "bench",
        "version": "1.0.0",
        "definition": text,
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": owner_ref,
        "active": True,
    }
    _ok(await owner.call("workflow_definition_save", save), f"save {kind}")
    publish = {
        **common,
        "version": "1.0.0",
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": "carryOver",
        "owner": owner_ref,
        "operationId": new_id(),
    }
    _ok(await owner.call("workflow_definition_publish", publish), f"publish {kind}")


async def publish_tool(
    owner: Gateway, service: Service, host_id: str, kind: str, **binding_fields: Any
) -> Tool:
    """Save, publish and bind one kind of workflow on host_id as its owner (binding overrides)."""
    targets = []
    if kind.startswith("http"):
        targets.append(
            {
                "endpointRef": "backend",
                "endpointUri": f"{service.backend_url}/claims",
                "allowedMethods": ["GET"],
                "environments": ["dev"],
                "authorizationPolicyDigest": POLICY_DIGEST,
            }
        )
    return await publish_text_tool(
        owner, host_id, kind, definition(kind, service.backend_url), targets, **binding_fields
    )


async def publish_text_tool(
    owner: Gateway,
    host_id: str,
    kind: str,
    text: str,
    targets: list[dict[str, Any]],
    **binding_fields: Any,
) -> Tool:
    """Save, publish and bind the definition `text` as Tool bench.<kind> on host_id."""
    wf_def_id, tool_id = new_id(), new_id()
    await _save_and_publish(owner, host_id, wf_def_id, kind, text)
    args = {
        "hostId": host_id,
        "binding": _binding(kind, wf_def_id, tool_id, text, **binding_fields),
        "dependencies": [],
        "endpointTargets": targets,
        "expectedAggregateVersion": 0,
        "operationId": new_id(),
    }
    receipt = _ok(await owner.call("workflow_binding_publish", args), f"bind {kind}")
    if receipt.get("status") != "active":
        raise RuntimeError(f"binding of {kind} is not active: {receipt}")
    return Tool(
        host_id, kind, tool_id, wf_def_id, receipt["bindingDigest"], definition_digest(text)
    )


@dataclass
class Tenants:
    """Per host: a Gateway client for its caller and its Tools by kind."""

    hosts: list[str]
    callers: dict[str, Gateway]
    tools: dict[str, dict[str, Tool]]


async def publish_tenants(
    service: Service, clients: list[httpx.AsyncClient], kinds: tuple[str, ...]
) -> Tenants:
    """One host per client, each with every kind of Tool published and a caller."""
    hosts = [new_id() for _ in clients]
    callers, tools = {}, {}
    for host_id, http in zip(hosts, clients, strict=True):
        owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
        tools[host_id] = {kind: await publish_tool(owner, service, host_id, kind) for kind in kinds}
        callers[host_id] = gateway_for(service, http, host_id, "bench-caller", CALLER_ROLES)
    return Tenants(hosts, callers, tools)


class BatchBacklog:
    """Keeps about `depth` batch tasks ready on its own host (cross-tenant batch backlog)."""

    def __init__(self, service: Service, depth: int) -> None:
        self.service = service
        self.depth = depth
        self.host_id = new_id()
        self.admitted = 0
        self._db = Database(service.database_url, runtime_role="workflow_runtime", max_size=2)
        self._task: asyncio.Task[None] | None = None
        self._numbers = itertools.count()

    async def __aenter__(self) -> BatchBacklog:
        await self._db.open()
        self._task = asyncio.create_task(self._keep())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._db.close()

    async def _ready(self) -> int:
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS ready FROM workflow_task"
                " WHERE host_id = %s AND state = 'ready' AND execution_class = 'batch'",
                (uuid.UUID(self.host_id),),
            )
            row = await cursor.fetchone()
        return int(row["ready"]) if row else 0

    async def _keep(self) -> None:
        document = load_definition_yaml(definition("set8", self.service.backend_url))
        keyring = self.service.identity.keyring()
        while True:
            missing = self.depth - await self._ready()
            for _ in range(max(0, missing)):
                await start_workflow_run(
                    self._db,
                    host_id=self.host_id,
                    user_id="bench-batch",
                    input={"n": next(self._numbers)},
                    keyring=keyring,
                    credential=None,
                    definition=document,
                    execution_class="batch",
                    timeout_ms=600_000,
                )
                self.admitted += 1
            await asyncio.sleep(0.1)
