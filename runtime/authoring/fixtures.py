"""Fixtures that run: a draft's fixtures executed by our engine against stub Tools (issue 38).

Each fixture runs the parsed definition with its input. A `call: mcp` answers the fixture's
next recorded answer for that Tool, else a stub built from the Tool's output schema (the
smallest value it accepts); nothing leaves the process (an HTTP call fails). A run passes when
it gives exactly the expected output, or faults (with the expected status when one is given).
Runs happen in a worker thread on a loop of their own, with an instant clock, so they never
hold the serving loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from msgspec import UNSET

from generated.models import AuthoringFixture, AuthoringFixtureResult
from runtime.engine import WorkflowDefinition
from runtime.engine.run import (
    EffectFailure,
    HttpRequest,
    HttpResponse,
    McpRequest,
    RunLimits,
    run_workflow,
)

_MAX_STUB_DEPTH = 16


def stub_value(schema: Any, depth: int = 0) -> Any:
    """The smallest value a JSON Schema plausibly accepts (a stub Tool's answer)."""
    if not isinstance(schema, Mapping) or depth > _MAX_STUB_DEPTH:
        return {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {
            name: stub_value(properties.get(name, {}), depth + 1)
            for name in required
            if isinstance(name, str)
        }
    if kind == "array":
        count = schema.get("minItems", 0) if isinstance(schema.get("minItems"), int) else 0
        return [stub_value(schema.get("items", {}), depth + 1) for _ in range(min(count, 8))]
    if kind == "string":
        length = schema.get("minLength", 0) if isinstance(schema.get("minLength"), int) else 0
        return "x" * min(length, 64)
    if kind in ("integer", "number"):
        minimum = schema.get("minimum")
        return minimum if isinstance(minimum, int) else 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return {}


@dataclass
class StubTools:
    """The effect port of a fixture run: recorded answers, then schema stubs."""

    output_schemas: Mapping[str, Any]
    answers: list[tuple[str, dict[str, Any] | None, bool]]
    calls: list[str] = field(default_factory=list)

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        """A draft makes no HTTP call; a fixture run never leaves the process."""
        raise EffectFailure("communication", "fixture runs make no HTTP calls")

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        """The next recorded answer of this Tool, else its output schema's stub."""
        self.calls.append(request.tool)
        for index, (tool, content, failed) in enumerate(self.answers):
            if tool == request.tool:
                del self.answers[index]
                if failed:
                    text = {"type": "text", "text": "recorded failure"}
                    return {"content": [text], "isError": True}
                return {"content": [], "structuredContent": content or {}}
        if request.tool not in self.output_schemas:
            return {"content": [{"type": "text", "text": "unknown Tool"}], "isError": True}
        stub = stub_value(self.output_schemas[request.tool])
        return {"content": [], "structuredContent": stub}


class _InstantClock:
    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.time += seconds


def _same(left: Any, right: Any) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _verdict(fixture: AuthoringFixture, status: str, output: Any, fault: Any) -> tuple[bool, str]:
    expect = fixture.expect
    if expect.fault is not UNSET:
        if status != "faulted":
            return False, "expected a fault; the run completed"
        wanted = expect.fault.status
        got = (fault or {}).get("status")
        if wanted is not UNSET and wanted != got:
            return False, f"expected a fault with status {wanted}; the run faulted with {got}"
        return True, "the run faulted as expected"
    if status != "completed":
        title = (fault or {}).get("title") or "a fault"
        return False, f"expected an output; the run faulted: {str(title)[:512]}"
    if not _same(output, expect.output):
        return False, "the run's output differs from the expected output"
    return True, "the run gave the expected output"


async def _run_one(
    definition: WorkflowDefinition, fixture: AuthoringFixture, output_schemas: Mapping[str, Any]
) -> AuthoringFixtureResult:
    answers = [
        (
            answer.tool,
            None if answer.structured_content is UNSET else answer.structured_content,
            answer.is_error is True,
        )
        for answer in ([] if fixture.tool_answers is UNSET else fixture.tool_answers)
    ]
    port = StubTools(output_schemas, answers)
    limits = RunLimits(total_deadline_ms=None)
    try:
        outcome = await run_workflow(definition, fixture.input, port, limits, clock=_InstantClock())
    except Exception:  # a fixture that breaks the engine fails; it never fails the draft
        passed, message = False, "the run could not be completed"
    else:
        passed, message = _verdict(fixture, outcome.status, outcome.output, outcome.fault)
    return AuthoringFixtureResult(
        name=fixture.name, category=fixture.category, passed=passed, message=message
    )


async def _run_all(
    definition: WorkflowDefinition,
    fixtures: Sequence[AuthoringFixture],
    output_schemas: Mapping[str, Any],
) -> list[AuthoringFixtureResult]:
    return [await _run_one(definition, fixture, output_schemas) for fixture in fixtures]


def run_fixtures_blocking(
    definition: WorkflowDefinition,
    fixtures: Sequence[AuthoringFixture],
    output_schemas: Mapping[str, Any],
) -> list[AuthoringFixtureResult]:
    """Run every fixture on a loop of this thread's own (for a worker thread or a CLI)."""
    return asyncio.run(_run_all(definition, fixtures, output_schemas))


async def run_fixtures(
    definition: WorkflowDefinition,
    fixtures: Sequence[AuthoringFixture],
    output_schemas: Mapping[str, Any],
) -> list[AuthoringFixtureResult]:
    """Run every fixture in a worker thread; one result per fixture, in order."""
    return await asyncio.to_thread(run_fixtures_blocking, definition, fixtures, output_schemas)
