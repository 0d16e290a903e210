"""Merging mcp-router.yml: active receipts in, pending and failed Tools keep their entry."""

from __future__ import annotations

import pytest

from gateway.router import RoutedTool, RouterSnapshot
from publisher.routes import merge
from tests.support.publisher_harness import tools_by_name

pytestmark = pytest.mark.requirement("000:Publish ordering")


def entry(name: str, digest: str) -> RoutedTool:
    """A routed Tool whose bindingDigest is made of one repeated character."""
    return RoutedTool(
        name=name,
        stable_tool_ref="9a48b917-a8a2-590e-bbd5-ac875f56c143",
        workflow_definition_id="a1f1b996-809d-521d-9132-ed891bcc8510",
        workflow_version="1.0.0",
        definition_digest="sha256:" + "d" * 64,
        binding_digest="sha256:" + digest * 64,
        input_schema={"type": "object"},
        sync_wait_ms=20000,
    )


def test_an_active_receipt_replaces_the_entry_and_others_are_kept_in_order() -> None:
    previous = RouterSnapshot(tools=(entry("a", "1"), entry("b", "1"), entry("c", "1")))
    merged = merge(previous, {"b": entry("b", "2"), "new": entry("new", "3")})
    assert [t.name for t in merged.tools] == ["a", "b", "c", "new"]
    assert tools_by_name(merged)["b"].binding_digest == "sha256:" + "2" * 64
    assert tools_by_name(merged)["a"] == tools_by_name(previous)["a"]


def test_a_tool_without_an_active_receipt_keeps_its_entry_or_stays_out() -> None:
    previous = RouterSnapshot(tools=(entry("pending", "1"),))
    merged = merge(previous, {})
    assert merged.tools == previous.tools
    assert "failed-new" not in tools_by_name(merged)
