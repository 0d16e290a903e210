"""The Gateway's section of the configuration document, and the document with it.

The same file configures the service and the reference Gateway: GatewayConfig is the service's
document (runtime.settings.Settings) with a `gateway` section, and the command line
(workflow_mcp.cli) loads every command's settings as it, WORKFLOW_GATEWAY_<KEY> included.
"""

from __future__ import annotations

import msgspec

from runtime.settings import Settings


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


class GatewayConfig(Settings, kw_only=True, forbid_unknown_fields=True):
    """The whole configuration document: the service's sections and the Gateway's."""

    # The reference Gateway process (gateway/), when this file also configures one.
    gateway: GatewaySettings = msgspec.field(default_factory=GatewaySettings)
