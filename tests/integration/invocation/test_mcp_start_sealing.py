"""workflow_start without a usable sealing key (issue 40, X-3): a run that calls out is refused
at once, as workflow_invoke is, instead of being accepted and failing at its first call."""

from __future__ import annotations

import dataclasses

import pytest

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.mcp.app import attach_services, create_app
from runtime.security import Keyring
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import client, ok, refused, save_head
from tests.support.mcp import McpTestClient, asgi_client

pytestmark = pytest.mark.requirement("000:Run credential selection")


async def _count_runs(services: Services) -> int:
    async with services.database.connection() as conn:
        row = await (await conn.execute("SELECT count(*) AS n FROM workflow_process")).fetchone()
    assert row is not None
    return int(row["n"])


async def test_a_start_that_calls_out_is_refused_without_a_sealing_key_and_one_that_does_not_starts(
    owner: McpTestClient, services: Services, dev_identity: DevIdentity
) -> None:
    calling, quiet = new_id(), new_id()
    await save_head(owner, calling, definition_yaml(calls=(("GET", "https://api.example.com/c"),)))
    await save_head(owner, quiet, definition_yaml())
    app = create_app()
    attach_services(app, dataclasses.replace(services, keyring=Keyring.empty()), HANDLERS)
    async with asgi_client(app) as http:
        starter = client(http, dev_identity, "starter", roles=("workflow-admin",))
        before = await _count_runs(services)
        body = refused(
            await starter.call_tool("workflow_start", {"wfDefId": calling, "input": {}}),
            "WORKFLOW_START_REJECTED",
        )
        assert "sealing key" in body["error"]["message"]
        assert await _count_runs(services) == before
        started = ok(await starter.call_tool("workflow_start", {"wfDefId": quiet, "input": {}}))
        assert started["state"] == "ACCEPTED"
