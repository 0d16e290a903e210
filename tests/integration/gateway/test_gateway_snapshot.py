"""The Gateway's snapshot: reloaded on change without a restart; a bad new file is logged and the
last good snapshot keeps serving."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gateway.app import Gateway
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import OWNER
from tests.support.gateway import TOOL_NAME, entry, gateway_client, write_tools
from tests.support.invocation import Tool, ok, publish_tool
from tests.support.log_scan import LogScan
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Gateway Changes")


async def routed_names(caller: McpTestClient) -> set[str]:
    """The workflow-backed Tools the caller sees (names with a dot; relayed ones have none)."""
    tools = (await caller.request("tools/list")).result["tools"]
    return {tool["name"] for tool in tools if "." in tool["name"]}


async def test_a_new_snapshot_is_served_without_a_restart_and_a_bad_one_keeps_the_last_good(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    log_scan: LogScan,
    workers: object,
) -> None:
    owner = gateway_client(gateway_http, dev_identity, roles=("admin",), user_id=OWNER)
    tool = await publish_tool(owner)
    caller = gateway_client(gateway_http, dev_identity)
    assert await routed_names(caller) == set()
    write_tools(router_file, entry(tool))

    async def serves(names: set[str]) -> bool:
        return await routed_names(caller) == names

    await wait_until(lambda: serves({TOOL_NAME}), what="the first snapshot served")
    write_tools(router_file, entry(tool), entry(tool, "claims.second"))
    await wait_until(lambda: serves({TOOL_NAME, "claims.second"}), what="the reload")

    mark = len(log_scan.lines)

    async def refused(count: int) -> bool:
        # A request is what makes the Gateway look at the file again.
        assert await routed_names(caller) == {TOOL_NAME, "claims.second"}
        return sum("is invalid" in line for line in log_scan.since(mark)) >= count

    text = router_file.read_text(encoding="utf-8")
    # A repeated name, then text that is not YAML: each is refused and logged in turn.
    router_file.write_text(text.replace("claims.second", TOOL_NAME), encoding="utf-8")
    await wait_until(lambda: refused(1), what="the invalid snapshot logged")
    router_file.write_text("tools: [unclosed", encoding="utf-8")
    await wait_until(lambda: refused(2), what="the unreadable snapshot logged")
    assert ok(await caller.call_tool("claims.second", {"claimId": "C-7"})) == {"marker": 1}

    write_tools(router_file, entry(tool, "claims.third"))
    await wait_until(lambda: serves({"claims.third"}), what="a good snapshot after bad ones")


async def test_a_snapshot_s_input_schemas_are_compiled_once_and_again_after_a_reload(
    gateway: Gateway, router_file: Path
) -> None:
    tool = Tool(
        tool_id="0198a3c2-0000-7000-8000-000000000001",
        wf_def_id="0198a3c2-0000-7000-8000-000000000002",
        binding_id="",
        binding_digest="sha256:" + "b" * 64,
        definition_digest="sha256:" + "d" * 64,
        aggregate_version=1,
        text="",
    )
    write_tools(router_file, entry(tool))
    await wait_until(lambda: len(gateway.watcher.current().tools) == 1, what="the snapshot")
    snapshot = gateway.watcher.current()
    prepared = gateway.prepared(snapshot)
    assert prepared[TOOL_NAME].input_check.validator is not None
    # Every call against the same snapshot gets the same compiled checks.
    assert gateway.prepared(snapshot) is prepared
    write_tools(router_file, entry(tool), entry(tool, "claims.second"))
    await wait_until(lambda: gateway.watcher.current() is not snapshot, what="the reload")
    reloaded = gateway.prepared(gateway.watcher.current())
    assert set(reloaded) == {TOOL_NAME, "claims.second"}
