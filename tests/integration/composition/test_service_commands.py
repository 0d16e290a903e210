"""The `workflow-mcp` commands against real databases and real processes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from runtime.security.devtools import DevIdentity
from runtime.store import Database
from runtime.store.migrations import DEFAULT_DIRECTORY, discover_functions, discover_migrations
from tests.conftest import PgCluster
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import client as invocation_client
from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient
from tests.support.processes import worker_command
from tests.support.server import run_server

REPO = Path(__file__).resolve().parents[3]
CLI = (sys.executable, "-m", "runtime.cli")
WORKER_ID = "cli-worker"


async def _run(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *CLI, *args, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_migrate_brings_an_empty_database_to_the_latest_schema_once(
    pg_cluster: PgCluster,
) -> None:
    name = pg_cluster.new_name("cli-migrate")
    url = await pg_cluster.create_database(name)
    try:
        migrations = len(discover_migrations(DEFAULT_DIRECTORY))
        functions = len(discover_functions(DEFAULT_DIRECTORY))
        assert await _run("migrate", "--database-url", url) == (
            0,
            f"applied {migrations} migration(s), installed {functions} function file(s)\n",
        )
        assert await _run("migrate", "--database-url", url) == (0, "applied 0 migration(s)\n")
    finally:
        await pg_cluster.drop_database(name)


@asynccontextmanager
async def _worker(config: Path, database_url: str) -> AsyncIterator[None]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    args = [
        "--config", str(config), "--database-url", database_url,
        "--slots", "1", "--poll-interval-ms", "200", "--worker-id", WORKER_ID,
    ]  # fmt: skip
    async with worker_command(args, env, ready_timeout_s=90):
        yield


async def _wait_completed(client: McpTestClient, instance: dict[str, str]) -> dict[str, object]:
    while True:
        done = ok(await client.call_tool("workflow_wait_result", {**instance, "waitMs": 2000}))
        if done["state"] != "RUNNING" and done["state"] != "ACCEPTED":
            return done


async def test_a_run_started_through_serve_without_workers_completes_in_a_worker_process(
    database_url: str, db: Database, tmp_path: Path, dev_identity: DevIdentity
) -> None:
    with run_server(database_url, tmp_path, dev_identity, ["--no-workers"]) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            client = invocation_client(http, dev_identity)
            wf_def_id = new_id()
            digest = await save_head(client, wf_def_id, definition_yaml(marker=5))
            args = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}}
            receipt = ok(
                await client.call_tool(
                    "workflow_start", {**args, "expectedDefinitionDigest": digest}
                )
            )
            instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
            async with _worker(tmp_path / "workflow.yaml", database_url):
                async with asyncio.timeout(120):
                    done = await _wait_completed(client, instance)
    assert done["state"] == "COMPLETED", done
    assert done["output"]["marker"] == 5  # type: ignore[index]
    # Every task of the run was claimed by the worker process, none by the API process.
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT DISTINCT worker_id FROM workflow_task WHERE process_id = %s",
            (instance["workflowInstanceId"],),
        )
        assert [row["worker_id"] for row in await cursor.fetchall()] == [WORKER_ID]
