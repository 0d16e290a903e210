"""The fuzz suite drives a real server subprocess of its own, on its own live database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from runtime.security.devtools import DevIdentity
from tests.conftest import PgCluster
from tests.support.server import LiveServer, run_server, template_copy


@pytest.fixture(scope="session")
async def live_database(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """The fuzz suite's own live database (and server below), apart from other suites'."""
    async with template_copy(pg_cluster, migrated_template, "fuzz") as url:
        yield url


@pytest.fixture(scope="session")
def live_server(
    live_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The service the fuzz suite calls, on its own live database."""
    with run_server(live_database, tmp_path_factory.mktemp("fuzz-server"), live_identity) as server:
        yield server
