"""The qualification suite runs against real processes (see tests/support/server.py).

``live_server`` is the plain service; ``qual_stack`` is the service configured to reach the
suite's local backends and token-exchange endpoint (tests/support/live_stack.py), with
``owner``/``caller`` MCP clients of it over HTTP (they replace tests/conftest.py's in-process
ones here); ``gateway_stack`` is a service and two Gateways as processes, for one module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack

import httpx
import pytest

from gateway.router import RouterSnapshot, write_snapshot
from runtime.security.devtools import DevIdentity
from tests.conftest import PgCluster
from tests.support.binding_builders import HOST, OWNER
from tests.support.gateway import GatewayStack, run_gateway
from tests.support.invocation import client
from tests.support.live_stack import QualStack, environment, running_stack
from tests.support.mcp import McpTestClient
from tests.support.server import LiveServer, run_server, template_copy


@pytest.fixture(scope="session")
async def qual_database(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """A migrated database of the qualification stack, dropped after the session."""
    async with template_copy(pg_cluster, migrated_template, "qual") as url:
        yield url


@pytest.fixture(scope="session")
def qual_stack(
    qual_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QualStack]:
    """The qualification stack of the session."""
    directory = tmp_path_factory.mktemp("qual-stack")
    with running_stack(qual_database, directory, live_identity) as stack:
        yield stack


@pytest.fixture
async def live_http(qual_stack: QualStack) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the stack's service (generous timeouts: a call may wait 20 s)."""
    async with httpx.AsyncClient(base_url=qual_stack.server.base_url, timeout=60.0) as http:
        yield http


@pytest.fixture
def owner(live_http: httpx.AsyncClient, qual_stack: QualStack) -> McpTestClient:
    """The definition owner, over HTTP."""
    return client(live_http, qual_stack.identity, OWNER)


@pytest.fixture
def caller(live_http: httpx.AsyncClient, qual_stack: QualStack) -> McpTestClient:
    """A Tool user calling through the Gateway's application token, over HTTP."""
    return client(live_http, qual_stack.identity)


@pytest.fixture(scope="module")
async def gateway_database(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """A migrated database of the module's own service."""
    async with template_copy(pg_cluster, migrated_template, "gateway") as url:
        yield url


@pytest.fixture(scope="module")
def gateway_stack(
    gateway_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayStack]:
    """The service (its executor in process) and two Gateways in front of it, for HOST."""
    directory = tmp_path_factory.mktemp("gateway-stack")
    router = directory / "mcp-router.yml"
    write_snapshot(router, RouterSnapshot())
    (directory / "service").mkdir()
    with ExitStack() as stack:
        # Deadline-aware admission learns service times from held runs and would refuse the
        # short budgets here; the Tool's own admission rules (re-attach, limits) stay on.
        with environment({"WORKFLOW_CAPACITY_ENABLED": "false"}):
            server = stack.enter_context(
                run_server(gateway_database, directory / "service", live_identity)
            )
        first, second = (
            stack.enter_context(
                run_gateway(directory / name, live_identity, server.mcp_url, router, host_id=HOST)
            )
            for name in ("gateway-a", "gateway-b")
        )
        yield GatewayStack(
            server, gateway_database, live_identity, directory, router, (first, second)
        )


@pytest.fixture(scope="session")
async def live_database(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """The suite's own live database (and server below), apart from the e2e suite's."""
    async with template_copy(pg_cluster, migrated_template, "qual-live") as url:
        yield url


@pytest.fixture(scope="session")
def live_server(
    live_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The plain service of the qualification suite, on its own live database."""
    with run_server(
        live_database, tmp_path_factory.mktemp("qual-live-server"), live_identity
    ) as server:
        yield server
