"""Faults injected for real: a dropped connection and a stopped database, seen at the endpoint."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.mcp.app import attach_services, create_app
from runtime.security import Authenticator, KeySet
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from runtime.store import Database, EmbeddedPostgres, migrate
from tests.support.binding_builders import OWNER
from tests.support.invocation import client, invoke_args, publish_tool, refused
from tests.support.mcp import MODERN, McpTestClient
from tests.support.publication import new_id, save_args
from tests.support.tokens import auth_headers
from tests.support.waiting import wait_until


@pytest.fixture
def own_cluster() -> Iterator[EmbeddedPostgres]:
    """A cluster of this test alone, so stopping it disturbs nobody else."""
    base = Path(tempfile.mkdtemp(prefix="wf-faults-"))
    base.chmod(0o755)
    cluster = EmbeddedPostgres(base / "pg", database="app", fast=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def fault_client(
    own_cluster: EmbeddedPostgres, dev_identity: DevIdentity
) -> AsyncIterator[tuple[McpTestClient, Database]]:
    url = own_cluster.url()
    await migrate(url)
    database = Database(url, min_size=1, max_size=2, timeout_s=2.0)
    await database.open()
    settings = Settings()
    settings.security = dev_identity.settings()
    services = Services(
        settings=settings,
        database=database,
        authenticator=Authenticator(settings.security, KeySet.from_settings(settings.security)),
        keyring=dev_identity.keyring(),
    )
    app = create_app()
    attach_services(app, services, HANDLERS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        client = McpTestClient(
            http,
            MODERN,
            auth_headers(
                dev_identity,
                dev_identity.user_token(roles=("workflow-admin",)),
                dev_identity.app_token(),
            ),
        )
        try:
            yield client, database
        finally:
            await database.close()


async def _save(client: McpTestClient) -> dict[str, Any]:
    return await client.call_tool("workflow_definition_save", save_args(new_id(), 1))


async def _saved(client: McpTestClient) -> bool:
    return not (await _save(client))["isError"]


async def test_connections_the_server_dropped_are_replaced_before_use(
    own_cluster: EmbeddedPostgres, fault_client: tuple[McpTestClient, Database]
) -> None:
    client, _ = fault_client
    assert (await _save(client))["isError"] is False
    with psycopg.connect(own_cluster.url(), autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    assert (await _save(client))["isError"] is False


async def test_a_stopped_database_answers_unavailable_and_recovers_when_it_returns(
    own_cluster: EmbeddedPostgres, fault_client: tuple[McpTestClient, Database]
) -> None:
    client, _ = fault_client
    assert (await _save(client))["isError"] is False
    await asyncio.to_thread(own_cluster.stop)
    down = await _save(client)
    assert down["isError"] is True
    error = down["structuredContent"]["error"]
    assert error["code"] == "WORKFLOW_INVOCATION_UNAVAILABLE"
    assert error["retryable"] is True
    assert "psycopg" not in str(down) and "SELECT" not in str(down)
    ready = await client.http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["database"] is False
    await asyncio.to_thread(own_cluster.start)
    await wait_until(
        lambda: _saved(client), what="a save once the database is back", within_s=20, every_s=0.2
    )
    assert (await client.http.get("/readyz")).status_code == 200


@pytest.mark.requirement("001:Idempotency And Side Effects")
async def test_a_wait_the_stopped_database_cut_off_names_the_admitted_run(
    own_cluster: EmbeddedPostgres,
    fault_client: tuple[McpTestClient, Database],
    dev_identity: DevIdentity,
) -> None:
    """Admitted, then the database stops during the wait: the answer names the run and says its
    state is unknown (issue 42 item 7), never "unavailable" with no instance, which reads as
    "nothing was admitted"."""
    http = fault_client[0].http
    owner = client(http, dev_identity, OWNER)
    caller = client(http, dev_identity, "cut-off")
    tool = await publish_tool(owner, syncWaitMs=15000)
    call = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))
    with psycopg.connect(own_cluster.url(), autocommit=True) as admin:
        while not admin.execute("SELECT 1 FROM workflow_process").fetchall():
            assert not call.done(), call.result()
            await asyncio.sleep(0.02)
        (admitted,) = (
            admin.execute("SELECT process_id::text FROM workflow_process").fetchone() or ()
        )
    await asyncio.to_thread(own_cluster.stop)
    async with asyncio.timeout(60):
        body = refused(await call, "WORKFLOW_INVOCATION_UNAVAILABLE")
    assert body["workflowInstanceId"] == admitted
    assert body["error"]["details"]["runState"] == "unknown"
    assert body["error"]["retryable"] is True and body["error"]["afterEffect"] is True
