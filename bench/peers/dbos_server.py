"""The DBOS peer: one-step DBOS workflows served as MCP tools by the official MCP Python SDK.

    .bench-peers-venv/bin/python bench/peers/dbos_server.py --port P --database-url URL --tools 8

Runs only in the peer's own venv (bench/peers/requirements.txt: dbos, mcp pinned); it imports
nothing from this repository. Tools `decide`, `decide-1` ... `decide-<n-1>` each run their own
DBOS workflow whose one @DBOS.step makes the decision; the caller's requestId is the workflow
id, so a retried call returns the recorded result as a derived idempotency key does for us.
Served stateless over streamable HTTP with JSON responses (no SSE, no session), on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import TypedDict

import uvicorn
from dbos import DBOS, DBOSConfig, SetWorkflowID
from mcp.server.mcpserver import MCPServer

APPROVE_AT = 650


class Decision(TypedDict):
    """The tool's structured output (the same shape as the workflow-backed Tool's output)."""

    decision: str
    requestId: str


def tool_names(count: int) -> list[str]:
    """decide, decide-1, ... (the first name is the one-Tool phases' tool)."""
    return ["decide"] + [f"decide-{index}" for index in range(1, count)]


def make_tool(index: int) -> Callable[[int, str], Awaitable[Decision]]:
    """A tool body running its own registered DBOS workflow with one step."""

    @DBOS.step(name=f"decide_step_{index}")
    async def decide_step(credit_score: int) -> str:
        return "approve" if credit_score >= APPROVE_AT else "decline"

    @DBOS.workflow(name=f"decide_workflow_{index}")
    async def decide_workflow(credit_score: int, request_id: str) -> Decision:
        decision = await decide_step(credit_score)
        return {"decision": decision, "requestId": request_id}

    # The parameters are named as the MCP arguments are (the input schema is derived from them).
    async def decide(creditScore: int, requestId: str) -> Decision:
        """Approve a credit score of at least 650, else decline."""
        with SetWorkflowID(requestId):
            return await decide_workflow(creditScore, requestId)

    return decide


def build(database_url: str, tools: int, pool_size: int) -> MCPServer:
    """Register the workflows and tools, launch DBOS on database_url, return the MCP server."""
    config: DBOSConfig = {
        "name": "bench-peer",
        "system_database_url": database_url,
        "sys_db_pool_size": pool_size,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    server = MCPServer("dbos-peer", log_level="WARNING")
    for index, name in enumerate(tool_names(tools)):
        server.tool(name=name, structured_output=True)(make_tool(index))
    DBOS.launch()
    return server


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True, help="the DBOS system database")
    parser.add_argument("--tools", type=int, default=1)
    parser.add_argument("--pool-size", type=int, default=20, help="DBOS system pool size")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    server = build(args.database_url, args.tools, args.pool_size)
    app = server.streamable_http_app(json_response=True, stateless_http=True, host="127.0.0.1")
    print(f"dbos peer serving MCP on http://127.0.0.1:{args.port}/mcp", flush=True)
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
    )  # fmt: skip
    DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
