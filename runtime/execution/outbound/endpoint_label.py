"""Outbound calls observed by telemetry: a span and metrics per call, by endpoint reference.

Decorators on the wire functions (runtime.execution.outbound), so the effect code that calls
them stays about effects.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from runtime import telemetry
from runtime.engine.run import HttpRequest
from runtime.execution.targets import HttpPolicy, policy_for

T = TypeVar("T")
UNBOUND = "allowlist"  # runs without a binding reach configured prefixes, not named endpoints
UNMATCHED = "other"
GATEWAY = "gateway"  # every MCP call goes through the Gateway's one MCP URL


def endpoint_label(policy: HttpPolicy, method: str, uri: str) -> str:
    """The endpointRef of the target uri falls under (a bounded metric label)."""
    if policy.targets is None:
        return UNBOUND
    uri = policy.approved(uri)  # a call through the Gateway counts for the endpoint it replaces
    for target in policy.targets:
        # The same matching the policy applies, one target at a time.
        single = policy_for((target,), (), policy.environment)
        try:
            single.check(method, uri)
        except Exception:
            continue
        return target.endpoint_ref
    return UNMATCHED


def observed_http(send: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Observe send(client, request, policy, ...) as one outbound HTTP call."""
    signature = inspect.signature(send)

    @functools.wraps(send)
    async def observed(*args: Any, **kw: Any) -> T:
        bound = signature.bind(*args, **kw)
        request: HttpRequest = bound.arguments["request"]
        policy: HttpPolicy = bound.arguments["policy"]
        label = endpoint_label(policy, request.method, request.uri)
        return await telemetry.outbound("http", label, send(*args, **kw))

    return observed


def observed_mcp(send: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Observe send(client, url, request, headers, ...) as one outbound MCP call."""

    @functools.wraps(send)
    async def observed(*args: Any, **kw: Any) -> T:
        return await telemetry.outbound("mcp", GATEWAY, send(*args, **kw))

    return observed
