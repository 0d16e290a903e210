"""The configuration document: each domain's settings under its section.

Each domain owns the struct of its section; the HTTP server's section lives here. Loading it
(the YAML file and WORKFLOW_<SECTION>_<KEY> variables) is the composition's business
(runtime/service/config.py); request-time code reads the loaded document through Services.
"""

from __future__ import annotations

import msgspec

from runtime.execution.settings import ServiceExecutionSettings
from runtime.publication.publication_settings import PublicationSettings
from runtime.scheduler.capacity import CapacitySettings
from runtime.security.settings import SecuritySettings
from runtime.store.settings import StoreSettings
from runtime.telemetry.settings import TelemetrySettings


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where the HTTP server listens and which browser origins it accepts."""

    host: str = "127.0.0.1"
    port: int = 8787
    allowed_origins: list[str] = msgspec.field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1"]
    )
    tools_list_page_size: int = 50
    tools_list_ttl_ms: int = 300_000
    # Whether tools/list answers without a bearer (a bearer that is sent must verify anyway).
    anonymous_discovery: bool = False
    # How long an idle keep-alive connection stays open (s). Longer than any client's idle
    # reuse (httpx keeps one 5 s, the Gateway's relay too): at equal values a client sends its
    # next request on the connection just as the server closes it, and sees a connection
    # closed without an answer (httpx ReadError) instead of a response.
    keep_alive_timeout_s: int = 75
    # On SIGTERM: in-flight result waits end at once (WORKFLOW_TIMEOUT naming the run, which
    # goes on durably); a request still unanswered after this many seconds is cancelled.
    shutdown_grace_s: float = 10.0


class GatewaySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The reference Gateway (`workflow-mcp gateway`): where it listens, what it serves.

    Its identity checks use the `security` section (the same trusted keys as the service).
    """

    host: str = "127.0.0.1"
    port: int = 8788
    # The mcp-router.yml snapshot of workflow-backed Tools (the publisher writes it).
    router_file: str = "mcp-router.yml"
    # How often, at most, the snapshot file is checked for a change (ms).
    reload_interval_ms: int = 500
    # Workflow's MCP endpoint.
    workflow_url: str = "http://127.0.0.1:8787/mcp"
    # The Gateway's own application bearer for calls to Workflow (a secret: prefer the
    # environment, WORKFLOW_GATEWAY_APP_TOKEN, or a file). Development: minted from the dev
    # identity when neither is set.
    app_token: str | None = None
    app_token_file: str | None = None
    # HTTP timeout of relayed calls (workflow_invoke uses the Tool's syncWaitMs + 2 s instead).
    relay_timeout_ms: int = 30_000
    # Idle keep-alive connections of the Gateway's own clients stay open this long (s): longer
    # than a client's idle reuse (httpx: 5 s), as server.keep_alive_timeout_s explains.
    keep_alive_timeout_s: int = 75
    tools_list_page_size: int = 50
    tools_list_ttl_ms: int = 60_000
    allowed_origins: list[str] = msgspec.field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1"]
    )

    def __post_init__(self) -> None:
        if self.reload_interval_ms < 0 or self.relay_timeout_ms <= 0:
            raise ValueError("gateway: reload_interval_ms >= 0 and relay_timeout_ms > 0")

    def __repr__(self) -> str:
        # app_token is a secret: never show it.
        return (
            f"GatewaySettings(host={self.host!r}, port={self.port}, "
            f"router_file={self.router_file!r}, workflow_url={self.workflow_url!r})"
        )


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The whole service configuration."""

    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    store: StoreSettings = msgspec.field(default_factory=StoreSettings)
    security: SecuritySettings = msgspec.field(default_factory=SecuritySettings)
    publication: PublicationSettings = msgspec.field(default_factory=PublicationSettings)
    # Durable execution in the service process (an in-process executor, outbound settings).
    execution: ServiceExecutionSettings = msgspec.field(default_factory=ServiceExecutionSettings)
    # Deadline-aware admission (load shedding) from measured executor capacity.
    capacity: CapacitySettings = msgspec.field(default_factory=CapacitySettings)
    # Log format and level, trace export (runtime/telemetry).
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)
    # The reference Gateway process (gateway/), when this file also configures one.
    gateway: GatewaySettings = msgspec.field(default_factory=GatewaySettings)
