"""Fixtures of the Gateway's integration tests: the Gateway in front of the test's Workflow app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from litestar import Litestar

from gateway.app import Gateway, build_gateway, create_gateway_app
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.conftest import PgCluster
from tests.support.gateway import RecordingTransport, gateway_settings
from tests.support.server import template_copy


@pytest.fixture
def router_file(tmp_path: Path) -> Path:
    """Where this test's snapshot lives (absent until a test writes it)."""
    return tmp_path / "mcp-router.yml"


@pytest.fixture
def workflow_seen(app: Litestar) -> RecordingTransport:
    """The Gateway's way to the in-process Workflow app, recording every request."""
    return RecordingTransport(httpx.ASGITransport(app=app))


@pytest.fixture
async def gateway(
    settings: Settings,
    router_file: Path,
    dev_identity: DevIdentity,
    workflow_seen: RecordingTransport,
) -> AsyncIterator[Gateway]:
    """A Gateway minting its app bearer from the dev identity, in front of the test Workflow."""
    wired = build_gateway(
        gateway_settings(settings, router_file), identity=dev_identity, transport=workflow_seen
    )
    yield wired
    await wired.client.aclose()


@pytest.fixture
async def gateway_http(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the Gateway's ASGI app, in the test's event loop."""
    transport = httpx.ASGITransport(app=create_gateway_app(gateway))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        yield client


@pytest.fixture(scope="session")
async def live_database(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """The publisher tests' own live database: the e2e suite publishes the same examples."""
    async with template_copy(pg_cluster, migrated_template, "publisher") as url:
        yield url
