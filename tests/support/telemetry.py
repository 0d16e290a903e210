"""A Tool whose run makes one HTTP GET to a local backend, and span/metric readers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from runtime.canonical import definition_digest
from runtime.telemetry.tracing import add_span_processor
from tests.support.binding_builders import (
    binding,
    definition_yaml,
    endpoint_target,
    new_id,
    publish_args,
)
from tests.support.invocation import Tool, ok, publish_version, save_head
from tests.support.mcp import McpTestClient

ENDPOINT_REF = "claims-backend"


def fetching_definition(base: str) -> str:
    """A definition that sets a marker, then GETs {base}/claims."""
    fetch = (
        "  - fetch:\n      call: http\n      with:\n        method: GET\n"
        f"        endpoint: {base}/claims\n"
    )
    return definition_yaml(extra_task=fetch)


async def publish_fetching_tool(owner: McpTestClient, base: str) -> Tool:
    """Publish and approve a read-only Tool whose one endpoint target is {base}/claims."""
    text = fetching_definition(base)
    wf_def_id, tool_id = new_id(), new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    await publish_version(owner, wf_def_id, text, "1.2.0")
    args = publish_args(
        binding(wf_def_id, tool_id, text),
        0,
        endpoint_targets=[endpoint_target(ENDPOINT_REF, f"{base}/claims")],
    )
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


@contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """Every span finished in the block, kept in memory (the exporter stops afterwards)."""
    exporter = InMemorySpanExporter()
    add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        exporter.shutdown()


def samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each sample of a Prometheus text exposition by (name, sorted labels)."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    """One sample's value (0 when the series does not exist yet)."""
    return found.get((name, tuple(sorted(labels.items()))), 0.0)
