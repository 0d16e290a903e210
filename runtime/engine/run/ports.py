"""The interpreter's outside world: the effect port (HTTP and MCP dispatch), clock and limits."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.engine.cel.compiler import DEFAULT_LIMITS, CelLimits
from runtime.engine.model import CredentialPolicy


@dataclass(frozen=True)
class HttpRequest:
    """One outbound HTTP call of a task."""

    task: str
    method: str
    uri: str
    # Not in the repr: once sent they may hold a credential the policy added.
    headers: dict[str, str] = field(repr=False)
    query: dict[str, str]
    body: Any
    redirect: bool
    authentication: str | None
    write: bool
    # The policy `authentication` names; secrets by name, opened only at dispatch.
    credential: CredentialPolicy | None = None
    # What the task's `compensate:` needs, ledgered with the write (None: no compensation).
    compensation: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class HttpResponse:
    """What came back: status, headers (lower-case names) and the raw body."""

    status_code: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class McpRequest:
    """One MCP tools/call of a task (the dispatcher sends initialize first)."""

    task: str
    endpoint: str
    tool: str
    arguments: Any
    protocol_version: str
    write: bool
    credential: CredentialPolicy | None = None
    # What the task's `compensate:` needs, ledgered with the write (None: no compensation).
    compensation: dict[str, Any] | None = field(default=None, repr=False)


class EffectFailure(Exception):
    """A dispatch failure: ``communication`` (transport), ``runtime`` (protocol),
    ``authentication`` (no usable credential for the call) or ``authorization`` (a secret the
    call's policy reads is missing)."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


class EffectPort(Protocol):
    """Real dispatch is plugged in by the durable executor; tests use a fake."""

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        """Send one HTTP request."""
        ...

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        """Send one MCP tools/call and return the JSON-RPC result."""
        ...


class Clock(Protocol):
    """Time source for waits and retry delays, injectable so tests need not sleep."""

    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait for a duration."""
        ...


class RealClock:
    """The event loop's clock."""

    def now(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """asyncio.sleep."""
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RunLimits:
    """Runtime bounds of one run (from the binding's runtimeBounds and the profile)."""

    total_deadline_ms: int | None = 30_000
    maximum_task_attempts: int = 8
    maximum_parallelism: int = 8
    maximum_nested_calls: int = 16
    maximum_iterations: int = 100
    read_only_tools: frozenset[str] = frozenset()
    cel: CelLimits = DEFAULT_LIMITS
    runtime_name: str = "workflow-mcp"
    runtime_version: str = "0.1.0"
    jitter: random.Random = field(default_factory=lambda: random.Random(0), compare=False)
    # A wait or retry back-off longer than this parks the run as a durable timer (``timers``);
    # None: every wait sleeps in the run (the pure interpreter's default).
    in_slot_wait_s: float | None = None
