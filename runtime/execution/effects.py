"""The durable EffectPort: every outbound call is checked, budgeted, ledgered and bounded.

Order per call: deadline, destination (or live grant), replay from the step ledger, budget
reservation, permit (MCP), effect ``possible``, dispatch, effect ``confirmed``, reconcile.
Only writes enter the step ledger: a read is idempotent and is simply sent again on replay.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from runtime.binding_reach import Dependency, Reach, dependency_for
from runtime.canonical import CanonicalError, canonical_digest, sha256_digest
from runtime.engine.run import EffectFailure, HttpRequest, HttpResponse, McpRequest
from runtime.errors import WorkflowError
from runtime.execution import store
from runtime.execution.credential import RunToken
from runtime.execution.outbound import GatewayUnauthorized, encode_body, send_http, send_mcp
from runtime.execution.outbound.auth import SecretSource, policy_header, with_credential
from runtime.execution.service_token import ServiceTokenError, ServiceTokens
from runtime.execution.settings import ExecutionSettings
from runtime.execution.targets import HttpPolicy
from runtime.publication.pinned import LiveGrant
from runtime.scheduler import faults
from runtime.scheduler.errors import LeaseLost, uncertain_effect_error
from runtime.scheduler.lease import TaskLease
from runtime.scheduler.models import ClaimedTask
from runtime.security import SecretToken
from runtime.store import Database

# Step numbers: top-level task n runs as scheduler step n * CALL_SLOTS; its k-th write call
# is ledgered at n * CALL_SLOTS + k, so calls never collide with each other or with tasks.
CALL_SLOTS = 1000
AFTER_DISPATCH_POINT = "after_effect_dispatch"
AFTER_CONFIRM_POINT = "after_effect_confirmed"
# Every outbound dispatch (a call or one of its retries) costs one cost unit and one attempt.
DISPATCH_COST_UNITS = 1
TokenSource = Callable[[], Awaitable[RunToken]]
SERVICE_TOKEN_UNAVAILABLE = "Workflow's service token is unavailable"

log = logging.getLogger("workflow.execution.effects")


class RunDeadlineExpired(Exception):
    """The run's deadline passed before a new dispatch or wait could start."""


@dataclass
class CallContext:
    """What the effect port of one claimed task knows about its run."""

    db: Database
    task: ClaimedTask
    lease: TaskLease
    settings: ExecutionSettings
    policy: HttpPolicy
    client: httpx.AsyncClient
    user_id: str
    wf_def_id: str | None
    reach: Reach | None
    token: TokenSource
    prior_calls: dict[int, store.CallStep] = field(default_factory=dict)
    # Host secrets by name, opened at dispatch (None: a run that reads none).
    secret: SecretSource | None = None
    # Workflow's own application token for X-Scope-Token (None: nested calls carry none).
    service_token: ServiceTokens | None = None


class DurableEffects:
    """EffectPort for the interpreter, bound to one claimed scheduler task."""

    def __init__(self, ctx: CallContext) -> None:
        self._ctx = ctx
        self._writes = 0
        # Fingerprints of recorded steps this replay resumed from, to spot a moved write.
        self._resumed: Counter[str] = Counter()

    # deadline -----------------------------------------------------------------------------

    def remaining_s(self) -> float:
        """Seconds left before the run's deadline."""
        return (self._ctx.task.deadline_ts - datetime.now(UTC)).total_seconds()

    async def _before_dispatch(self) -> float:
        self._ctx.lease.check()
        if self._ctx.task.cancellation_policy == "cooperative":
            # A cancelled run sends nothing more: the task and the run end as cancelled.
            await self._ctx.lease.check_cancelled()
        remaining = self.remaining_s()
        if self._ctx.task.cancellation_policy == "disabled":
            # Never cancelled, but never unbounded: the hard ceiling is the deadline plus the
            # write overrun, after which nothing new is dispatched (the sweep ends the run).
            remaining += self._ctx.settings.write_overrun_s
        if remaining <= 0:
            raise RunDeadlineExpired()
        return max(remaining, 0.001)

    def _timeout(self, remaining: float, write: bool) -> float:
        if self._ctx.task.cancellation_policy == "disabled":
            return remaining  # already the time left before the hard ceiling
        # A started write is left to finish (before-effects-only); a read ends at the deadline.
        return remaining + self._ctx.settings.write_overrun_s if write else remaining

    # ledger replay --------------------------------------------------------------------------

    def _next_write_step(self) -> int:
        self._writes += 1
        if self._writes >= CALL_SLOTS:
            raise WorkflowError(
                "WORKFLOW_BUDGET_EXHAUSTED", "too many write calls in one task", status="failed"
            )
        return self._ctx.task.step_no + self._writes

    def _recorded(self, step_no: int, fingerprint: str | None = None) -> Any | None:
        """A confirmed output to resume from; refuses a write that may already have happened.

        Fork branches run concurrently, so a write's ordinal can differ on replay: a recorded
        step is this call's only when its fingerprint matches (rows without one match by
        ordinal alone, as before). Must run right after _next_write_step, with no await between,
        so every lower ordinal has already been checked.
        """
        prior = self._ctx.prior_calls.get(step_no)
        if prior is None:
            if fingerprint is not None and self._unresumed(fingerprint):
                # This call was recorded at another ordinal that a different call has taken.
                raise uncertain_effect_error(step_no)
            return None
        recorded_digest = prior.request_digest
        if fingerprint is not None and recorded_digest not in (None, fingerprint):
            raise uncertain_effect_error(step_no)
        if prior.effect_state == "confirmed" and prior.output is not None:
            if recorded_digest is not None:
                self._resumed[recorded_digest] += 1
            return prior.output
        raise uncertain_effect_error(step_no)

    def _unresumed(self, fingerprint: str) -> bool:
        recorded = sum(
            1 for prior in self._ctx.prior_calls.values() if prior.request_digest == fingerprint
        )
        return recorded > self._resumed[fingerprint]

    # HTTP -----------------------------------------------------------------------------------

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        """Send one HTTP request within the run's destinations, budget and deadline."""
        remaining = await self._before_dispatch()
        self._ctx.policy.check(request.method, request.uri)
        fingerprint = http_fingerprint(request)
        step_no = self._next_write_step() if request.write else None
        if step_no is not None and (recorded := self._recorded(step_no, fingerprint)) is not None:
            return _response_from_record(recorded)
        sent = await with_credential(
            request, self._ctx.token, self._ctx.secret, self._ctx.settings.gateway_mcp_url
        )
        policy = self._ctx.policy.routed(request.uri, sent.uri)
        request = sent
        body_bytes = len(encode_body(request.body) or b"")
        reservation = await self._ctx.lease.reserve(
            attempts=1, request_bytes=body_bytes, cost_units=DISPATCH_COST_UNITS
        )
        try:
            if step_no is not None:
                await self._ctx.lease.mark_effect_possible(
                    step_no, request_digest=fingerprint, compensation=request.compensation
                )
            response = await send_http(
                self._ctx.client,
                request,
                policy,
                timeout_s=self._timeout(remaining, request.write),
                connect_timeout_s=self._ctx.settings.connect_timeout_s,
                max_bytes=self._ctx.settings.max_response_bytes,
                max_redirects=self._ctx.settings.max_redirects,
            )
            await faults.point(AFTER_DISPATCH_POINT)
            if step_no is not None:
                await self._ctx.lease.confirm_effect(_record_response(response), step_no)
                await faults.point(AFTER_CONFIRM_POINT)
            return response
        finally:
            await self._settle(
                reservation, attempts=1, request_bytes=body_bytes, cost_units=DISPATCH_COST_UNITS
            )

    # MCP ------------------------------------------------------------------------------------

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        """Send one tools/call through the Gateway under a live grant and a recorded permit."""
        remaining = await self._before_dispatch()
        dependency = self._dependency(request.tool)
        grant = await self._live_grant(request.tool, dependency)
        gateway = self._ctx.settings.gateway_mcp_url
        if gateway is None:
            raise WorkflowError("WORKFLOW_POLICY_DENIED", "no Gateway MCP URL is configured")
        fingerprint = mcp_fingerprint(request)
        step_no = self._next_write_step() if request.write else None
        if step_no is not None and (recorded := self._recorded(step_no, fingerprint)) is not None:
            return dict(recorded)
        token = (await self._ctx.token()).token
        scope = await self._scope_token()
        extra = await self._policy_headers(request)
        body_bytes = len(encode_body(request.arguments) or b"")
        reservation = await self._ctx.lease.reserve(
            attempts=1, nested_calls=1, request_bytes=body_bytes, cost_units=DISPATCH_COST_UNITS
        )
        try:
            action_id = await self._record_permit(request.tool, grant, dependency)
            if step_no is not None:
                await self._ctx.lease.mark_effect_possible(
                    step_no, request_digest=fingerprint, compensation=request.compensation
                )
            try:
                result = await self._send_mcp(
                    gateway, request, extra | self._headers(token, scope, action_id), remaining
                )
            except GatewayUnauthorized as refused:
                renewed = await self._renewed_scope(refused, request, scope)
                if renewed is None:
                    raise
                result = await self._resend_mcp(
                    gateway, request, extra | self._headers(token, renewed, action_id)
                )
            await faults.point(AFTER_DISPATCH_POINT)
            if step_no is not None:
                await self._ctx.lease.confirm_effect(result, step_no)
            return result
        finally:
            await self._settle(
                reservation,
                attempts=1,
                nested_calls=1,
                request_bytes=body_bytes,
                cost_units=DISPATCH_COST_UNITS,
            )

    async def _policy_headers(self, request: McpRequest) -> dict[str, str]:
        # An apiKey policy adds its header beside the Gateway call's own (which win on a clash).
        policy = request.credential
        if policy is None or policy.scheme != "apiKey" or self._ctx.secret is None:
            return {}
        name, value = await policy_header(policy, self._ctx.token, self._ctx.secret)
        return {name: value}

    async def _send_mcp(
        self, gateway: str, request: McpRequest, headers: dict[str, str], remaining: float
    ) -> dict[str, Any]:
        return await send_mcp(
            self._ctx.client,
            gateway,
            request,
            headers,
            timeout_s=self._timeout(remaining, request.write),
            connect_timeout_s=self._ctx.settings.connect_timeout_s,
            max_bytes=self._ctx.settings.max_response_bytes,
        )

    async def _scope_token(self) -> SecretToken | None:
        """Workflow's own token for X-Scope-Token; the call fails before it leaves without one."""
        if self._ctx.service_token is None:
            return None
        try:
            return await self._ctx.service_token.token()
        except ServiceTokenError as exc:
            log.warning("a nested MCP call has no service token: %s", exc.message)
            raise EffectFailure("authentication", SERVICE_TOKEN_UNAVAILABLE, 401) from None

    async def _renewed_scope(
        self, refused: GatewayUnauthorized, request: McpRequest, sent: SecretToken | None
    ) -> SecretToken | None:
        """The service token to send a refused nested call again with, or None: not again.

        A 401 may mean the Gateway no longer accepts Workflow's token (revoked or rotated before
        its expiry), so the token is renewed once and the call sent once more, but only when
        that cannot repeat an effect: the Gateway refused the session before the tools/call
        was sent, or the tool is read-only. A write refused at its tools/call is not sent
        again, since a 401 there does not prove that nothing happened behind the Gateway.
        """
        source = self._ctx.service_token
        if source is None or sent is None or (request.write and not refused.before_call):
            return None
        try:
            return await source.refresh(sent)
        except ServiceTokenError as exc:
            log.warning("the service token was not renewed after a 401: %s", exc.message)
            return None

    async def _resend_mcp(
        self, gateway: str, request: McpRequest, headers: dict[str, str]
    ) -> dict[str, Any]:
        # Another dispatch of the same call (same permit): one more attempt and cost unit.
        remaining = await self._before_dispatch()
        body_bytes = len(encode_body(request.arguments) or b"")
        reservation = await self._ctx.lease.reserve(
            attempts=1, request_bytes=body_bytes, cost_units=DISPATCH_COST_UNITS
        )
        try:
            return await self._send_mcp(gateway, request, headers, remaining)
        finally:
            await self._settle(
                reservation, attempts=1, request_bytes=body_bytes, cost_units=DISPATCH_COST_UNITS
            )

    def _dependency(self, tool: str) -> Dependency | None:
        if self._ctx.reach is None:
            return None
        dependency = dependency_for(tool, self._ctx.reach)
        if dependency is None:
            raise WorkflowError(
                "WORKFLOW_POLICY_DENIED",
                f"tool {tool} is not a dependency of the pinned binding revision",
                status="failed",
            )
        return dependency

    async def _live_grant(self, tool: str, dependency: Dependency | None) -> LiveGrant:
        # Read at every dispatch: an acknowledged revocation stops the very next call.
        grants: list[LiveGrant] = []
        if self._ctx.wf_def_id is not None:
            async with self._ctx.db.transaction(read_only=True) as conn:
                grants = await store.select_grants(
                    conn, self._ctx.task.host_id, self._ctx.wf_def_id
                )
        grant = matching_grant(grants, tool, dependency, self._ctx.settings.environment)
        if grant is None:
            raise WorkflowError(
                "WORKFLOW_POLICY_DENIED",
                f"the definition holds no live grant for tool {tool}",
                status="failed",
            )
        return grant

    async def _record_permit(
        self, tool: str, grant: LiveGrant, dependency: Dependency | None
    ) -> str:
        action_id = str(uuid.uuid4())
        digest = dependency.contract_digest if dependency else grant.lightapi_digest
        async with self._ctx.db.transaction() as conn:
            recorded = await store.insert_action_permit(
                conn,
                self._ctx.lease.state,
                action_id=action_id,
                user_id=self._ctx.user_id,
                grant_id=grant.grant_id,
                tool_name=tool,
                contract_digest=digest,
            )
        if not recorded:
            raise LeaseLost(self._ctx.task.task_id, "record_permit")
        return action_id

    def _headers(
        self, token: SecretToken, scope: SecretToken | None, action_id: str
    ) -> dict[str, str]:
        headers = {
            "authorization": f"Bearer {token.reveal()}",
            "x-workflow-action": action_id,
        }
        if scope is not None:
            headers["x-scope-token"] = f"Bearer {scope.reveal()}"
        return headers

    async def _settle(self, reservation: str, **actual: int) -> None:
        # Idempotent and fenced; a lost lease surfaces as LeaseLost from here.
        await self._ctx.lease.reconcile(reservation, **actual)


def matching_grant(
    grants: list[LiveGrant],
    tool: str,
    dependency: Dependency | None,
    environment: str | None,
) -> LiveGrant | None:
    """The first live grant covering the tool (by name, published Tool or dependency) here."""
    names = {tool}
    if dependency is not None:
        names |= {
            dependency.nested_tool_id,
            dependency.authorization_tool_name,
            dependency.dispatch_target,
        }
    for grant in grants:
        if grant.tool_id not in names and not _covers_by_publication(grant, tool, dependency):
            continue
        version = grant.tool_version
        if dependency is not None and version not in (None, dependency.nested_tool_version):
            continue
        environments = grant.allowed_environments
        if environment is not None and environments and environment not in environments:
            continue
        return grant
    return None


def _covers_by_publication(grant: LiveGrant, tool: str, dependency: Dependency | None) -> bool:
    # workflow_definition_grants_sync names a Tool by its stable toolId (a UUID), but a run
    # started with workflow_start has no pinned dependency to map a tool name to that id: its
    # `call: mcp` names the tool as the Gateway lists it. Such a call is covered by a grant
    # whose Tool is published under that name on the run's host right now (the grant read
    # joins the active head, scoped by host). A bound run keeps its pinned dependency path.
    return dependency is None and grant.published_tool_name == tool


def http_fingerprint(request: HttpRequest) -> str:
    """The identity of an HTTP call: method, URI, query and a digest of its body."""
    return _identity_digest(
        {
            "kind": "http",
            "method": request.method.upper(),
            "uri": request.uri,
            "query": request.query,
            "body": _identity_digest(request.body),
        }
    )


def mcp_fingerprint(request: McpRequest) -> str:
    """The identity of an MCP tools/call: tool name and a digest of its arguments."""
    return _identity_digest(
        {"kind": "mcp", "tool": request.tool, "arguments": _identity_digest(request.arguments)}
    )


def _identity_digest(value: Any) -> str:
    try:
        return canonical_digest(value)
    except CanonicalError:
        # Outside the canonical profile (fractions, lone surrogates): still a stable digest,
        # since a replay rebuilds the very same value from the same definition and inputs.
        encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)
        return sha256_digest(encoded.encode("utf-8"))


def _record_response(response: HttpResponse) -> dict[str, Any]:
    return {
        "statusCode": response.status_code,
        "headers": response.headers,
        "body": base64.b64encode(response.body).decode("ascii"),
    }


def _response_from_record(record: dict[str, Any]) -> HttpResponse:
    return HttpResponse(
        status_code=int(record["statusCode"]),
        headers=dict(record["headers"]),
        body=base64.b64decode(record["body"]),
    )
