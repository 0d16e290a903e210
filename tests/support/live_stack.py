"""The qualification stack: the service as a subprocess, its backends on threads, and clients.

One stack per session (``qual_stack``): a recording backend that also plays the Gateway's MCP
endpoint for nested calls, a development RFC 8693 token-exchange endpoint (light-oauth's
part), a client-credentials endpoint that gives Workflow its own application token for nested
calls, and the service started against them on its own database. Tests publish their own
Tools with fresh ids, so they share the processes without sharing state.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.security.dev_client_credentials import DEV_SERVICE_CLIENT_ID, DevClientCredentials
from runtime.security.dev_token_exchange import DEV_EXCHANGE_CLIENT_ID, DevTokenExchange
from runtime.security.devtools import DevIdentity
from tests.support.live_backends import CountingApp, RecordingBackend, serving_on_thread
from tests.support.scale_out import scalar
from tests.support.server import (
    REPO_ROOT,
    LiveServer,
    free_port,
    run_server,
    stop_process,
    wait_until_answering,
    write_config,
)

EXCHANGE_SECRET = "qualification-exchange-secret"
SERVICE_SECRET = "qualification-service-secret"


@dataclass(frozen=True)
class QualStack:
    """The running service and the backends it was configured to reach."""

    server: LiveServer
    database_url: str
    identity: DevIdentity
    backend: RecordingBackend
    backend_origin: str
    exchange: DevTokenExchange
    # Every request that reaches the exchange endpoint, refused ones included.
    exchange_traffic: CountingApp
    exchange_origin: str
    # Workflow's own client-credentials endpoint (its tokens ride nested MCP calls).
    service_tokens: DevClientCredentials
    directory: Path

    def unique_path(self, name: str) -> str:
        """A backend URI of its own for one test (holds and counts are per path)."""
        return f"{self.backend_origin}/{name}/{os.urandom(6).hex()}"

    async def count(self, sql: str, *params: Any) -> int:
        """One count read from the service's database as the schema owner."""
        return int(await scalar(self.database_url, sql, *params))


def stack_environment(
    backend_origin: str, exchange_origin: str | None, service_token: tuple[str, Path] | None = None
) -> dict[str, str]:
    """WORKFLOW_* settings that point the service at the stack's backends (and at a token
    exchange endpoint, and a client-credentials endpoint with its secret file, when given)."""
    values = {
        # Deadline-aware admission learns task service times from this process's runs, and
        # the tests hold runs at the backend on purpose: it would then refuse the short
        # budgets the timeout tests need. The checklist is about the Tool's own admission
        # rules (limits, re-attach), which stay on; an exit gate test turns it back on.
        "WORKFLOW_CAPACITY_ENABLED": "false",
        # The backends are plain http on loopback (loopback itself is allowed by the config).
        "WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES": json.dumps(["http", "https"]),
        # Runs without a binding (workflow_start) may call the backend.
        "WORKFLOW_EXECUTION_OUTBOUND_HTTP_ALLOWLIST": json.dumps([backend_origin]),
        "WORKFLOW_EXECUTION_OUTBOUND_GATEWAY_MCP_URL": f"{backend_origin}/mcp",
    }
    if exchange_origin is not None:
        exchange = "WORKFLOW_SECURITY_RUN_CREDENTIAL_TOKEN_EXCHANGE"
        values[f"{exchange}_ENDPOINT"] = f"{exchange_origin}/token"
        values[f"{exchange}_CLIENT_ID"] = DEV_EXCHANGE_CLIENT_ID
        values[f"{exchange}_CLIENT_SECRET"] = EXCHANGE_SECRET
    if service_token is not None:
        origin, secret_file = service_token
        client = "WORKFLOW_EXECUTION_OUTBOUND_SERVICE_TOKEN"
        values[f"{client}_ENDPOINT"] = f"{origin}/token"
        values[f"{client}_CLIENT_ID"] = DEV_SERVICE_CLIENT_ID
        values[f"{client}_CLIENT_SECRET_FILE"] = str(secret_file)
    return values


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with values set for the block (a started subprocess keeps its copy)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def running_stack(database_url: str, directory: Path, identity: DevIdentity) -> Iterator[QualStack]:
    """Backends on threads, then the service configured to reach them; all stopped after."""
    backend = RecordingBackend()
    exchange = identity.token_exchange(EXCHANGE_SECRET)
    traffic = CountingApp(exchange)
    service_tokens = identity.client_credentials(SERVICE_SECRET)
    secret_file = directory / "service-client-secret"
    secret_file.write_text(SERVICE_SECRET, encoding="utf-8")
    with ExitStack() as stack:
        backend_origin = stack.enter_context(serving_on_thread(backend))
        exchange_origin = stack.enter_context(serving_on_thread(traffic))
        token_origin = stack.enter_context(serving_on_thread(service_tokens))
        values = stack_environment(backend_origin, exchange_origin, (token_origin, secret_file))
        with environment(values):
            server = stack.enter_context(run_server(database_url, directory, identity))
        yield QualStack(
            server=server,
            database_url=database_url,
            identity=identity,
            backend=backend,
            backend_origin=backend_origin,
            exchange=exchange,
            exchange_traffic=traffic,
            exchange_origin=exchange_origin,
            service_tokens=service_tokens,
            directory=directory,
        )


@contextmanager
def keyless_server(
    database_url: str, directory: Path, identity: DevIdentity
) -> Iterator[LiveServer]:
    """The service with no run-credential keyring configured, until the block exits.

    It is alive (/healthz) but never ready (/readyz names the keyring), so run_server's
    readiness wait does not apply; this waits for liveness instead.
    """
    port = free_port()
    config = write_config(directory, identity, port)
    env = dict(os.environ, DATABASE_URL=database_url, WORKFLOW_CONFIG=str(config))
    env["WORKFLOW_SECURITY_KEYRING_FILE"] = "null"
    server = LiveServer(f"http://127.0.0.1:{port}", identity, directory / "server.log")
    with server.log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "serve", "--config", str(config)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,
        )  # fmt: skip
    atexit.register(stop_process, process)
    try:
        # A keyless service is never ready (/readyz 503), but it is alive.
        wait_until_answering(process, server, "/healthz")
        yield server
    finally:
        stop_process(process)
        atexit.unregister(stop_process)
